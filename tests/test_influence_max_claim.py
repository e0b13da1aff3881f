"""graph.influence_max: the claim verdict (UCB's log-log regret slope < 0.6 and regret < 0.25 x
random's, per graph) from hand-built curves, the rho=0 ablation row and rho in UCB notes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from neuroedge.models.influence_max import experiment as X

T = np.arange(1, 401, dtype=float)


def result(ucb: np.ndarray, random: np.ndarray = 10 * T, rho: float = 0.1) -> dict:
    curves = {"ucb": ucb, "ucb_rho0": 0.5 * random, "epsilon_greedy": 0.2 * random}
    curves["random"] = random
    return {
        "n": 20,
        "edges": 40,
        "horizon": len(T),
        "best_set": [0, 1],
        "best_spread": 7.0,
        "rho": {"ucb": rho, "ucb_rho0": 0.0},
        "regret": {k: np.asarray(v, float).tolist() for k, v in curves.items()},
    }


def test_sqrt_regret_far_below_random_holds():
    c = X.claim({"g": result(10 * np.sqrt(T))})  # slope 0.5, ratio 200 / 4000 = 0.05
    g = c["graphs"]["g"]
    assert g["slope"] == pytest.approx(0.5, abs=1e-6)
    assert g["regret_vs_random"] == pytest.approx(0.05)
    assert g["slope_holds"] is True and g["ratio_holds"] is True and g["holds"] is True
    assert g["rho"] == 0.1 and g["horizon"] == 400
    assert c["holds"] is True


@pytest.mark.parametrize(
    "ucb, slope_holds, ratio_holds",
    [
        (0.1 * T, False, True),  # linear regret, small: slope 1
        (100 * np.sqrt(T), True, False),  # sqrt regret, but half of random's
        (3 * T, False, False),  # both
    ],
)
def test_failing_parts_fail_the_graph_and_the_claim(ucb, slope_holds, ratio_holds):
    c = X.claim({"good": result(10 * np.sqrt(T)), "bad": result(ucb)})
    bad = c["graphs"]["bad"]
    assert (bad["slope_holds"], bad["ratio_holds"]) == (slope_holds, ratio_holds)
    assert bad["holds"] is False and c["graphs"]["good"]["holds"] is True
    assert c["holds"] is False


def test_zero_random_regret_leaves_the_ratio_unmeasured():
    c = X.claim({"g": result(10 * np.sqrt(T), random=np.zeros_like(T))})
    g = c["graphs"]["g"]
    assert g["regret_vs_random"] is None and g["ratio_holds"] is None and g["holds"] is None
    assert c["holds"] is None  # not measured, never a pass
    failing = X.claim({"g": result(T, random=np.zeros_like(T))})
    assert failing["holds"] is False


def test_rows_include_the_rho0_ablation_and_give_rho_in_ucb_notes():
    rows = {r.variant: r for r in X.rows_from({"g": result(10 * np.sqrt(T), rho=0.3)})}
    assert list(rows) == ["g/ucb", "g/ucb_rho0", "g/epsilon_greedy", "g/random"]
    assert "rho=0.3" in rows["g/ucb"].notes[0]
    assert "rho=0 (greedy on the MLE, no optimism)" in rows["g/ucb_rho0"].notes[0]
    assert "rho=" not in rows["g/random"].notes[0]
    assert rows["g/ucb_rho0"].metrics["regret_vs_random"].value == pytest.approx(0.5)


def test_bench_runs_the_ablation_and_writes_the_claim(tmp_path, monkeypatch):
    seen = []

    def fake_run_graph(name, graph, cfg):
        seen.append(name)
        return result(10 * np.sqrt(T) if name == "karate" else 0.1 * T)

    monkeypatch.setattr(X, "run_graph", fake_run_graph)
    config = {"graphs": ["karate", "random20"]}
    X.bench(str(tmp_path), config=config, history=str(tmp_path / "h.sqlite"))
    doc = json.loads((tmp_path / "report.json").read_text())
    assert seen == ["karate", "random20"]
    assert doc["claim"]["graphs"]["karate"]["holds"] is True
    assert doc["claim"]["graphs"]["random20"]["slope_holds"] is False
    assert doc["claim"]["holds"] is False
    md = (tmp_path / "report.md").read_text()
    assert "## Claim" in md and "| random20 | 400 | 0.1 | 1.000 | **no** |" in md
    assert "All: NOT met." in md


def test_run_graph_runs_the_rho0_ablation_beside_ucb(monkeypatch):
    from neuroedge.models.influence_max import learner as L

    rhos = []
    real_ucb = L.ucb_policy
    monkeypatch.setattr(L, "ucb_policy", lambda k, w, rho: rhos.append(rho) or real_ucb(k, w, rho))
    cfg = {**X.DEFAULTS, "horizon": 6, "worlds": 10, "eval_worlds": 20, "rho": 0.4}
    res = X.run_graph("random20", X.load_graph("random20", cfg), cfg)
    assert sorted(rhos) == [0.0, 0.4]
    assert list(res["regret"]) == list(X.POLICIES)
    assert res["rho"] == {"ucb": 0.4, "ucb_rho0": 0.0}


def test_the_slope_is_fitted_over_the_last_three_quarters_only():
    """Regret 40 sqrt(t) up to t=100, then growing linearly (slope 2): over [T/4, T] the
    log-log slope is ~0.68 (claim not met), over [1, T] it would read ~0.56 (met)."""
    t = np.arange(1, 401, dtype=float)
    regret = np.where(t <= 100, 40 * np.sqrt(t), 400 + 2 * (t - 100))
    slope = X.loglog_slope(regret)
    late = np.arange(101, 401)
    assert slope == pytest.approx(np.polyfit(np.log(late), np.log(regret[late - 1]), 1)[0])
    assert slope > 0.6


@pytest.mark.parametrize(
    ("slope", "holds"), [(X.CLAIM_SLOPE, False), (np.nextafter(X.CLAIM_SLOPE, 0), True)]
)
def test_a_slope_of_exactly_0_6_is_not_below_it(monkeypatch, slope, holds):
    monkeypatch.setattr(X, "loglog_slope", lambda curve: float(slope))
    g = X.claim({"g": result(10 * np.sqrt(T))})["graphs"]["g"]
    assert g["slope"] == slope and g["slope_holds"] is holds and g["holds"] is holds


@pytest.mark.parametrize(("final", "holds"), [(1000.0, False), (np.nextafter(1000.0, 0), True)])
def test_regret_of_exactly_a_quarter_of_random_is_not_below_it(final, holds):
    """UCB ends at 1000 against random's 4000: the ratio is exactly 0.25 in floats too."""
    ucb = 50 * np.sqrt(T)  # slope 0.5, 1000 at T = 400
    ucb[-1] = final
    g = X.claim({"g": result(ucb)})["graphs"]["g"]
    assert g["slope_holds"] is True and (g["regret_vs_random"] == X.CLAIM_RATIO) is not holds
    assert g["ratio_holds"] is holds and g["holds"] is holds


@pytest.mark.parametrize(
    ("final", "measured"),
    [(X.RATIO_FLOOR * len(T), False), (np.nextafter(X.RATIO_FLOOR * len(T), 1), True)],
)
def test_random_regret_at_the_floor_leaves_the_ratio_unmeasured(final, measured):
    random = 10 * T
    random[-1] = final
    g = X.claim({"g": result(10 * np.sqrt(T), random=random)})["graphs"]["g"]
    assert (g["regret_vs_random"] is not None) is measured
    assert (g["ratio_holds"] is None) is not measured
