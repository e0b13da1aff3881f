"""vla.specprune: policy directories written by an older neuroedge (format version 1 still).

Until e0a859b the package's CHUNK was 4 and VLAPolicy had no ViT stage; the directories
exported then carry the same manifest version. Each test writes such a directory as that
export_policy did (manifest without ``lookback``, network config without ``vit_depth``, the
controller thresholds of then), small and untrained.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from neuroedge.errors import ArtifactError

# the ``prune`` of a manifest written at c58b73a: no ``lookback``, thresholds of then
OLD_PRUNE = {
    "budget_coarse": 32,
    "budget_fine": 48,
    "k_local_coarse": 6,
    "k_local_fine": 10,
    "k_global": 6,
    "k_dynamic": 4,
    "tau": 0.995,
    "dynamic_layers": [3, 5],
    "dynamic_keep": 0.85,
    "beta": 0.2,
    "eps": 1e-06,
    "v_t_threshold": 0.35,
    "v_r_threshold": 0.2,
    "v_max": 1.0,
}


def chunk4_network():
    """A small net returning chunks of 4 actions, as every policy before e0a859b did."""
    from neuroedge.models.specprune.data import vocabulary
    from neuroedge.models.specprune.module import VLAPolicy

    torch.manual_seed(0)
    return VLAPolicy(len(vocabulary()), dim=32, heads=2, depth=6, ffn=64, chunk=4).eval()


def write_old_manifest(out: Path, backend: str, model_config: dict, files: dict) -> None:
    manifest = {
        "format": "neuroedge.vla.specprune.policy",
        "version": 1,
        "backend": backend,
        "method": "specprune",
        "prune": OLD_PRUNE,
        "model_config": model_config,
        "files": files,
    }
    (out / "policy.json").write_text(json.dumps(manifest, indent=2) + "\n")


def old_onnx_directory(out: Path) -> Path:
    """An onnxrt directory as c58b73a wrote it: graphs returning 4 actions per chunk."""
    from neuroedge.models.specprune.deploy import export_mode_onnx
    from neuroedge.models.specprune.functional import PruneConfig

    model, prune = chunk4_network(), PruneConfig(v_t_threshold=0.35, v_r_threshold=0.2)
    out.mkdir()
    files = {mode: f"{mode}.onnx" for mode in ("coarse", "fine")}
    for mode, name in files.items():
        export_mode_onnx(model, "specprune", prune, mode, out / name)
    config = {k: v for k, v in model.config.items() if k != "vit_depth"}
    write_old_manifest(out, "onnxrt", config, files)
    return out


def observation(step: int, cm_per_step: float, rng: np.random.Generator) -> dict:
    return {
        "primary": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
        "wrist": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
        "proprio": np.array([0.01 * cm_per_step * step, 0.6, 0.2, 1.0]),
        "instruction": "press the button",
    }


def drive(policy, cm_per_step: float, steps: int = 24):
    rng = np.random.default_rng(0)
    for step in range(steps):
        policy.select_action(observation(step, cm_per_step, rng))
    return policy


def test_chunk4_onnx_policy_runs_with_its_own_chunk(tmp_path):
    """Its speed is per env step of the 4-step chunk it executed (HEAD divided by CHUNK=8:
    half the speed, so fine mode at 0.5 cm/step where the old code stayed coarse) and its
    ``chunk`` look-back goes round(T / 4) inferences back, as the old code did (HEAD: 1)."""
    pytest.importorskip("onnxruntime")
    from neuroedge.models.specprune.deploy import load_policy

    path = old_onnx_directory(tmp_path / "old")
    policy = load_policy(path, "onnxrt")
    assert policy.prune.lookback == "chunk"
    drive(policy, 1.0, steps=4)
    assert policy.chunk == 4 and not policy.queue
    rng = np.random.default_rng(1)
    assert policy.speed(observation(4, 1.0, rng))[0] == pytest.approx(1.0)

    moving = drive(load_policy(path, "onnxrt"), 0.5)
    assert moving.modes == ["coarse"] * 6  # v_t 0.5 > 0.35 at every inference
    still = drive(load_policy(path, "onnxrt"), 0.0)  # T(0) = 11: round(11 / 4) = 3 back
    assert still.lookbacks == [0, 4, 8, 12, 12, 12]


def old_host_directory(out: Path, config: dict, state_dict: dict) -> Path:
    from neuroedge.checkpoints import save_checkpoint

    out.mkdir()
    save_checkpoint(out / "policy.pt", {"state_dict": state_dict, "config": config})
    write_old_manifest(out, "host", config, {"coarse": "policy.pt", "fine": "policy.pt"})
    return out


def test_host_policy_of_another_network_is_refused_naming_the_file(tmp_path):
    """A c58b73a host directory (no ViT stage) failed with torch's RuntimeError 'Missing
    key(s) in state_dict: vit.0...'; a config key VLAPolicy does not take with a TypeError."""
    from neuroedge.models.specprune.deploy import load_policy

    model = chunk4_network()
    weights = {k: v for k, v in model.state_dict().items() if not k.startswith("vit.")}
    config = {k: v for k, v in model.config.items() if k != "vit_depth"}
    old = old_host_directory(tmp_path / "old", config, weights)
    with pytest.raises(ArtifactError, match=r"old/policy\.pt: .*before .*ViT.*re-export"):
        load_policy(old, "host")

    extra = old_host_directory(tmp_path / "extra", {**model.config, "depth_x": 2}, weights)
    with pytest.raises(ArtifactError, match=r"extra/policy\.pt: network config .*depth_x"):
        load_policy(extra, "host")
    unfit = old_host_directory(tmp_path / "unfit", model.config, weights)
    with pytest.raises(ArtifactError, match=r"unfit/policy\.pt: its weights do not fit"):
        load_policy(unfit, "host")
    for name, sizes in (("heads", {"dim": 30, "heads": 4}), ("negative", {"dim": -1})):
        odd = old_host_directory(tmp_path / name, {**model.config, **sizes}, weights)
        with pytest.raises(ArtifactError, match=rf"{name}/policy\.pt: network config .* builds"):
            load_policy(odd, "host")  # torch's AssertionError / RuntimeError
    listed = old_host_directory(tmp_path / "listed", list(model.config.items()), weights)
    with pytest.raises(ArtifactError, match=r"listed/policy\.pt: network config is a list, not"):
        load_policy(listed, "host")  # not a dict: 'list' object has no attribute 'get'
    fits = old_host_directory(tmp_path / "fits", model.config, model.state_dict())
    assert load_policy(fits, "host").prune.v_t_threshold == 0.35
