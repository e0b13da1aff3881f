"""Stop a training run at its first non-finite loss.

A step size or loss weight too large for a net (lr=1e12, a penalty of 1e300) turned every weight
into NaN within a few steps; the runs then went on for all their epochs, saved the NaN weights
and reported the NaN net's accuracy, SOPs or MCC as measured figures. ``check_loss`` ends such
a run at the step where it diverged, naming the keys to change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from neuroedge.errors import TrainingDiverged


def check_loss(loss: Any, where: str, keys: Sequence[str]) -> float:
    """``loss`` (a float or a one-element tensor) as a float; TrainingDiverged when it is NaN or
    infinite, naming ``where`` (model, phase, step) and the config ``keys`` that set its scale.
    Reads the value once per call: a tensor's ``.item()`` synchronises, so callers pass the
    loss they already read for logging where they have one."""
    value = float(loss.item() if hasattr(loss, "item") else loss)
    if not math.isfinite(value):
        raise TrainingDiverged(
            f"{where}: training diverged (loss {value}); the weights are no longer finite, so "
            f"nothing was saved or measured: lower {', '.join(keys)} and train again"
        )
    return value


def check_weights(net: Any, where: str, keys: Sequence[str]) -> None:
    """TrainingDiverged naming ``where``, the first non-finite tensor and ``keys`` when a
    floating parameter or buffer of the torch module ``net`` holds NaN or inf. A finite loss
    does not prove finite weights: a NaN membrane never crosses its threshold, so a NaN
    convolution, threshold or BN statistic silences its layer and no NaN reaches the loss (such
    nets trained every epoch to a finite loss and measured 0 SOPs, an energy budget "met", at
    chance). Reads every tensor: call it once per epoch or phase, not per step."""
    import torch

    state = net.state_dict()
    bad = [n for n, t in state.items() if t.is_floating_point() and not torch.isfinite(t).all()]
    if bad:
        raise TrainingDiverged(
            f"{where}: training diverged ({len(bad)} tensor(s) hold NaN or inf, first "
            f"{bad[0]!r}); nothing was saved or measured: lower {', '.join(keys)} and train again"
        )
