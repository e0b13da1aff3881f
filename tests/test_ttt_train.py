"""Training the TTT language model on MQAR: it learns, and the ladder writes its tables."""

from __future__ import annotations

import json

import pytest
from neuroedge.models.ttt.train import DEFAULTS, evaluate, ladder, make_model, train_one

TINY = {**DEFAULTS, "steps": 40, "layers": 1, "batch": 16, "eval_batch": 64, "lr": 1e-2}


def test_training_lowers_the_query_loss():
    untrained = evaluate(make_model(TINY, "v6"), TINY)
    _, result = train_one(TINY, "v6", progress=False)
    assert result["loss"] < untrained["loss"] - 0.3
    assert result["form"] == "chunked"


@pytest.mark.slow
def test_ladder_beats_chance_and_writes_table(tmp_path):
    result = ladder({"steps": 300}, tmp_path, progress=False)
    chance = result["chance_accuracy"]
    assert [r["variant"] for r in result["ladder"]] == [
        "baseline",
        "v1",
        "v2",
        "v3",
        "v4",
        "v5",
        "v6",
    ]
    assert all(r["accuracy"] > 2 * chance for r in result["ladder"])
    assert json.loads((tmp_path / "ladder.json").read_text())["probes"]["q_as_k"]
    assert (tmp_path / "ladder.png").stat().st_size > 1000
