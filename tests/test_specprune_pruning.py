"""vla.specprune: pruning math, controller, in-graph pruning, bad input, export parity."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from neuroedge.errors import ArtifactError
from neuroedge.models.specprune import functional as fn
from neuroedge.models.specprune.functional import PruneConfig


def small_policy(seed: int = 0):
    from neuroedge.models.specprune.train import DEFAULTS, make_policy

    torch.manual_seed(seed)
    return make_policy(DEFAULTS).eval()


def inputs(seed: int = 0) -> dict[str, np.ndarray]:
    from neuroedge.models.specprune.spec import example

    return example(seed)


def run(model, x):
    with torch.inference_mode():
        return model(
            *(torch.from_numpy(x[k]) for k in ("primary", "wrist", "proprio", "text", "prior"))
        )


def test_lookback_is_paper_formula_and_shrinks_with_speed():
    assert fn.lookback_steps(0.0) == 11  # floor(22/3) + 4
    assert fn.lookback_steps(1.0) == 6  # floor(-16/3 + 22/3) + 4
    steps = [fn.lookback_steps(v) for v in np.linspace(0, 1.5, 16)]
    assert all(a >= b for a, b in itertools.pairwise(steps))


def test_changed_patch_is_the_dynamic_set():
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    moved = frame.copy()
    moved[8:16, 16:24] = 255 - moved[8:16, 16:24]  # patch (row 1, col 2) -> index 10
    sim = fn.patch_similarity(frame, moved, 8)
    assert sim.shape == (64,)
    assert np.allclose(np.delete(sim, 10), 1.0)
    assert sim[10] < 0.9
    assert fn.dynamic_set(sim, tau=0.99, k=4).tolist() == [10]
    assert fn.dynamic_set(np.ones(64), tau=0.99, k=4).size == 0


def test_rank_confidence_weights_follow_rank_and_ema_mixes():
    score = torch.tensor([[0.1, 0.5, 0.2, 0.9]])
    s = fn.rank_confidence_score(score, k_rank=1.0)
    assert s.argmax().item() == 3 and s.argmin().item() == 0
    conf = score.mean() / (score.std() + 1e-6)
    assert torch.allclose(s.sum(), conf, atol=1e-5)  # rank weights sum to 1
    assert torch.allclose(fn.ema(torch.ones(1), torch.zeros(1), 0.2), torch.tensor([0.8]))


def test_controller_enters_fine_when_slow_and_not_lifting_and_leaves_when_fast():
    cfg = PruneConfig()
    coarse = fn.ControllerState(fn.COARSE)
    assert fn.controller_step(coarse, 0.1, 0.0, -0.001, cfg).mode == fn.FINE
    assert fn.controller_step(coarse, 0.1, 0.0, 0.004, cfg).mode == fn.COARSE  # lifting
    assert fn.controller_step(coarse, 0.1, 0.5, -0.001, cfg).mode == fn.COARSE  # rotating
    fine = fn.ControllerState(fn.FINE)
    assert fn.controller_step(fine, 0.2, 0.0, 0.01, cfg).mode == fn.FINE  # slow lift: stay
    assert fn.controller_step(fine, 0.9, 0.0, 0.0, cfg).mode == fn.COARSE


def test_full_budget_pruning_is_exactly_the_unpruned_network():
    model, x = small_policy(), inputs(1)
    reference, _ = run(model.configure("unpruned"), x)
    full = PruneConfig(budget_coarse=128, budget_fine=128, dynamic_keep=1.0)
    pruned, _ = run(model.configure("specprune", 128, 6, full), x)
    assert torch.allclose(reference, pruned, atol=1e-5)


def test_specprune_keeps_the_mode_budget_and_prunes_further_at_dynamic_layers():
    model, x = small_policy(), inputs(2)
    cfg = PruneConfig()
    for mode in ("coarse", "fine"):
        actions, scores = run(
            model.configure("specprune", cfg.budget(mode), cfg.k_local(mode), cfg), x
        )
        expected = fn.kept_after_dynamic(
            cfg.budget(mode), cfg.dynamic_layers, cfg.dynamic_keep, model.config["depth"]
        )[-1]
        assert int((scores > 0).sum()) == expected
        assert torch.isfinite(actions).all()


def test_static_set_contains_prior_and_local_tokens_within_budget():
    model = small_policy().configure("specprune", 32, 6, PruneConfig())
    score = torch.rand(1, 128)
    local = model.per_view_top(score)
    assert int(local.sum()) == 12  # 6 per view
    prior = torch.zeros(1, 128)
    prior[0, [3, 70, 127]] = 1.0
    keep = model.static_keep(local, prior, torch.zeros(1, 128), score)[0].tolist()
    assert len(keep) == 32 and keep == sorted(keep)
    assert {3, 70, 127} <= set(keep)
    assert set(local[0].nonzero().flatten().tolist()) <= set(keep)


def test_pruning_changes_actions_and_budget_matters():
    model, x = small_policy(), inputs(3)
    reference, _ = run(model.configure("unpruned"), x)
    small, _ = run(model.configure("random", 8, 0), x)
    large, _ = run(model.configure("random", 120, 0), x)
    assert (small - reference).abs().max() > (large - reference).abs().max()


@pytest.mark.parametrize("problem", ["missing_camera", "wrong_size", "nan_proprio", "wrong_dtype"])
def test_bad_observation_is_refused_before_inference(problem):
    from neuroedge.models.specprune.policy import PrunedPolicy

    calls = []
    policy = PrunedPolicy(lambda mode, x: calls.append(mode), "specprune", PruneConfig())
    obs = {
        "primary": np.zeros((64, 64, 3), np.uint8),
        "wrist": np.zeros((64, 64, 3), np.uint8),
        "proprio": np.zeros(4, np.float32),
        "instruction": "press the red button down",
    }
    if problem == "missing_camera":
        del obs["wrist"]
        match = "lacks \\['wrist'\\]"
    elif problem == "wrong_size":
        obs["primary"] = np.zeros((96, 96, 3), np.uint8)
        match = "camera 'primary': expected image shape \\(64, 64, 3\\), got \\(96, 96, 3\\)"
    elif problem == "nan_proprio":
        obs["proprio"] = np.array([0, np.nan, 0, 0], np.float32)
        match = "non-finite values at indices \\[1\\]"
    else:
        obs["wrist"] = np.zeros((64, 64, 3), np.float32)
        match = "expected dtype uint8"
    with pytest.raises((ValueError, TypeError), match=match):
        policy.select_action(obs)
    assert calls == []


def test_fewer_tokens_count_fewer_flops():
    from neuroedge.models.specprune.bench import decoder_flops

    model = small_policy()
    full, counts = decoder_flops(model, None, None)
    pruned, pruned_counts = decoder_flops(model, 32, PruneConfig())
    assert counts == [128] * model.config["depth"]
    assert pruned_counts[:3] == [128, 128, 32] and pruned_counts[-1] < 32
    assert pruned < 0.6 * full


def test_exported_onnx_policy_matches_eager_and_refuses_other_versions(tmp_path):
    pytest.importorskip("onnxruntime")
    import onnx
    from neuroedge.models.specprune.deploy import export_policy, load_policy
    from neuroedge.models.specprune.policy import PrunedPolicy, torch_engine

    model, cfg = small_policy(), PruneConfig()
    export_policy(model, tmp_path, "onnxrt", prune=cfg)
    ops = {n.op_type for n in onnx.load(str(tmp_path / "coarse.onnx")).graph.node}
    assert {"TopK", "GatherElements"} <= ops and "NonZero" not in ops
    exported = load_policy(tmp_path, "onnxrt")
    eager = PrunedPolicy(torch_engine(model, "specprune", cfg), "specprune", cfg)
    rng = np.random.default_rng(0)
    for step in range(3):  # several steps: the global and dynamic sets come into play
        obs = {
            "primary": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
            "wrist": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
            "proprio": np.array([0, 0.6, 0.2 - 0.001 * step, 1], np.float32),
            "instruction": "push the green drawer closed",
        }
        assert np.abs(exported.plan(obs) - eager.plan(obs)).max() < 1e-4
    assert exported.modes == eager.modes
    manifest = json.loads((tmp_path / "policy.json").read_text())
    coarse = (tmp_path / "coarse.onnx").read_bytes()
    (tmp_path / "coarse.onnx").write_bytes(coarse[: len(coarse) // 3])  # a truncated copy
    with pytest.raises(ArtifactError, match=r"coarse\.onnx.*(corrupt|truncated)"):
        load_policy(tmp_path, "onnxrt")
    (tmp_path / "coarse.onnx").write_bytes(coarse)
    for broken, said in (
        (b"\xff\xfe", "not UTF-8"),
        (b"[1, 2]", "a JSON list"),
        (
            json.dumps({**manifest, "files": {"coarse": "coarse.onnx"}}).encode(),
            "one per controller mode",
        ),
        (
            json.dumps({k: v for k, v in manifest.items() if k != "prune"}).encode(),
            "lacks \\['prune'\\]",
        ),
    ):
        (tmp_path / "policy.json").write_bytes(broken)
        with pytest.raises(ArtifactError, match=said):
            load_policy(tmp_path, "onnxrt")
    manifest["version"] = 99
    (tmp_path / "policy.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="version 99 was written by another neuroedge"):
        load_policy(tmp_path, "onnxrt")
    with pytest.raises(ArtifactError, match="no policy manifest"):
        load_policy(tmp_path / "nowhere", "onnxrt")
