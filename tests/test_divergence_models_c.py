"""Diverged training never reads as a result (second wave): event.bivision, vla.specprune,
ttt.linear_attention, physics.meshft and uq.last_layer's MAP net stop at the first NaN loss
their loops read, naming the keys to lower (each went on to its last step with NaN weights,
then measured, tabled or saved them), and physics.meshft's lr is bounded (lr=1e300 ended in a
RuntimeError traceback from AdamW's float32 update)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from neuroedge.errors import TrainingDiverged


def _poison(module: torch.nn.Module, name: str | None = None) -> None:
    """One weight NaN (the first matrix, or parameter ``name``)."""
    params = dict(module.named_parameters())
    weight = params[name] if name else next(p for p in params.values() if p.dim() > 1)
    with torch.no_grad():
        weight.view(-1)[0] = math.nan


@pytest.mark.parametrize(
    ("weight", "where"),
    [  # the readout: the loss is NaN at batch 1 (3 epochs, nan returned); the first conv: the
        # membrane never crosses its threshold, the loss stays finite (0.68 returned) while
        # Adam spreads NaN into conv1, cells.0: only the weights tell
        ("cls_map.bias", "epoch 1 batch 1: training diverged (loss nan)"),
        ("conv1.weight", "epoch 1: training diverged (5 tensor(s) hold NaN or inf, first"),
    ],
)
def test_bivision_fit_stops_at_a_nan_loss_or_weight_naming_lr(weight, where):
    from neuroedge.models.bivision import train
    from neuroedge.models.bivision.data import EventSet

    cfg = {**train.DEFAULTS, "size": 8, "epochs": 3, "batch": 2}
    net = train.make_net(cfg)
    _poison(net, weight)
    rng = np.random.default_rng(0)
    x = rng.random((4, 3, 2, 8, 8), dtype=np.float32)
    data = EventSet(x, np.array([0, 1, 0, 1]), [np.zeros((0, 4))] * 4)
    with pytest.raises(TrainingDiverged) as err:
        train.fit(net, data, "classification", cfg, progress=False)
    message = str(err.value)
    assert f"event.bivision training (statnf_e2s, classification) {where}" in message
    assert "lower lr" in message


def test_specprune_phase_stops_at_a_nan_loss_naming_its_rate():
    from neuroedge.models.specprune import train
    from neuroedge.models.specprune.data import CHUNK, TEXT_LEN
    from neuroedge.models.specprune.sim import ACTION_DIM, IMAGE_SIZE

    cfg = {**train.DEFAULTS, "dim": 16, "heads": 2, "depth": 1, "ffn": 16, "batch": 2}
    policy = train.make_policy(cfg).train()
    _poison(policy)
    n, rng = 4, np.random.default_rng(0)
    frames = rng.integers(0, 255, (n, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    tensors = [
        torch.from_numpy(a)
        for a in (
            frames,
            frames.copy(),
            np.zeros((n, 4), np.float32),
            np.zeros((n, TEXT_LEN), np.int64),
            np.zeros((n, CHUNK, ACTION_DIM), np.float32),
        )
    ]
    with pytest.raises(TrainingDiverged) as err:  # went on for all 3 steps, L1 nan
        train.run_phase(policy, tensors, cfg, 1e-3, 3, "phase 2 (restart)", "finetune_lr")
    assert "vla.specprune training, phase 2 (restart) step 1" in str(err.value)
    assert "lower finetune_lr" in str(err.value)


def test_ttt_training_stops_at_a_nan_loss_naming_lr(monkeypatch):
    from neuroedge.models.ttt import train

    make_model = train.make_model

    def poisoned(*args: object, **kwargs: object) -> torch.nn.Module:
        model = make_model(*args, **kwargs)
        _poison(model)
        return model

    monkeypatch.setattr(train, "make_model", poisoned)
    cfg = train.check_config({**train.DEFAULTS, "steps": 2, "pairs": 4, "batch": 4})
    with pytest.raises(TrainingDiverged) as err:  # tabled loss nan, accuracy near chance
        train.train_one(cfg, "v6", progress=False)
    assert "ttt.linear_attention training (v6) step 1" in str(err.value)
    assert "lower lr" in str(err.value)


def test_meshft_lr_is_bounded_before_training(tmp_path, capsys):
    from neuroedge.cli import main

    out = tmp_path / "m.pt"
    rc = main(["train", "physics.meshft", "--out", str(out), "--config", "lr=1e300"])
    assert rc == 2  # was a RuntimeError traceback (AdamW's float32 step overflowed)
    assert "lr=1e+300: expected a finite number in (0, 10]" in capsys.readouterr().err
    assert not out.exists()


def test_meshft_fit_stops_at_a_nan_loss_of_the_baseline():
    from neuroedge.models.meshft import bench, spec
    from neuroedge.models.meshft import train as T

    mesh = spec.make_mesh("grid")
    data = T.plane_wave_pairs(mesh, 8, 0.002, seed=0)
    mgn = bench._mgn(mesh, data, 8, 1)  # no CFL guard: nothing else stopped it
    _poison(mgn)
    with pytest.raises(TrainingDiverged) as err:  # returned a trace of 3 NaN losses
        T.fit(mgn, data, 3, 1e-3, batch_size=4, desc="mgn")
    assert "physics.meshft training (mgn) step 1" in str(err.value)
    assert "lower lr (now 0.001)" in str(err.value)


@pytest.mark.parametrize("val_fraction", [0.2, 0.0])
def test_uq_map_training_refuses_to_return_a_nan_net(val_fraction):
    from neuroedge.models.uq_last_layer import functional as F

    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3))
    y = x[:, 0] + 0.1 * rng.normal(size=60)
    net = F.make_mlp(3, 8, 1, 0)
    # lr 1e200 (outside the bench's bounds; the build and the GLM comparison call this too)
    # turned every weight NaN, and a NaN validation loss never read as worse than the best
    with pytest.raises(TrainingDiverged) as err:
        F.train_map(net, x, y, "regression", steps=60, lr=1e200, val_fraction=val_fraction)
    assert "uq.last_layer MAP training, after 25 steps" in str(err.value)
    assert "lower lr (now 1e+200), weight_decay (now 0.001)" in str(err.value)
