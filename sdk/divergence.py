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
