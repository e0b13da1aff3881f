"""vla.specprune benchmark: evaluation cells, row labels and configs, paired comparisons,
candidate selection, budget sweep plots."""

from __future__ import annotations

import numpy as np
import pytest

from neuroedge.models.specprune.functional import PruneConfig


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
        [{"budget_coarse": 40, "budget_fine": 56}, {"dynamic_layers": [3, 4], "dynamic_keep": 1.0}],
        base,
    )
    assert list(configs) == ["specprune@candidate=0", "specprune@candidate=1"]
    first, second = configs.values()
    assert (first.budget_coarse, first.budget_fine, first.k_global) == (40, 56, base.k_global)
    assert second.dynamic_layers == (3, 4) and second.budget_fine == base.budget_fine
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


def test_host_episode_cells_run_the_weights_the_bench_loaded(monkeypatch, tmp_path):
    """Every (method, task) cell loaded the checkpoint FILE again: a ``neuroedge train``
    finishing meanwhile made the success rates measure other weights (max |dw| 4.95) than the
    timings and the parity. The checkpoints hold untrained policies: no training, no episode."""
    from pathlib import Path

    import torch
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.models.specprune import bench, train

    path = tmp_path / "s.pt"

    def save(seed):
        torch.manual_seed(seed)
        policy = train.make_policy(train.DEFAULTS)
        save_checkpoint(path, train.checkpoint_payload(policy, train.DEFAULTS))
        return policy.state_dict()

    loaded, evaluated, copies = save(1), [], set()

    def cell(job):
        if not evaluated:
            save(2)  # another shell's `neuroedge train vla.specprune` saving to the same path
        evaluated.append(train.load_policy_checkpoint(job[0])[0].state_dict())
        copies.add(job[0])
        outcome = {"wins": 0, "episodes": 1, "outcomes": [False], "kept": [48], "modes": ["fine"]}
        return {"method": job[2], "task": job[4], **outcome}

    class Stop(Exception):
        pass

    def stop(*args):
        raise Stop

    monkeypatch.setattr(bench, "evaluate_job", cell)
    monkeypatch.setattr(bench, "record_observations", stop)  # after the episodes: enough
    config = {"checkpoint": str(path), "train_if_missing": False, "tasks": ["reach"]}
    with pytest.raises(Stop):
        bench.run_bench(str(tmp_path / "out"), ("host",), {**config, "episodes": 1})
    assert len(evaluated) == len(bench.METHOD_ORDER)
    for weights in evaluated:
        assert all(torch.equal(weights[k], v) for k, v in loaded.items())
    (copy,) = copies  # one frozen copy for every cell, removed when the episodes are done
    assert copy != str(path) and not Path(copy).exists()
