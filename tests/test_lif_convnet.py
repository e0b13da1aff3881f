"""snn.lif_convnet: trains on real digits in minutes, and its step is a pure function."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch

from neuroedge.checkpoints import load_checkpoint
from neuroedge.errors import ArtifactError
from neuroedge.models.lif_convnet import spec as lif_spec
from neuroedge.models.lif_convnet.train import train


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("ckpt") / "lif.pt"
    start = time.perf_counter()
    result = train(out=out, progress=False)
    result["wall"] = time.perf_counter() - start
    return result


def test_training_reaches_high_accuracy_within_two_minutes(trained: dict) -> None:
    assert trained["wall"] < 120
    assert trained["accuracy"] >= 0.9


def test_checkpoint_loads_weights_only_and_reproduces_accuracy(trained: dict) -> None:
    program = lif_spec.build({"checkpoint": trained["path"]})
    assert program.meta["trained"]
    from neuroedge.registry import get_backend

    host = get_backend("host")
    art = host.compile(program, lif_spec.SPEC)
    config = {"checkpoint": trained["path"]}  # evaluate follows the checkpoint's split
    acc = lif_spec.evaluate(lambda x: host.run(art, x), config)["accuracy"].value
    assert acc == pytest.approx(trained["accuracy"], abs=1e-9)
    assert set(load_checkpoint(trained["path"])) >= {"state_dict", "config", "metrics"}


def test_corrupt_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ArtifactError, match="bad.pt: not a readable checkpoint"):
        lif_spec.build({"checkpoint": str(bad)})


def test_step_is_pure_given_the_same_state() -> None:
    program = lif_spec.build({"smoke": True})
    x = torch.from_numpy(lif_spec.example(0)["x"][0]) * 5
    state = program.init_state(1)
    first = program.module(x, *state)
    second = program.module(x, *state)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_spikes_are_binary_and_state_is_explicit() -> None:
    program = lif_spec.build({"smoke": True})
    xs = torch.from_numpy(np.ones((4, 2, 1, 8, 8), np.float32) * 5)
    state = program.init_state(2)
    for x in xs:
        y, z1, z2, *state = program.module(x, *state)
        assert set(torch.unique(z1).tolist()) <= {0.0, 1.0}
    assert any(float(s.abs().sum()) > 0 for s in state)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"epochs": 0}, r"epochs=0: expected an integer in 1\.\.100000"),
        ({"epochs": 2.5}, r"epochs=2\.5: expected an integer"),
        ({"batch": 0}, r"batch=0: expected an integer in 1\.\."),
        ({"lr": -1}, r"lr=-1: expected a finite number in \(0, 10\]"),
        ({"epoch": 3}, r"training does not read 'epoch'; its keys: steps, epochs"),
    ],
)
def test_training_values_are_refused_before_any_work(config, message, tmp_path) -> None:
    from neuroedge.errors import ConfigError
    from neuroedge.models.lif_convnet import train

    out = tmp_path / "ckpt.pt"  # 0 epochs used to save untrained weights here, reported trained
    with pytest.raises(ConfigError, match=message):
        train.train(config, out=out, progress=False)
    assert not out.exists()


@pytest.mark.parametrize("steps", [1, 4])
def test_direct_encoding_is_a_writable_copy_even_of_a_read_only_batch(steps: int) -> None:
    from neuroedge.models.lif_convnet.data import direct_encoding

    images = np.arange(6, dtype=np.float32).reshape(2, 3)
    images.setflags(write=False)  # a memory-mapped CIFAR batch, say
    x = direct_encoding(images, steps)
    assert x.shape == (steps, 2, 3) and x.flags.writeable and x.flags.c_contiguous
    assert np.array_equal(x[-1], images)  # at steps=1 it was the read-only view itself
