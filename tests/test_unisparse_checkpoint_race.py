"""snn.unisparse reads its checkpoint once: the example and evaluate follow the net the build
loaded (its ``meta["config"]`` holds the split seed and steps under ``BUILT``), not the
checkpoint file read again, which another process (``neuroedge train`` saving to the same
path) may have replaced meanwhile: the seed-0 net was given seed 3's digits, most of them
seed 0's training digits, at seed 3's time steps.

The checkpoints hold random mini-ResNets (``unisparse_nets``): no training runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from unisparse_nets import random_net

from neuroedge.checkpoints import save_checkpoint
from neuroedge.errors import ConfigError
from neuroedge.models.unisparse import spec as spec_mod
from neuroedge.models.unisparse.data import load_digits


def _save(path: Path, seed: int, steps: int) -> Path:
    state = random_net(seed).state_dict()
    return save_checkpoint(path, {"state_dict": state, "config": {"seed": seed, "steps": steps}})


def _rows(images: np.ndarray) -> set[bytes]:
    return {a.tobytes() for a in images}


def test_the_built_example_and_evaluate_follow_the_built_net_not_the_file(tmp_path) -> None:
    # the built net's settings differ from the defaults (seed 0, steps 4), so a build that
    # took the defaults (or train_config's) for a checkpoint's split fails here
    path = _save(tmp_path / "u.pt", seed=3, steps=6)
    program = spec_mod.build({"checkpoint": str(path)})
    _save(path, seed=0, steps=4)  # replaced: export, calibration and deploy come after this
    assert spec_mod.data_settings({"checkpoint": str(path)}) == (0, 4)  # the file's
    built = program.meta["config"]
    assert spec_mod.data_settings(built) == (3, 6)  # the built net's
    for seed in range(4):
        x = spec_mod.SPEC.built_example(seed, program)["x"]
        assert x.shape[0] == 6 and x[0, 0].tobytes() in _rows(load_digits(3).x_test)
    seen = []

    def run(inputs):
        seen.append(inputs["x"])
        return {"logits": np.zeros((*inputs["x"].shape[:2], 10))}

    spec_mod.SPEC.evaluate(run, {**built, "eval_batch": 1000})
    (x,) = seen
    assert x.shape[0] == 6
    np.testing.assert_array_equal(x[0], load_digits(3).x_test)  # its own held-out split


def test_deploy_profiles_the_example_of_the_net_it_built(tmp_path, monkeypatch) -> None:
    from neuroedge import api

    path = _save(tmp_path / "u.pt", seed=3, steps=6)
    expected = spec_mod.example(0, {"checkpoint": str(path)})["x"]
    other = _save(tmp_path / "other.pt", seed=0, steps=4).read_bytes()

    def build_then_replaced(config):
        program = spec_mod.build(config)
        path.write_bytes(other)  # another shell's `neuroedge train` saving to the same path
        return program

    spec = dataclasses.replace(spec_mod.SPEC, build=build_then_replaced)
    monkeypatch.setattr(api, "get_model", lambda name: spec)
    config = {"checkpoint": str(path)}
    artifact, report, inputs = api.deploy_with_inputs("snn.unisparse", "host", config, repeats=1)
    assert report.metrics["sops_per_sample"].value > 0
    np.testing.assert_array_equal(inputs["x"], expected)  # what it profiled
    # and what ne.profile makes by default
    np.testing.assert_array_equal(spec.example_for(0, artifact.meta["build_config"])["x"], expected)


def test_an_untrained_build_records_the_train_config_data(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path))  # no checkpoint, and none trained:
    config = {"train_if_missing": False, "train_config": {"seed": 5, "steps": 8}}
    program = spec_mod.build(config)  # (smoke=true with a train_config is refused)
    assert not program.meta["trained"]
    assert program.meta["config"][spec_mod.BUILT] == {"seed": 5, "steps": 8}
    assert spec_mod.data_settings(program.meta["config"]) == (5, 8)
    assert spec_mod.SPEC.built_example(0, program)["x"].shape[0] == 8
    with pytest.raises(ConfigError, match="built_net=3: expected the data settings"):
        spec_mod.data_settings({spec_mod.BUILT: 3})
    with pytest.raises(ConfigError, match="steps"):
        spec_mod.data_settings({spec_mod.BUILT: {"seed": 0, "steps": 0}})
