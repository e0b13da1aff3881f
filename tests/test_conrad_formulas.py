"""apr.conrad claim C3 read at its bounds: forward exploration needs >= 8x the baseline's model
calls per issue, and conrad at most the baseline's + one per stage (4)."""

from __future__ import annotations

import pytest
from neuroedge.models.conrad.claims import claims


def runs(calls: dict[str, float], seeds: int = 2) -> dict:
    """Per-seed summaries with the same calls per issue in every seed (pass@1 irrelevant)."""
    p = {"baseline": 0.2, "conrad": 0.5, "no_guardian": 0.3, "forward": 0.3}
    one = {a: {"pass_at_1": p[a], "model_calls": calls[a]} for a in p}
    return {s: {"summary": one} for s in range(seeds)}


@pytest.mark.parametrize(
    ("forward", "holds"),
    [(20.0, False), (16.0, False), (31.9, False), (32.0, True), (40.0, True)],
)
def test_c3_needs_forward_exploration_of_at_least_8x_the_baseline_calls(
    forward: float, holds: bool
) -> None:
    calls = {"baseline": 4.0, "conrad": 8.0, "no_guardian": 5.0, "forward": forward}
    c3 = claims(runs(calls), 20)["C3_calls"]
    assert c3["calls"]["forward"] == forward  # 5x, 4x, just under 8x, 8x, 10x the baseline
    assert c3["holds"] is holds


@pytest.mark.parametrize(("conrad", "holds"), [(8.0, True), (8.5, False), (9.0, False)])
def test_c3_allows_conrad_one_call_more_per_stage_than_the_baseline(
    conrad: float, holds: bool
) -> None:
    calls = {"baseline": 4.0, "conrad": conrad, "no_guardian": 5.0, "forward": 40.0}
    assert claims(runs(calls), 20)["C3_calls"]["holds"] is holds


def test_c3_reads_the_mean_calls_over_seeds() -> None:
    out = runs({"baseline": 4.0, "conrad": 8.0, "no_guardian": 5.0, "forward": 40.0})
    out[1] = {"summary": {**out[1]["summary"], "forward": {"pass_at_1": 0.3, "model_calls": 20.0}}}
    c3 = claims(out, 20)["C3_calls"]
    assert c3["calls"]["forward"] == 30.0 and c3["holds"] is False  # mean 7.5x < 8x
