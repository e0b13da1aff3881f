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


def test_every_evaluation_cell_is_run_and_paired_on_the_same_seeds(monkeypatch):
    from neuroedge.models.specprune import bench

    seen = []

    def fake_job(job):
        source, backend, method, _, task, n, seed0 = job
        seen.append((method, task))
        assert seed0 == 20_000  # every cell runs the layouts asked for
        outcomes = [(ep * len(method)) % 4 < 2 for ep in range(n)]
        return {
            "method": method,
            "task": task,
            "wins": sum(outcomes),
            "episodes": n,
            "outcomes": outcomes,
            "kept": [48] * n,
            "modes": ["fine"] * n,
        }

    monkeypatch.setattr(bench, "evaluate_job", fake_job)
    configs = dict.fromkeys(bench.METHOD_ORDER, PruneConfig())
    results = bench.evaluate_all(
        dict.fromkeys(bench.METHOD_ORDER, "x"),
        "host",
        configs,
        ("button", "reach"),
        6,
        workers=1,
        seed0=20_000,
    )
    assert len(seen) == 8 and len(set(seen)) == 8  # none skipped (tqdm.update once did that)
    for m in bench.METHOD_ORDER:
        assert set(results[m]["per_task"]) == {"button", "reach"}
    paired, lines = bench.paired_table(results, ("button", "reach"), 6)
    assert paired["unpruned"]["only_this"] == paired["unpruned"]["only_unpruned"] == 0
    mine = np.array(results["fastv"]["outcomes"])
    base = np.array(results["unpruned"]["outcomes"])
    assert paired["fastv"]["only_unpruned"] == int((base & ~mine).sum()) > 0
    assert any(line.startswith("| specprune |") for line in lines)


def test_random_shift_moves_images_within_the_pad():
    from neuroedge.models.specprune.train import random_shift

    images = torch.zeros(8, 16, 16, 3, dtype=torch.uint8)
    images[:, 6:10, 6:10] = 255  # a bright square in the middle
    shifted = random_shift(images, 3, torch.Generator().manual_seed(0))
    assert shifted.shape == images.shape and shifted.dtype == torch.uint8
    assert (shifted.flatten(1) == 255).sum(1).eq(4 * 4 * 3).all()  # moved, never cut
    assert any(not torch.equal(shifted[i], images[i]) for i in range(8))
    assert torch.equal(random_shift(images, 0, torch.Generator()), images)


def tiny_training_setup(seed: int = 0):
    from neuroedge.models.specprune.data import CHUNK, TEXT_LEN
    from neuroedge.models.specprune.train import DEFAULTS, make_policy

    cfg = {**DEFAULTS, "dim": 32, "heads": 2, "depth": 1, "ffn": 64, "batch": 4, "shift": 2}
    rng = np.random.default_rng(seed)
    n = 10
    tensors = [
        torch.from_numpy(a)
        for a in (
            rng.integers(0, 256, (n, 64, 64, 3), dtype=np.uint8),
            rng.integers(0, 256, (n, 64, 64, 3), dtype=np.uint8),
            rng.normal(0, 0.3, (n, 4)).astype(np.float32),
            rng.integers(1, 4, (n, TEXT_LEN)).astype(np.int64),
            rng.normal(0, 0.5, (n, CHUNK, 4)).astype(np.float32),
        )
    ]
    torch.manual_seed(seed)
    return cfg, make_policy(cfg).train(), tensors


def test_training_phase_runs_exactly_its_step_count_across_epochs():
    from neuroedge.models.specprune.train import run_phase

    cfg, policy, tensors = tiny_training_setup()
    before = [p.detach().clone() for p in policy.parameters()]
    losses = run_phase(policy, tensors, cfg, 1e-3, 5, "test")  # 2 batches per epoch: 3 epochs
    assert len(losses) == 5 and all(np.isfinite(losses))
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))


def test_step_counted_recipe_is_reproducible_from_the_seed():
    from neuroedge.models.specprune.train import run_phase

    weights = []
    for _ in range(2):
        cfg, policy, tensors = tiny_training_setup()
        run_phase(policy, tensors, cfg, 1e-3, 3, "phase 1")
        run_phase(policy, tensors, cfg, 6e-4, 2, "phase 2")
        weights.append([p.detach().clone() for p in policy.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*weights, strict=True))


def test_training_refuses_negative_step_counts_and_too_few_samples():
    from neuroedge.models.specprune.train import run_phase, train

    with pytest.raises(ValueError, match="finetune_steps must be >= 0"):
        train({"finetune_steps": -1})
    with pytest.raises(ValueError, match="nothing to train"):
        train({"steps": 0, "finetune_steps": 0})
    cfg, policy, tensors = tiny_training_setup()
    with pytest.raises(ValueError, match="fewer than one batch"):
        run_phase(policy, [t[:2] for t in tensors], cfg, 1e-3, 1, "test")


def test_budget_sweep_labels_configs_and_bad_budgets():
    from neuroedge.models.specprune.bench import base_method, sweep_configs

    configs = sweep_configs([16, 1, 16], 128)
    assert list(configs) == [
        "specprune@budget=16",
        "fastv@budget=16",
        "random@budget=16",
        "specprune@budget=1",
        "fastv@budget=1",
        "random@budget=1",
    ]
    assert (
        configs["specprune@budget=16"].budget_coarse,
        configs["specprune@budget=16"].budget_fine,
    ) == (11, 16)
    assert configs["specprune@budget=1"].budget_coarse == 1
    assert configs["fastv@budget=1"].budget("coarse") == configs["fastv@budget=1"].budget("fine")
    assert base_method("random@budget=8") == "random" and base_method("fastv") == "fastv"
    assert sweep_configs([], 128) == {}
    with pytest.raises(ValueError, match=r"outside 1\.\.128"):
        sweep_configs([0, 8], 128)
    with pytest.raises(ValueError, match="list of integers"):
        sweep_configs("8", 128)
    with pytest.raises(ValueError, match="unknown method 'fastw'"):
        base_method("fastw@budget=8")


def test_candidates_replace_fields_and_bad_ones_name_the_valid_fields():
    from neuroedge.models.specprune.bench import base_method, candidate_configs

    base = PruneConfig()
    configs = candidate_configs(
        [{"budget_coarse": 40, "budget_fine": 56}, {"dynamic_layers": [2, 4], "dynamic_keep": 1.0}],
        base,
    )
    assert list(configs) == ["specprune@candidate=0", "specprune@candidate=1"]
    first, second = configs.values()
    assert (first.budget_coarse, first.budget_fine, first.k_global) == (40, 56, base.k_global)
    assert second.dynamic_layers == (2, 4) and second.budget_fine == base.budget_fine
    assert base_method("specprune@candidate=1") == "specprune"
    assert candidate_configs([], base) == {}
    with pytest.raises(
        ValueError,
        match=r"candidate 0: \['budget'\] are not PruneConfig "
        r"fields; valid: \['budget_coarse'",
    ):
        candidate_configs([{"budget": 40}], base)
    with pytest.raises(ValueError, match="list of objects"):
        candidate_configs({"budget_fine": 40}, base)
    with pytest.raises(ValueError, match=r"budget_coarse \(64\) <= budget_fine \(48\)"):
        candidate_configs([{"budget_coarse": 64}], base)


def test_seed0_must_not_reuse_training_layouts():
    from neuroedge.models.specprune.bench import layout_seed0
    from neuroedge.models.specprune.data import EVAL_SEED0, TUNE_SEED0

    assert layout_seed0(EVAL_SEED0, 300) == EVAL_SEED0
    assert layout_seed0(TUNE_SEED0, 300) == TUNE_SEED0
    assert TUNE_SEED0 >= EVAL_SEED0 + 1000  # room for 1000 evaluation episodes per task
    with pytest.raises(ValueError, match=r"overlaps the training layouts 0\.\.299"):
        layout_seed0(299, 300)
    with pytest.raises(ValueError, match="integer layout seed"):
        layout_seed0("20000", 300)


def test_candidate_selection_takes_the_best_success_among_fast_enough_settings():
    from neuroedge.models.specprune.bench import select_candidate, selection_lines
    from neuroedge.types import Measurement, Report

    def timed(variant, speedup, success, backend="onnxrt"):
        return Report(
            "vla.specprune",
            backend,
            variant,
            metrics={
                "speedup": Measurement(speedup, "x"),
                "success_rate": Measurement(success, "fraction"),
            },
        )

    rows = [
        timed("unpruned", 1.0, 0.70),
        timed("specprune", 1.6, 0.62),
        timed("fastv", 1.55, 0.69),  # not a SpecPrune setting: never picked
        timed("specprune@candidate=0", 1.47, 0.66),
        timed("specprune@candidate=1", 1.30, 0.70),  # best success but too slow
        timed("specprune@candidate=2", 1.52, 0.66),  # ties candidate 0 and is faster
        timed("specprune@candidate=1", 9.0, 0.99, backend="host"),
    ]  # other backend
    sel = select_candidate(rows, "onnxrt", min_speedup=1.45)
    assert sel["pick"] == "specprune@candidate=2"
    assert [c["variant"] for c in sel["candidates"]] == [
        "specprune",
        "specprune@candidate=0",
        "specprune@candidate=1",
        "specprune@candidate=2",
    ]
    assert sel["candidates"][0]["drop_points"] == pytest.approx(8.0)
    assert select_candidate(rows, "onnxrt", min_speedup=2.0)["pick"] is None
    configs = {
        "specprune": PruneConfig(),
        **{f"specprune@candidate={i}": PruneConfig(budget_fine=48 + i) for i in range(3)},
    }
    lines = selection_lines(sel, configs)
    assert "| specprune | 1.60 | 0.620 | 8.0 | defaults |" in lines
    assert "| specprune@candidate=2 | 1.52 | 0.660 | 4.0 | {'budget_fine': 50} |" in lines
    assert "Pick: specprune@candidate=2" in lines


def test_budget_sweep_cells_are_evaluated_paired_and_plotted(monkeypatch, tmp_path):
    from neuroedge.bench.report import build_document
    from neuroedge.models.specprune import bench

    def fake_job(job):
        _, _, label, prune, task, n, _ = job
        budget = prune["budget_fine"]
        outcomes = [ep < min(n, budget // 4) for ep in range(n)]  # success grows with budget
        return {
            "method": label,
            "task": task,
            "wins": sum(outcomes),
            "episodes": n,
            "outcomes": outcomes,
            "kept": [budget] * n,
            "modes": ["fine"] * n,
        }

    monkeypatch.setattr(bench, "evaluate_job", fake_job)
    configs = {
        "unpruned": PruneConfig(budget_coarse=128, budget_fine=128),
        **bench.sweep_configs([8, 16], 128),
    }
    results = bench.evaluate_all(
        dict.fromkeys(configs, "x"), "onnxrt", configs, ("button",), 8, workers=1
    )
    assert set(results) == set(configs)
    assert results["fastv@budget=16"]["wins"] == {"button": 4}
    assert results["random@budget=8"]["wins"] == {"button": 2}
    paired, lines = bench.paired_table(results, ("button",), 8)
    assert paired["fastv@budget=8"]["only_unpruned"] == 6
    assert any(line.startswith("| specprune@budget=8 |") for line in lines)
    rows = [
        bench.sweep_row(m, results[m], 1e6, [results[m]["kept"]] * 4, "onnxrt") for m in configs
    ]
    assert rows[1].variant == "specprune@budget=8"
    assert rows[1].metrics["success_rate"].value == pytest.approx(2 / 8)
    doc = build_document("vla.specprune", rows, success_evaluated_on="onnxrt")
    path = bench.budget_plot(doc, tmp_path / "budget.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bench.speedup_plot(doc, tmp_path / "speedup.png")  # sweep rows carry no speedup: skipped


def test_rival_pairs_count_discordant_episodes_and_test_them():
    from neuroedge.models.specprune.bench import rival_pairs

    n = 40
    spec = [True] * 30 + [False] * 10
    fastv = [True] * 20 + [False] * 20  # 10 episodes only specprune won, none only fastv
    rand = [False] * 2 + [True] * 28 + [True] * 2 + [False] * 8  # 2 each way
    results = {
        "unpruned": {"outcomes": [True] * n},
        "specprune": {"outcomes": spec},
        "fastv": {"outcomes": fastv},
        "random": {"outcomes": rand},
        "specprune@budget=1": {"outcomes": fastv},
        "fastv@budget=1": {"outcomes": spec},
    }
    pairs, lines = rival_pairs(results)
    by = {(p["specprune"], p["rival"]): p for p in pairs}
    assert set(by) == {
        ("specprune", "fastv"),
        ("specprune", "random"),
        ("specprune@budget=1", "fastv@budget=1"),
    }  # random@budget=1 absent
    top = by[("specprune", "fastv")]
    assert (top["only_specprune"], top["only_rival"]) == (10, 0)
    assert top["p_value"] == pytest.approx(2 * 0.5**10) and top["better"]
    tie = by[("specprune", "random")]
    assert (tie["only_specprune"], tie["only_rival"]) == (2, 2) and not tie["better"]
    assert tie["p_value"] == pytest.approx(1.0)
    worse = by[("specprune@budget=1", "fastv@budget=1")]
    assert worse["only_rival"] == 10 and not worse["better"]
    assert any(line.startswith("| specprune | random | 2 | 2 |") for line in lines)
