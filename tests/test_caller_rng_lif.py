"""snn.lif_convnet leaves the caller's torch generator where it was: a deploy that trains
(``train_if_missing``, the README's first example on a fresh machine) reseeded it with the
training seed, and a build from a checkpoint drew the layers' initial weights (overwritten by
the checkpoint's) from it. Both now draw inside ``neuroedge.seeding.seeded``, from the same
seed at the same point: the trained weights are the same.

The training here is the tiny one (1 epoch, 4 and 4 channels: a second or two)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import neuroedge as ne
from neuroedge.checkpoints import load_checkpoint, save_checkpoint
from neuroedge.models.lif_convnet import spec as lif_spec
from neuroedge.models.lif_convnet import train
from neuroedge.paths import checkpoint_path

TINY = {"epochs": 1, "channels1": 4, "channels2": 4}


def _next_draw(seed: int, call=None) -> float:
    """The caller's next ``torch.rand(1)`` after ``torch.manual_seed(seed)`` and ``call()``."""
    torch.manual_seed(seed)
    if call is not None:
        call()
    return float(torch.rand(1))


def test_a_deploy_that_trains_leaves_the_callers_generator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path))  # no checkpoint: train_if_missing trains
    reports = []

    def deploy() -> None:
        reports.append(ne.deploy("snn.lif_convnet", "host", {"train_config": TINY}, repeats=1)[1])

    assert _next_draw(1234, deploy) == _next_draw(1234)
    assert reports and not any(n.startswith("weights:") for n in reports[0].notes)  # trained
    # the weights do not depend on the caller's generator either: the same from another state
    saved = load_checkpoint(checkpoint_path("snn.lif_convnet"))["state_dict"]
    torch.manual_seed(5)
    again = train.train(TINY, out=tmp_path / "again.pt", progress=False)
    state = load_checkpoint(again["path"])["state_dict"]
    assert saved.keys() == state.keys()
    assert all(torch.equal(saved[k], state[k]) for k in state)


def test_a_build_from_a_checkpoint_leaves_the_callers_generator(tmp_path: Path) -> None:
    cfg = train.check_config({"seed": 3, **TINY})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        weights = train.make_net(cfg).state_dict()
    path = save_checkpoint(tmp_path / "lif.pt", {"state_dict": weights, "config": cfg})
    built = []
    config = {"checkpoint": str(path)}
    assert _next_draw(99, lambda: built.append(lif_spec.build(config))) == _next_draw(99)
    (program,) = built
    assert program.meta["trained"]
    loaded = program.module.state_dict()
    assert all(torch.equal(loaded[k], weights[k]) for k in weights)  # the checkpoint's weights
