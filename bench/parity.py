"""Parity of a backend's outputs with the host reference: max abs error and spike agreement.

Outputs whose names start with ``spikes`` are binary spike trains; their agreement rate is the
fraction of (step, neuron) slots where both sides agree. Stateful models are compared over
every step, and the comparison refuses to pass vacuously: the reference must reach a nonzero
state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from neuroedge.errors import ParityError
from neuroedge.types import Measurement


def compare(reference: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Measurement]:
    """Metrics over the outputs both sides produced: ``max_abs_err``, ``max_rel_err`` (each
    output's largest error over its largest reference magnitude; the absolute error where the
    reference is all zeros) and ``spike_agreement``. A NaN on either side counts as an
    infinite error (``max`` would otherwise skip it and the output would pass unnoticed)."""
    shared = sorted(set(reference) & set(candidate))
    if not shared:
        raise ParityError(
            f"no common outputs: reference {sorted(reference)}, candidate {sorted(candidate)}"
        )
    worst, worst_rel, agree, slots = 0.0, 0.0, 0.0, 0
    for name in shared:
        ref, got = np.asarray(reference[name]), np.asarray(candidate[name])
        if ref.shape != got.shape:
            raise ParityError(f"output {name!r}: reference shape {ref.shape}, got {got.shape}")
        if name.startswith("spikes"):
            agree += float(np.sum(ref == got))
            slots += ref.size
        else:
            diff = np.abs(ref.astype(np.float64) - got.astype(np.float64))
            diff[np.isnan(diff)] = np.inf  # NaN vs anything, or inf - inf
            err = float(diff.max()) if diff.size else 0.0
            finite = np.abs(ref[np.isfinite(ref)]) if ref.size else ref
            scale = float(finite.max()) if finite.size else 0.0
            worst = max(worst, err)
            worst_rel = max(worst_rel, err / scale if scale > 0 else err)
    metrics = {
        "max_abs_err": Measurement(worst, "abs", "measured"),
        "max_rel_err": Measurement(worst_rel, "rel", "measured"),
    }
    if slots:
        metrics["spike_agreement"] = Measurement(agree / slots, "fraction", "measured")
    return metrics


def silent_spike_outputs(reference: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Spike outputs with no spike on either side: their agreement of 1 says nothing."""
    return [
        name
        for name in sorted(set(reference) & set(candidate))
        if name.startswith("spikes")
        and not np.any(np.asarray(reference[name]))
        and not np.any(np.asarray(candidate[name]))
    ]


def check(
    reference: Mapping[str, Any],
    candidate: Mapping[str, Any],
    tolerance: float,
    *,
    min_spike_agreement: float = 1.0,
) -> dict[str, Measurement]:
    """``compare`` and raise ParityError past ``tolerance`` or below the spike agreement."""
    metrics = compare(reference, candidate)
    err = metrics["max_abs_err"].value
    if err > tolerance:
        raise ParityError(f"max abs error {err:.3g} exceeds tolerance {tolerance:.3g}")
    if "spike_agreement" in metrics and metrics["spike_agreement"].value < min_spike_agreement:
        raise ParityError(
            f"spike agreement {metrics['spike_agreement'].value:.4f} is below {min_spike_agreement}"
        )
    return metrics


def require_nonzero_state(reference: Mapping[str, Any]) -> None:
    """A stateful parity check is only meaningful if the state actually moved."""
    finals = {k: v for k, v in reference.items() if k.endswith("_final")}
    if finals and not any(np.any(np.asarray(v) != 0) for v in finals.values()):
        raise ParityError(
            f"every final state is zero ({sorted(finals)}): the parity check "
            "would pass vacuously; use a longer or stronger example input"
        )
