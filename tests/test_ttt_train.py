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


def test_update_then_apply_with_chunks_is_refused_before_training(tmp_path, monkeypatch):
    from neuroedge.errors import ConfigError
    from neuroedge.models.ttt import train

    def no_training(*args, **kwargs):
        pytest.fail("a model trained: the non-causal order was not refused first")

    monkeypatch.setattr(train, "train_one", no_training)
    expected = r"order='update_then_apply' with chunk=4: .*future.*'apply_then_update'"
    with pytest.raises(ConfigError, match=expected):
        train.ladder({"order": "update_then_apply", "chunk": 4}, tmp_path, progress=False)
    assert not list(tmp_path.iterdir())
    cfg = train.check_config({**DEFAULTS, "order": "update_then_apply", "chunk": 1})
    assert (cfg["order"], cfg["chunk"]) == ("update_then_apply", 1)


@pytest.mark.parametrize("variant", ["baseline", "v6"])
def test_every_accepted_order_and_chunk_trains_a_causal_lm(variant):
    import torch
    from neuroedge.errors import ConfigError
    from neuroedge.models.ttt.train import check_config

    small = {**DEFAULTS, "layers": 1, "d_model": 16, "heads": 1, "head_dim": 8}
    tokens = torch.randint(0, 32, (2, 12), generator=torch.Generator().manual_seed(0))
    for order in ("apply_then_update", "update_then_apply"):
        for chunk in (1, 4):
            try:
                cfg = check_config({**small, "order": order, "chunk": chunk})
            except ConfigError:
                continue
            torch.manual_seed(0)
            model = make_model(cfg, variant).eval()
            changed = tokens.clone()
            changed[:, 6] = (changed[:, 6] + 7) % 32
            with torch.no_grad():
                leak = float((model(changed)[:, :6] - model(tokens)[:, :6]).abs().max())
            assert leak < 1e-5, f"order={order} chunk={chunk}: earlier logits moved by {leak}"
