"""snn.unisparse examples and evaluation follow the built net's data: the test split of the
seed it was trained with and its time steps (they were always seed 0 and T = 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuroedge.checkpoints import save_checkpoint
from neuroedge.errors import ConfigError
from neuroedge.models.unisparse.data import load_digits
from neuroedge.models.unisparse.spec import SPEC, data_settings


def _fake_checkpoint(tmp_path: Path, seed: int, steps: int) -> Path:
    # only the saved config is read here; the weights are never loaded
    return save_checkpoint(
        tmp_path / "u.pt", {"state_dict": {}, "config": {"seed": seed, "steps": steps}}
    )


def test_examples_come_from_the_checkpoints_test_split_for_its_steps(tmp_path: Path) -> None:
    path = _fake_checkpoint(tmp_path, seed=3, steps=6)
    assert data_settings({"checkpoint": str(path)}) == (3, 6)
    split = load_digits(3)
    for seed in range(8):
        x = SPEC.example_for(seed, {"checkpoint": str(path)})["x"]
        assert x.shape[0] == 6  # its steps
        assert any(np.allclose(x[0, 0], t) for t in split.x_test)  # a held-out digit


def test_evaluate_scores_the_held_out_split_of_the_nets_seed(tmp_path: Path) -> None:
    path = _fake_checkpoint(tmp_path, seed=3, steps=2)
    seen = []

    def run(inputs):
        seen.append(inputs["x"])
        return {"logits": np.zeros((inputs["x"].shape[0], inputs["x"].shape[1], 10))}

    SPEC.evaluate(run, {"checkpoint": str(path), "eval_batch": 1000})
    (x,) = seen
    np.testing.assert_allclose(x[0], load_digits(3).x_test)  # exactly its test split
    assert x.shape[0] == 2
    with pytest.raises(ConfigError, match="eval_batch='abc'"):
        SPEC.evaluate(run, {"checkpoint": str(path), "eval_batch": "abc"})


def test_without_a_checkpoint_the_defaults_or_train_config_decide(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path))  # no checkpoint there
    assert data_settings({"smoke": True}) == (0, 4)
    assert data_settings({"train_config": {"seed": 5, "steps": 8}}) == (5, 8)  # it trains so
    assert data_settings({"seed": 6, "train_config": {"steps": 8}}) == (6, 8)  # the build's seed
    with pytest.raises(ConfigError, match="smoke=true builds an untrained net, so train_config="):
        data_settings({"smoke": True, "train_config": {"seed": 5, "steps": 8}})  # not read
