"""A checkpoint saved before a training key existed did not train with today's default of it:
the key is unknown (None, null in a report) and never compared against a ``train_config``.
An snn.unisparse checkpoint from before distillation (fcccdb2) refused ``kd_weight=0.0`` as
"trained with kd_weight=0.7"; a vla.specprune one from before the two-phase recipe (e0a859b,
30 epochs) was settled as ``steps`` 1600 + ``finetune_steps`` 1400, in the bench's report too.

The checkpoints hold untrained weights saved with the config their training saved then.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from unisparse_nets import random_net

from neuroedge.checkpoint_configs import refuse_ignored_train_config, settle_saved
from neuroedge.checkpoints import save_checkpoint
from neuroedge.errors import ArtifactError, ConfigError


def test_a_missing_key_is_unknown_and_never_compared_unless_its_value_is_certain() -> None:
    settled = settle_saved({"lr": 0.1}, ("lr", "kd_weight"), certain={"data": None})
    assert settled == {"lr": 0.1, "kd_weight": None, "data": None}
    assert settled.unknown == {"kd_weight"}
    refuse_ignored_train_config(["kd_weight"], {"kd_weight": 0.0}, settled, "c.pt")
    with pytest.raises(ConfigError, match=r"data='x' contradicts the checkpoint c\.pt"):
        refuse_ignored_train_config(["data"], {"data": "x"}, settled, "c.pt")
    with pytest.raises(ConfigError, match=r"lr=0\.2 contradicts the checkpoint c\.pt"):
        refuse_ignored_train_config(["lr"], {"lr": 0.2}, settled, "c.pt")
    saved = settle_saved({"data": "mine.csv"}, (), certain={"data": None})  # saved beats it
    assert saved == {"data": "mine.csv"} and not saved.unknown
    refuse_ignored_train_config(["data"], {"data": "mine.csv"}, saved, "c.pt")
    with pytest.raises(ConfigError, match=r"data=None contradicts the checkpoint c\.pt"):
        refuse_ignored_train_config(["data"], {"data": None}, saved, "c.pt")


# snn.unisparse

NO_DISTILLATION = ("kd_weight", "kd_temp", "target_anneal", "penalty_rho", "spike_grad")


def _unisparse(path: Path, drop: tuple[str, ...] = NO_DISTILLATION) -> str:
    """A checkpoint as training saved it before distillation existed (seed 3), untrained."""
    from neuroedge.models.unisparse import train

    config = {k: v for k, v in {**train.DEFAULTS, "seed": 3}.items() if k not in drop}
    save_checkpoint(path, {"state_dict": random_net(3).state_dict(), "config": config})
    return str(path)


def test_unisparse_takes_any_value_of_a_key_its_old_checkpoint_did_not_save(
    tmp_path: Path,
) -> None:
    from neuroedge.models.unisparse import spec

    ckpt = _unisparse(tmp_path / "u.pt")
    for asked in ({"kd_weight": 0.0}, {"kd_weight": 0.7, "penalty_rho": 2.0, "seed": 3}):
        program = spec.build({"checkpoint": ckpt, "train_config": asked})
        assert program.meta["trained"]
    with pytest.raises(ConfigError, match=r"seed=0 contradicts the checkpoint .* seed=3;"):
        spec.build({"checkpoint": ckpt, "train_config": {"kd_weight": 0.0, "seed": 0}})


def test_unisparse_still_refuses_a_contradicted_key_of_a_current_checkpoint(
    tmp_path: Path,
) -> None:
    from neuroedge.models.unisparse import spec

    ckpt = _unisparse(tmp_path / "u.pt", drop=())  # today's training saves every key
    with pytest.raises(ConfigError, match=r"kd_weight=0\.0 contradicts .* kd_weight=0\.7;"):
        spec.build({"checkpoint": ckpt, "train_config": {"kd_weight": 0.0}})


# vla.specprune

TWO_PHASE = ("steps", "finetune_steps", "finetune_lr")


def _specprune(path: Path, drop: tuple[str, ...] = TWO_PHASE, **old: object) -> str:
    """A version-2 checkpoint as e0a859b saved it (epochs, no two-phase keys), untrained."""
    from neuroedge.models.specprune import train

    policy = train.make_policy(train.DEFAULTS)
    payload = train.checkpoint_payload(policy, {**train.DEFAULTS, "seed": 2, **old})
    payload["config"] = {k: v for k, v in payload["config"].items() if k not in drop}
    save_checkpoint(path, payload)
    return str(path)


def test_specprune_settles_an_old_checkpoints_missing_keys_as_unknown(tmp_path: Path) -> None:
    from neuroedge.models.specprune import spec, train

    ckpt = _specprune(tmp_path / "s.pt", epochs=30, max_minutes=35.0)
    _, saved = train.load_policy_checkpoint(ckpt)
    assert {k: saved[k] for k in (*TWO_PHASE, "epochs", "max_minutes")} == {
        "steps": None,
        "finetune_steps": None,
        "finetune_lr": None,
        "epochs": 30,
        "max_minutes": 35.0,
    }
    assert '"steps": null' in json.dumps(saved)  # what the bench's config.train records
    spec.load_trained({"checkpoint": ckpt, "train_config": {"finetune_steps": 0}})
    with pytest.raises(ConfigError, match=r"seed=7 contradicts the checkpoint .* seed=2;"):
        spec.load_trained({"checkpoint": ckpt, "train_config": {"seed": 7}})
    with train.frozen_policy(*train.load_policy_checkpoint(ckpt)) as frozen:  # the bench's copy
        assert train.load_policy_checkpoint(frozen)[1] == saved  # still unknown, not refused


def test_specprune_settles_a_current_checkpoint_as_before(tmp_path: Path) -> None:
    from neuroedge.models.specprune import train

    _, saved = train.load_policy_checkpoint(_specprune(tmp_path / "s.pt", drop=()))
    assert saved == {**train.DEFAULTS, "tasks": list(train.DEFAULTS["tasks"]), "seed": 2}
    assert not saved.unknown


def test_specprune_names_a_checkpoint_without_the_policys_sizes(tmp_path: Path) -> None:
    from neuroedge.models.specprune import train

    ckpt = _specprune(tmp_path / "s.pt", drop=("dim", "heads"))
    with pytest.raises(ArtifactError, match=rf"{ckpt}: checkpoint config lacks dim, heads"):
        train.load_policy_checkpoint(ckpt)
