"""vla.specprune training: image shift augmentation, step-counted phases, bad settings."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch


def test_random_shift_moves_images_within_the_pad():
    from neuroedge.models.specprune.train import random_shift

    images = torch.zeros(8, 16, 16, 3, dtype=torch.uint8)
    images[:, 6:10, 6:10] = 255  # a bright square in the middle
    shifted = random_shift(images, 3, torch.Generator().manual_seed(0))
    assert shifted.shape == images.shape and shifted.dtype == torch.uint8
    assert (shifted.flatten(1) == 255).sum(1).eq(4 * 4 * 3).all()  # moved, never cut
    assert any(not torch.equal(shifted[i], images[i]) for i in range(8))
    assert torch.equal(random_shift(images, 0, torch.Generator()), images)


def tiny_training_setup(seed: int = 0):
    from neuroedge.models.specprune.data import CHUNK, TEXT_LEN
    from neuroedge.models.specprune.train import DEFAULTS, make_policy

    cfg = {**DEFAULTS, "dim": 32, "heads": 2, "depth": 1, "ffn": 64, "batch": 4, "shift": 2}
    rng = np.random.default_rng(seed)
    n = 10
    tensors = [
        torch.from_numpy(a)
        for a in (
            rng.integers(0, 256, (n, 64, 64, 3), dtype=np.uint8),
            rng.integers(0, 256, (n, 64, 64, 3), dtype=np.uint8),
            rng.normal(0, 0.3, (n, 4)).astype(np.float32),
            rng.integers(1, 4, (n, TEXT_LEN)).astype(np.int64),
            rng.normal(0, 0.5, (n, CHUNK, 4)).astype(np.float32),
        )
    ]
    torch.manual_seed(seed)
    return cfg, make_policy(cfg).train(), tensors


def test_training_phase_runs_exactly_its_step_count_across_epochs():
    from neuroedge.models.specprune.train import run_phase

    cfg, policy, tensors = tiny_training_setup()
    before = [p.detach().clone() for p in policy.parameters()]
    losses = run_phase(policy, tensors, cfg, 1e-3, 5, "test")  # 2 batches per epoch: 3 epochs
    assert len(losses) == 5 and all(np.isfinite(losses))
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))


def test_step_counted_recipe_is_reproducible_from_the_seed():
    from neuroedge.models.specprune.train import run_phase

    weights = []
    for _ in range(2):
        cfg, policy, tensors = tiny_training_setup()
        run_phase(policy, tensors, cfg, 1e-3, 3, "phase 1")
        run_phase(policy, tensors, cfg, 6e-4, 2, "phase 2")
        weights.append([p.detach().clone() for p in policy.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*weights, strict=True))


def test_training_refuses_negative_step_counts_and_too_few_samples():
    from neuroedge.models.specprune.train import run_phase, train

    with pytest.raises(ValueError, match="finetune_steps=-1: expected an integer in 0..1000000"):
        train({"finetune_steps": -1})
    with pytest.raises(ValueError, match="nothing to train"):
        train({"steps": 0, "finetune_steps": 0})
    cfg, policy, tensors = tiny_training_setup()
    with pytest.raises(ValueError, match="fewer than one batch"):
        run_phase(policy, [t[:2] for t in tensors], cfg, 1e-3, 1, "test")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"episodes": 99999999999}, "episodes=99999999999: expected an integer in 1..2000"),
        ({"shift": 99999999999}, "shift=99999999999: expected an integer in 0..64"),
        ({"seed": 2**32}, "seed=4294967296: expected an integer in 0..4294967295"),
        ({"ffn": 99999999999}, "ffn=99999999999: expected an integer in 1..16384"),
        ({"dim": 2048, "depth": 64}, "a policy of 1,217,335,300 parameters"),  # allocated at once
        ({"bogus": 1}, "vla.specprune training does not read 'bogus'; its keys: tasks,"),
    ],
)
def test_training_bounds_sizes_that_would_exhaust_memory(config, expected):
    """They passed the check and crashed (or filled memory) after 11-20 minutes of demos."""
    from neuroedge.errors import ConfigError
    from neuroedge.models.specprune.train import training_config

    with pytest.raises(ConfigError, match=re.escape(expected)):
        training_config(config)
    assert training_config({})["dim"] == 128  # the defaults pass


def _checkpoint(path, **fields):
    """A checkpoint as ``train.train`` saves it (untrained weights), ``fields`` replaced."""
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.models.specprune import train

    payload = train.checkpoint_payload(train.make_policy(train.DEFAULTS), train.DEFAULTS)
    return save_checkpoint(path, {**payload, **fields})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"version": 1}, "checkpoint version 1, this neuroedge reads version 2"),
        ({"config": None}, "checkpoint config is a NoneType, expected a dict of training"),
        ({"config": [1, 2]}, "checkpoint config is a list, expected a dict of training"),
        ({"config": {"dim": 0}}, "checkpoint config dim=0: expected an integer in 1..4096"),
        ({"config": {"tasks": ["fly"]}}, "checkpoint config tasks=['fly']: ['fly'] are"),
    ],
)
def test_a_checkpoint_of_another_version_or_a_bad_config_is_refused_naming_the_file(
    tmp_path, capsys, fields, expected
):
    """A version-1 checkpoint (another network) must not load as this one; a config that is
    no dict was a TypeError traceback (``{**DEFAULTS, **None}``), a bad value a crash later."""
    from neuroedge.cli import main
    from neuroedge.errors import ArtifactError
    from neuroedge.models.specprune.train import load_policy_checkpoint

    path = _checkpoint(tmp_path / "s.pt", **fields)
    with pytest.raises(ArtifactError, match=re.escape(f"{path}: {expected}")):
        load_policy_checkpoint(path)
    assert main(["run", "vla.specprune", "--repeats", "1", "--config", f"checkpoint={path}"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
