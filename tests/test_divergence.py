"""A diverged training run stops at its first non-finite loss, naming the keys to change, and a
NaN weight is never saved (it was saved, and refused only when a later build loaded it)."""

from __future__ import annotations

import math

import pytest
import torch
from neuroedge.checkpoints import load_checkpoint, save_checkpoint
from neuroedge.divergence import check_loss
from neuroedge.errors import ArtifactError, ConfigError, TrainingDiverged


@pytest.mark.parametrize("loss", [math.nan, math.inf, -math.inf, torch.tensor(math.nan)])
def test_a_non_finite_loss_names_where_and_the_keys(loss):
    with pytest.raises(TrainingDiverged, match=r"^m phase p step 3: training diverged \(loss "):
        check_loss(loss, "m phase p step 3", ("lr", "alpha"))
    with pytest.raises(ConfigError, match=r"lower lr, alpha and train again$"):
        check_loss(loss, "m", ("lr", "alpha"))  # a ConfigError: exit 2, the values to change


def test_a_finite_loss_is_returned_as_a_float():
    assert check_loss(torch.tensor([2.5]), "m", ("lr",)) == 2.5
    assert check_loss(0, "m", ("lr",)) == 0.0


def test_a_nan_weight_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "net.pt"
    weights = {"layer.weight": torch.ones(3, 2), "layer.bias": torch.tensor([0.0, math.nan])}
    with pytest.raises(ArtifactError, match=r"tensor 'state.layer.bias' \[2\] holds 1 NaN"):
        save_checkpoint(path, {"state": weights, "meta": {"lr": 1e12}})
    assert list(tmp_path.iterdir()) == []  # no file, no draft
    weights["layer.bias"] = torch.zeros(2)
    save_checkpoint(path, {"state": weights})
    assert torch.equal(load_checkpoint(path)["state"]["layer.bias"], torch.zeros(2))
