"""snn.lif_convnet read its checkpoint once: a bench's example and evaluate follow the net the
build loaded (its ``meta["config"]``), not the checkpoint file read again, which another
process (``neuroedge train`` saving to the same path) may have replaced meanwhile: the
seed-0 net was scored on seed 3's test split, 80% of it seed 0's training digits.

The checkpoints are saved as the train hook saves them, with untrained weights: no training
runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from neuroedge.bench.runner import bench_model
from neuroedge.checkpoints import save_checkpoint
from neuroedge.models.lif_convnet import spec as lif_spec
from neuroedge.models.lif_convnet import train
from neuroedge.models.lif_convnet.data import load_digits_split


def _save(path: Path, seed: int) -> Path:
    cfg = train.check_config({"seed": seed, "channels1": 4, "channels2": 4})
    net = train.make_net(cfg)
    return save_checkpoint(path, {"state_dict": net.state_dict(), "config": cfg})


def _rows(images: np.ndarray) -> set[bytes]:
    return {a.tobytes() for a in images}


def test_a_checkpoint_replaced_after_the_build_does_not_change_the_split(tmp_path) -> None:
    path = _save(tmp_path / "lif.pt", seed=0)
    other = _save(tmp_path / "other.pt", seed=3).read_bytes()
    seen: list[np.ndarray] = []

    def build_then_replaced(config):
        program = lif_spec.build(config)
        path.write_bytes(other)  # what another shell's `neuroedge train --config seed=3` does
        return program

    def recorded(run, config):
        def recording_run(inputs):
            seen.append(inputs["x"][0])
            return run(inputs)

        return lif_spec.evaluate(recording_run, config)

    def example(seed=0, config=None):
        x = lif_spec.example(seed, config)
        seen.append(x["x"][0])
        return x

    spec = dataclasses.replace(
        lif_spec.SPEC, build=build_then_replaced, evaluate=recorded, example=example
    )
    rows = bench_model(spec, ["host"], config={"checkpoint": str(path)}, repeats=1, progress=False)
    assert "accuracy" in rows[0].metrics
    images = np.concatenate(seen)
    assert len(images) == len(load_digits_split(0).x_test) + 1  # the example, then evaluate
    assert _rows(images) <= _rows(load_digits_split(0).x_test)
    assert not _rows(images) & _rows(load_digits_split(0).x_train)


def test_the_built_example_follows_the_built_net_not_the_file(tmp_path) -> None:
    path = _save(tmp_path / "lif.pt", seed=0)
    program = lif_spec.build({"checkpoint": str(path)})
    _save(path, seed=3)  # replaced: ONNX export and calibration build their inputs after this
    x = lif_spec.SPEC.built_example(0, program)["x"]
    assert x[0, 0].tobytes() in _rows(load_digits_split(0).x_test)
    assert lif_spec.net_config(program.meta["config"])["seed"] == 0
