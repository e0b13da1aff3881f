"""doc.scout: ``provenance`` is over the right answers only (the fraction of right SCOUT answers
whose value is grounded in the state), so wrong answers neither raise nor lower it."""

from __future__ import annotations

import pytest
from neuroedge.models.scout.experiment import summarise


def question(right: bool, grounded: bool, hops: int = 1) -> dict:
    """One question's record as run_one keeps it (provenance False on a wrong answer)."""
    record = {
        "right": right,
        "provenance": right and grounded,
        "tokens": 10,
        "answer_tokens": 5,
        "seconds": 0.001,
        "llm": (0, 0),
        "turns": 3,
        "policy_error": False,
    }
    return {"scout": record, "meta": {"hops": hops, "distractor": False}}


def test_a_wrong_answer_leaves_provenance_of_grounded_right_answers_at_one() -> None:
    per = [question(True, True)] * 3 + [question(False, False)]
    s = summarise(per, "scout")
    assert s["accuracy"] == 0.75
    assert s["provenance"] == 1.0  # 3 grounded of 3 right; over all questions it reads 0.75


@pytest.mark.parametrize(
    ("right_grounded", "right_ungrounded", "wrong", "want"),
    [(1, 1, 2, 1 / 2), (3, 1, 4, 3 / 4), (1, 3, 0, 1 / 4), (0, 0, 3, 0.0)],
)
def test_provenance_is_grounded_right_over_right(
    right_grounded: int, right_ungrounded: int, wrong: int, want: float
) -> None:
    per = (
        [question(True, True, hops=2)] * right_grounded
        + [question(True, False)] * right_ungrounded
        + [question(False, False, hops=2)] * wrong
    )
    s = summarise(per, "scout")
    assert s["provenance"] == pytest.approx(want)
    assert s["accuracy"] == pytest.approx((right_grounded + right_ungrounded) / len(per))
