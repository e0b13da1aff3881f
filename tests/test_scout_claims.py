"""ltu.scout claims C1-C6 and the overall verdict on hand-built summaries: per claim, one case
that holds and one that fails, on each side of the notes' bounds (section 1.4)."""

from __future__ import annotations

from typing import Any

import pytest

from neuroedge.models.scout.claims import claim_section, claims

# a run where every claim holds: SCOUT 100 tokens, full context 1000 (10x), 1M at 1.2x 64k
GOOD: dict[str, dict[str, float]] = {
    "scout": {"tokens_per_question": 100.0, "accuracy": 1.0, "provenance": 1.0},
    "no_evaluate": {"accuracy_two_hop": 0.5},
    "react": {"accuracy_distractor": 0.5},
    "full_context": {"tokens_per_question": 1000.0, "accuracy": 0.5},
}


def run(**by_size: dict[str, dict[str, float]]) -> dict[str, Any]:
    """A result of sizes ``s<tokens>=overrides``: GOOD with each method's figures overridden;
    SCOUT's distractor accuracy 1.0 unless overridden."""
    sizes = {}
    for key, over in by_size.items():
        summary = {m: dict(v) for m, v in GOOD.items()}
        summary["scout"]["accuracy_distractor"] = 1.0
        for method, figures in over.items():
            summary[method].update(figures)
        sizes[key[1:]] = {"summary": summary}
    return {"sizes": sizes}


def verdicts(**by_size: dict[str, dict[str, float]]) -> dict[str, Any]:
    c = claims(run(**by_size))
    return {k: (v if k == "holds" else v["holds"]) for k, v in c.items()}


def test_every_claim_holds_on_a_good_run() -> None:
    v = verdicts(s64000={}, s1000000={"scout": {"tokens_per_question": 120.0}})
    assert v == {
        "C1_tokens_full_over_scout": True,
        "C2_scout_token_growth": True,
        "C3_accuracy": True,
        "C4_provenance": True,
        "C5_no_evaluate_two_hop": True,
        "C6_state_over_history_distractor": True,
        "holds": True,
    }


@pytest.mark.parametrize(
    ("full_tokens", "holds"),
    [(800.0, True), (799.0, False)],  # 8x SCOUT's 100 tokens is the bound
)
def test_c1_full_context_reads_8x_at_256k_and_up(full_tokens: float, holds: bool) -> None:
    big = {"full_context": {"tokens_per_question": full_tokens}}
    # 64k is below 256k: a small ratio there does not count
    small = {"full_context": {"tokens_per_question": 150.0}}
    v = verdicts(s64000=small, s256000=big, s1000000={})
    assert v["C1_tokens_full_over_scout"] is holds
    assert v["holds"] is holds


def test_c1_without_a_size_of_256k_is_not_measured_and_not_a_pass() -> None:
    small = {"full_context": {"tokens_per_question": 150.0}}  # 1.5x: would fail C1
    c = claims(run(s8000=small, s40000=small))
    c1 = c["C1_tokens_full_over_scout"]
    assert c1["holds"] is None and "256k" in c1["reason"]
    assert c["holds"] is None  # every other claim holds: unmeasured, not a pass
    worse = run(s8000=small, s40000={**small, "scout": {"provenance": 0.9}})
    assert claims(worse)["holds"] is False  # a failed claim outranks an unmeasured one
    doc = {"claim": c, "policy": "keyword"}
    doc["results"] = {
        "sizes": {z: {"tokens": 1, "lines": 1, "window_tokens": 9} for z in ("8000", "40000")}
    }
    text = "\n".join(claim_section(doc))
    assert "C1_tokens_full_over_scout: 8k: 1.5, 40k: 1.5 -> not measured (no document" in text
    assert "All: not all measured, none failed." in text


@pytest.mark.parametrize(("tokens", "holds"), [(150.0, True), (151.0, False)])
def test_c2_scout_cost_grows_at_most_1_5x(tokens: float, holds: bool) -> None:
    big = {"scout": {"tokens_per_question": tokens}, "full_context": {"tokens_per_question": 1e4}}
    v = verdicts(s64000={}, s1000000=big)
    assert v["C2_scout_token_growth"] is holds


@pytest.mark.parametrize(
    ("sizes", "why"),
    [
        ({"s256000": {}}, "the run has 256k"),  # one size: growth 1.0 held unmeasured
        ({"s256000": {}, "s1000000": {}}, "the run has 256k and 1M"),  # read 1M / 256k
        ({"s64000": {}, "s256000": {}}, "the run has 64k and 256k"),
    ],
)
def test_c2_needs_both_of_the_notes_sizes_and_is_never_a_pass_without(
    sizes: dict, why: str
) -> None:
    """C2 is tokens(1M) / tokens(64k): a run without both sizes leaves it unmeasured, and the
    overall verdict is then "not all measured", not a pass (every other claim holds)."""
    grow = {"scout": {"tokens_per_question": 400.0}, "full_context": {"tokens_per_question": 4e3}}
    c = claims(run(**{z: {**grow, **over} for z, over in sizes.items()}))
    c2 = c["C2_scout_token_growth"]
    assert c2["holds"] is None and c2["value"] is None
    assert c2["reason"] == f"needs document sizes 64k and 1M; {why}"
    assert c["holds"] is None
    doc = {"claim": c, "policy": "keyword"}
    doc["results"] = {
        "sizes": {z[1:]: {"tokens": 1, "lines": 1, "window_tokens": 9} for z in sizes}
    }
    text = "\n".join(claim_section(doc))
    assert (
        f"- C2_scout_token_growth: - -> not measured (needs document sizes 64k and 1M; {why})"
        in text
    )


def test_c2_reads_1m_over_64k_whatever_sizes_lie_between() -> None:
    mid = {"scout": {"tokens_per_question": 1000.0}, "full_context": {"tokens_per_question": 1e4}}
    c2 = claims(run(s64000={}, s256000=mid, s1000000={}))["C2_scout_token_growth"]
    assert c2 == {"value": 1.0, "holds": True}  # 1M / 64k, not the largest over the smallest
    big = {"scout": {"tokens_per_question": 151.0}, "full_context": {"tokens_per_question": 1e4}}
    c2 = claims(run(s64000={}, s1000000={}, s2000000=big))["C2_scout_token_growth"]
    assert c2 == {"value": 1.0, "holds": True}


@pytest.mark.parametrize(
    ("at_1m", "at_2m", "holds"),
    [(0.59, 0.9, True), (0.6, 0.1, False)],
)
def test_c3_reads_full_context_at_1m_not_at_the_largest_size(
    at_1m: float, at_2m: float, holds: bool
) -> None:
    c3 = claims(
        run(
            s64000={},
            s1000000={"full_context": {"accuracy": at_1m}},
            s2000000={"full_context": {"accuracy": at_2m}},
        )
    )["C3_accuracy"]
    assert c3["holds"] is holds and c3["full_context_1m"] == at_1m


def test_c3_without_1m_is_not_measured_unless_scout_fails_it() -> None:
    c = claims(run(s64000={}, s256000={"full_context": {"accuracy": 0.1}}))
    c3 = c["C3_accuracy"]
    assert c3["holds"] is None and c3["full_context_1m"] is None
    assert c3["reason"] == "full context is read at 1M; the run has 64k and 256k"
    assert c["holds"] is None
    c3 = claims(run(s64000={"scout": {"accuracy": 0.89}}, s256000={}))["C3_accuracy"]
    assert c3["holds"] is False and "reason" not in c3


@pytest.mark.parametrize(
    ("small_acc", "full_largest", "holds"),
    [(0.9, 0.59, True), (0.89, 0.59, False), (0.9, 0.6, False)],
)
def test_c3_scout_accurate_everywhere_full_context_not_at_the_largest(
    small_acc: float, full_largest: float, holds: bool
) -> None:
    v = verdicts(
        s64000={"scout": {"accuracy": small_acc}, "full_context": {"accuracy": 1.0}},
        s1000000={"full_context": {"accuracy": full_largest}},
    )
    assert v["C3_accuracy"] is holds


@pytest.mark.parametrize(("provenance", "holds"), [(1.0, True), (0.99, False)])
def test_c4_every_answer_is_anchored(provenance: float, holds: bool) -> None:
    v = verdicts(s64000={}, s1000000={"scout": {"provenance": provenance}})
    assert v["C4_provenance"] is holds


@pytest.mark.parametrize(("two_hop", "holds"), [(0.6, True), (0.61, False)])
def test_c5_without_evaluate_two_hop_stays_at_most_0_6(two_hop: float, holds: bool) -> None:
    v = verdicts(s64000={}, s1000000={"no_evaluate": {"accuracy_two_hop": two_hop}})
    assert v["C5_no_evaluate_two_hop"] is holds
    assert v["holds"] is holds


def test_c6_state_beats_history_at_every_size_not_summed() -> None:
    ok = claims(
        run(
            s64000={"scout": {"accuracy_distractor": 0.8}, "react": {"accuracy_distractor": 0.7}},
            s1000000={"react": {"accuracy_distractor": 0.7}},
        )
    )["C6_state_over_history_distractor"]
    assert ok["holds"] is True and ok["per_size"] == {"64000": True, "1000000": True}
    # the audit's case: the history wins at 64k, the state by more at 1M (sum 1.933 > 1.71)
    hidden = claims(
        run(
            s64000={"scout": {"accuracy_distractor": 0.933}, "react": {"accuracy_distractor": 1.0}},
            s1000000={"react": {"accuracy_distractor": 0.71}},
        )
    )
    c6 = hidden["C6_state_over_history_distractor"]
    assert c6["holds"] is False and c6["per_size"] == {"64000": False, "1000000": True}
    assert hidden["holds"] is False
    tie = verdicts(s64000={"react": {"accuracy_distractor": 1.0}}, s1000000={})
    assert tie["C6_state_over_history_distractor"] is False  # equal is not better
