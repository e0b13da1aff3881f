"""alloc.envy_free: the claim verdict in report.json / report.md, read from hand-built sweeps
(slope of tau_90 vs m in [1.1, 1.9], vs Delta in [-2.8, -1.6], success >= 0.95 at tau*)."""

from __future__ import annotations

import json

import pytest
from neuroedge.models.envy_free import experiment as X


def sweeps(slope_m: float = 1.6, slope_delta: float = -2.3, success=(1.0, 0.97)) -> dict:
    budget = [
        {"m": m, "delta": d, "tau_star": 7000, "success": s, "success_at_tau_star_over_1000": 0.3}
        for (m, d), s in zip([(400, 10), (800, 20)], success)
    ]
    return {
        "deltas": [8, 16, 32],
        "tau90_vs_delta": [66.0, 14.2, 2.4],
        "ms": [100, 200, 400, 800],
        "tau90_vs_m": [3.1, 8.9, 29.8, 80.4],
        "slope_tau_vs_m": slope_m,
        "slope_tau_vs_delta": slope_delta,
        "slope_queries_vs_m": slope_m + 1,
        "budget": budget,
        "brute_force": {"worst_gap": 0.1},
    }


def test_passing_sweeps_hold_every_part():
    c = X.claim(sweeps())
    assert c["slope_tau_vs_m"]["holds"] and c["slope_tau_vs_delta"]["holds"]
    assert c["success_at_tau_star"]["holds"]
    assert c["success_at_tau_star"]["value"] == {"m400_d10": 1.0, "m800_d20": 0.97}
    assert c["holds"] is True
    for edge in ({"slope_m": 1.1}, {"slope_m": 1.9}, {"slope_delta": -2.8}, {"success": (0.95,)}):
        assert X.claim(sweeps(**edge))["holds"] is True  # the bounds are inclusive


@pytest.mark.parametrize(
    "over, part",
    [
        ({"slope_m": 2.0}, "slope_tau_vs_m"),
        ({"slope_m": 1.0}, "slope_tau_vs_m"),
        ({"slope_m": float("nan")}, "slope_tau_vs_m"),
        ({"slope_delta": -1.5}, "slope_tau_vs_delta"),
        ({"slope_delta": -3.0}, "slope_tau_vs_delta"),
        ({"success": (1.0, 0.94)}, "success_at_tau_star"),
        ({"success": ()}, "success_at_tau_star"),
    ],
)
def test_a_failing_part_fails_it_and_the_claim_only(over, part):
    c = X.claim(sweeps(**over))
    assert c[part]["holds"] is False
    assert c["holds"] is False
    others = {"slope_tau_vs_m", "slope_tau_vs_delta", "success_at_tau_star"} - {part}
    assert all(c[o]["holds"] is True for o in others)


def test_bench_writes_the_claim_to_json_and_markdown(tmp_path, monkeypatch):
    monkeypatch.setattr(X, "run_sweeps", lambda cfg: sweeps(slope_delta=-1.2))
    X.bench(str(tmp_path), history=str(tmp_path / "h.sqlite"))
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["claim"]["holds"] is False
    assert doc["claim"]["slope_tau_vs_delta"] == {
        "value": -1.2,
        "bounds": [-2.8, -1.6],
        "holds": False,
    }
    md = (tmp_path / "report.md").read_text()
    assert "## Claim" in md and "slope of tau_90 vs Delta: -1.200" in md
    assert "All: NOT met." in md


@pytest.mark.parametrize(
    "over, unmeasured",
    [
        ({"budget_trials": 1}, {"success_at_tau_star"}),
        ({"budget_trials": 99}, {"success_at_tau_star"}),
        ({"trials": 1}, {"slope_tau_vs_m", "slope_tau_vs_delta"}),
    ],
)
def test_too_few_instances_leave_a_part_not_measured(over, unmeasured):
    c = X.claim(sweeps(), {**X.DEFAULTS, **over})
    key = next(iter(over))
    for part in unmeasured:
        assert c[part]["holds"] is None
        assert c[part]["reason"] == (
            f"not measured: {key}={over[key]} instances, the claim needs >= 100"
        )
    assert all(c[o]["holds"] is True for o in set(X.DEFAULTS) & set(c) - unmeasured)
    assert c["holds"] is None  # never True on one instance per case
    failing = X.claim(sweeps(slope_m=3.0), {**X.DEFAULTS, "budget_trials": 1})
    assert failing["holds"] is False  # a failed part still fails the claim
    assert X.claim(sweeps(), {**X.DEFAULTS, "budget_trials": 100})["holds"] is True


def test_bench_with_one_budget_trial_says_not_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(X, "run_sweeps", lambda cfg: sweeps())
    X.bench(str(tmp_path), config={"budget_trials": 1}, history=str(tmp_path / "h.sqlite"))
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["claim"]["holds"] is None
    assert doc["claim"]["success_at_tau_star"]["holds"] is None
    md = (tmp_path / "report.md").read_text()
    assert "m400_d10: 1.000, m800_d20: 0.970 -> not measured: budget_trials=1 instances" in md
    assert "All: not all measured, none failed." in md
