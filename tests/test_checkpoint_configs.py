"""A build's ``train_config`` is what ``train_if_missing`` trains with: once a checkpoint exists
nothing trains, so a value the checkpoint was not trained with would be ignored without a word.
snn.unisparse and vla.specprune refuse it, as snn.lif_convnet does (``checkpoint_configs``):
unisparse built a seed-0 / 4-step net for ``train_config`` seed 3 / steps 8, specprune a
checkpoint of 1,600 steps and seed 2 for steps 50,000 / seed 7.

The checkpoints hold untrained weights saved with the config training saves: no training runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from unisparse_nets import random_net

from neuroedge.checkpoint_configs import refuse_ignored_train_config
from neuroedge.checkpoints import save_checkpoint
from neuroedge.errors import ConfigError


def test_the_shared_check_compares_settled_values_and_skips_exempt_keys() -> None:
    saved = {"tasks": ["a", "b"], "steps": 4, "threads": 1}
    wanted = {"tasks": ("a", "b"), "steps": 4.0, "threads": 2}  # as the training check settles
    refuse_ignored_train_config(["tasks", "steps", "threads"], wanted, saved, "c.pt", ["threads"])
    with pytest.raises(ConfigError, match=r"^train_config threads=2 contradicts the checkpoint"):
        refuse_ignored_train_config(["threads"], wanted, saved, "c.pt")
    with pytest.raises(ConfigError, match=r"steps=5 contradicts the checkpoint c\.pt \(trained "):
        refuse_ignored_train_config(["steps"], {"steps": 5}, saved, "c.pt")


# snn.unisparse


def _unisparse(path: Path, seed: int = 3, steps: int = 6) -> str:
    """A checkpoint as ``pipeline.train_and_save`` saves it (defaults included), untrained."""
    from neuroedge.models.unisparse import train

    config = {**train.DEFAULTS, "seed": seed, "steps": steps}
    save_checkpoint(path, {"state_dict": random_net(seed).state_dict(), "config": config})
    return str(path)


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ({"steps": 8, "seed": 3}, "train_config steps=8 contradicts the checkpoint"),
        ({"seed": 0}, r"train_config seed=0 contradicts the checkpoint .* with seed=3;"),
        ({"spike_scale": 0.5}, "spike_scale=0.5 contradicts .* with spike_scale=1.0"),
        ({"bogus": 1}, "snn.unisparse training does not read 'bogus'"),
    ],
)
def test_unisparse_refuses_a_train_config_its_checkpoint_was_not_trained_with(
    tmp_path: Path, asked: dict, expected: str
) -> None:
    from neuroedge.models.unisparse import spec

    config = {"checkpoint": _unisparse(tmp_path / "u.pt"), "train_config": asked}
    with pytest.raises(ConfigError, match=expected):
        spec.build(config)
    with pytest.raises(ConfigError, match=expected):  # examples and evaluate read it too
        spec.data_settings(config)


def test_unisparse_takes_a_train_config_its_checkpoint_was_trained_with(tmp_path: Path) -> None:
    from neuroedge.models.unisparse import spec

    asked = {"seed": 3, "steps": 6, "lr": 2e-3, "device": "cuda"}  # device: where, not what
    program = spec.build({"checkpoint": _unisparse(tmp_path / "u.pt"), "train_config": asked})
    assert program.meta["trained"] and program.meta["config"][spec.BUILT] == {"seed": 3, "steps": 6}


# vla.specprune


def _specprune(path: Path, seed: int = 2) -> str:
    """A checkpoint as ``train.train`` saves it (its config over DEFAULTS), untrained."""
    from neuroedge.models.specprune import train

    policy = train.make_policy(train.DEFAULTS)
    save_checkpoint(path, train.checkpoint_payload(policy, {**train.DEFAULTS, "seed": seed}))
    return str(path)


def test_specprune_refuses_a_train_config_its_checkpoint_was_not_trained_with(
    tmp_path: Path, capsys
) -> None:
    from neuroedge.cli import main

    ckpt = _specprune(tmp_path / "s.pt")
    for asked, expected in (
        ('{"steps": 50000, "seed": 7}', "train_config steps=50000 contradicts the checkpoint"),
        ('{"seed": 7}', f"train_config seed=7 contradicts the checkpoint {ckpt} (trained with"),
        ('{"bogus": 1}', "vla.specprune training does not read 'bogus'"),
    ):
        config = [f"checkpoint={ckpt}", f"train_config={asked}"]
        assert main(["run", "vla.specprune", "--repeats", "1", "--config", *config]) == 2
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err


def test_specprune_takes_a_train_config_its_checkpoint_was_trained_with(tmp_path: Path) -> None:
    from neuroedge.models.specprune import spec

    asked = {"seed": 2, "tasks": ["button", "drawer", "reach"], "threads": 2}  # threads: how
    program = spec.build({"checkpoint": _specprune(tmp_path / "s.pt"), "train_config": asked})
    assert program.meta["trained"]
