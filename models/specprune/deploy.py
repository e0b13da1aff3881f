"""``export_policy(policy, dir, backend)`` and ``load_policy(dir, backend)`` for robot stacks.

A policy directory holds ``policy.json`` (format, version, method, pruning config, network
config, files per controller mode) and either:

* ``onnxrt``: one ONNX graph per controller mode (``coarse.onnx``, ``fine.onnx``), batch 1,
  every shape static: the pruning is TopK + Gather with that mode's fixed budget, so TensorRT
  can build one engine per mode. The pruning prior (global and dynamic sets) and the controller
  are cheap numpy pre-processing outside the graph (research 3.6).
* ``host``: ``policy.pt`` (state dict + network config), loaded with ``weights_only=True``.

A directory written by another format version is refused with the reason. A host directory
exported before e0a859b (no ViT stage) is refused naming its ``policy.pt``; an onnxrt one
of then runs as it did (its graphs return chunks of 4: ``PrunedPolicy`` measures speed and
look-back over the chunk the graph returns, not the package's CHUNK). The manifest's
``prune`` holds every PruneConfig field, ``lookback`` too; a manifest written before that field
existed loads with ``lookback="chunk"``, the rule its policy ran with.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.atomic import atomic_path, write_text
from neuroedge.errors import ArtifactError
from neuroedge.models.specprune.functional import COARSE, FINE, PruneConfig
from neuroedge.models.specprune.policy import Engine, PrunedPolicy, torch_engine

FORMAT, VERSION = "neuroedge.vla.specprune.policy", 1
BACKENDS = ("host", "onnxrt")
INPUTS = ("primary", "wrist", "proprio", "text", "prior")
OUTPUTS = ("actions", "scores")


def example_inputs(model: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Batch-1 network inputs of the right shapes and dtypes."""
    rng = np.random.default_rng(seed)
    size, cfg = model.config["image"], model.config
    return {
        "primary": rng.integers(0, 256, (1, size, size, 3), dtype=np.uint8),
        "wrist": rng.integers(0, 256, (1, size, size, 3), dtype=np.uint8),
        "proprio": rng.normal(size=(1, cfg["proprio"])).astype(np.float32),
        "text": rng.integers(1, cfg["vocab"], (1, cfg["text_len"]), dtype=np.int64),
        "prior": (rng.random((1, model.n_visual)) < 0.1).astype(np.float32),
    }


def export_mode_onnx(
    model: Any, method: str, prune: PruneConfig, mode: str, path: str | os.PathLike[str]
) -> Path:
    """One static-shape ONNX graph of ``model`` for controller ``mode``, checked by onnx."""
    import onnx
    import torch
    from neuroedge.export.onnx import torch_onnx_export

    model.configure(method, prune.budget(mode), prune.k_local(mode), prune).eval()
    args = tuple(torch.from_numpy(v) for v in example_inputs(model).values())
    with atomic_path(path) as tmp:
        torch_onnx_export(
            model,
            args,
            str(tmp),
            input_names=list(INPUTS),
            output_names=list(OUTPUTS),
            opset_version=17,
            dynamo=False,
            quiet_all=True,
        )
        onnx.checker.check_model(onnx.load(str(tmp)), full_check=True)
    return Path(path)


def export_policy(
    model: Any,
    out_dir: str | os.PathLike[str],
    backend: str = "onnxrt",
    *,
    method: str = "specprune",
    prune: PruneConfig | None = None,
) -> Path:
    """Write a policy directory for ``backend`` (host or onnxrt); returns the directory."""
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} is not one of {BACKENDS}")
    prune = prune or PruneConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if backend == "onnxrt":
        files = {mode: f"{mode}.onnx" for mode in (COARSE, FINE)}
        for mode, name in files.items():
            export_mode_onnx(model, method, prune, mode, out / name)
    else:
        from neuroedge.checkpoints import save_checkpoint

        files = {COARSE: "policy.pt", FINE: "policy.pt"}
        save_checkpoint(
            out / "policy.pt", {"state_dict": model.state_dict(), "config": dict(model.config)}
        )
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "backend": backend,
        "method": method,
        "prune": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(prune).items()},
        "model_config": dict(model.config),
        "files": files,
    }
    write_text(out / "policy.json", json.dumps(manifest, indent=2) + "\n")
    return out


def read_manifest(policy_dir: str | os.PathLike[str], backend: str) -> dict[str, Any]:
    """The checked ``policy.json``; another format, version or backend raises ArtifactError."""
    path = Path(policy_dir) / "policy.json"
    if not path.is_file():
        raise ArtifactError(f"{path}: no policy manifest (not a policy directory)")
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ArtifactError(f"{path}: not UTF-8 text at byte {err.start}") from err
    except json.JSONDecodeError as err:
        raise ArtifactError(f"{path}: not JSON at byte {err.pos} ({err.msg})") from err
    if not isinstance(manifest, dict):
        raise ArtifactError(f"{path}: a JSON {type(manifest).__name__}, expected an object")
    if manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path}: format {manifest.get('format')!r}, expected {FORMAT!r}")
    if manifest.get("version") != VERSION:
        raise ArtifactError(
            f"{path}: policy format version {manifest.get('version')!r} was "
            f"written by another neuroedge; this one reads version {VERSION}"
        )
    if manifest.get("backend") != backend:
        raise ArtifactError(
            f"{path}: exported for backend {manifest.get('backend')!r}, "
            f"asked to load it on {backend!r}"
        )
    missing = [k for k in ("method", "prune", "files") if k not in manifest]
    files = manifest.get("files")
    if missing or not isinstance(manifest["prune"], dict) or not isinstance(files, dict):
        raise ArtifactError(f"{path}: manifest lacks {missing or 'a prune/files object'}")
    if sorted(files) != sorted((COARSE, FINE)):
        raise ArtifactError(
            f"{path}: files for modes {sorted(files)}, expected one per "
            f"controller mode {[COARSE, FINE]}"
        )
    return manifest


def onnx_engine(sessions: Mapping[str, Any]) -> Engine:
    # A graph that ignores an input (``prior`` of unpruned/fastv) is exported without it.
    names = {mode: [i.name for i in sess.get_inputs()] for mode, sess in sessions.items()}

    def run(mode: str, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        actions, scores = sessions[mode].run(list(OUTPUTS), {k: inputs[k] for k in names[mode]})
        return actions, scores

    return run


def host_model(path: Path) -> Any:
    """The VLAPolicy (eval mode) of a host directory's ``policy.pt``; a network this
    neuroedge cannot build (a config of another version, weights that do not fit) raises
    ArtifactError naming the file."""
    from neuroedge.checkpoints import load_checkpoint, load_weights
    from neuroedge.models.specprune.module import VLAPolicy

    ckpt = load_checkpoint(path, required=("state_dict", "config"))
    config = ckpt["config"]
    redo = "re-export the policy (export_policy) from a checkpoint this neuroedge trained"
    if not isinstance(config, Mapping):
        raise ArtifactError(f"{path}: network config is a {type(config).__name__}, not a dict")
    if "vit_depth" not in config:  # every VLAPolicy since e0a859b (ViT stage, chunk 8) saves it
        raise ArtifactError(
            f"{path}: a network exported before neuroedge's ViT stage (e0a859b; chunk "
            f"{config.get('chunk')!r}), which this VLAPolicy cannot run (an onnxrt directory "
            f"of then still runs): {redo}"
        )
    try:
        model = VLAPolicy(**config)
    except TypeError as err:  # a key this VLAPolicy does not take
        raise ArtifactError(f"{path}: network config {err}; {redo}") from err
    except (ValueError, AssertionError, RuntimeError) as err:  # sizes no net has (dim % heads)
        raise ArtifactError(f"{path}: network config {dict(config)} builds no net: {err}") from err
    return load_weights(model, ckpt["state_dict"], path).eval()


def load_policy(
    policy_dir: str | os.PathLike[str],
    backend: str = "onnxrt",
    *,
    controller: bool = True,
    seed: int = 0,
    providers: str | None = "CPUExecutionProvider",
) -> PrunedPolicy:
    """A ``PrunedPolicy`` (``select_action(obs)``) from a directory written by export_policy.

    ``providers`` (onnxrt): ONNX Runtime execution providers, a comma list; None takes the
    accelerated ones present (CUDA, TensorRT) before the CPU. A provider asked for and not
    running is an error, not a silent CPU fallback. A missing or corrupt graph raises
    ArtifactError naming the file.
    """
    manifest = read_manifest(policy_dir, backend)
    fields = PruneConfig.__dataclass_fields__
    # a manifest written before PruneConfig.lookback existed ran the previous query's frame
    stored = {"lookback": "chunk", **manifest["prune"]}
    prune = PruneConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in stored.items() if k in fields}
    )
    base = Path(policy_dir)
    if backend == "onnxrt":
        from neuroedge.backends.onnxrt import open_session

        sessions = {}
        for mode, name in manifest["files"].items():
            sessions[mode], missed = open_session(base / name, providers)
            if missed and providers is not None:
                raise ArtifactError(f"{base / name}: {'; '.join(missed)}")
        engine = onnx_engine(sessions)
    else:
        engine = torch_engine(
            host_model(base / manifest["files"][COARSE]), manifest["method"], prune
        )
    return PrunedPolicy(engine, manifest["method"], prune, seed=seed, controller=controller)
