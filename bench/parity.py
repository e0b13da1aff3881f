"""Parity of a backend's outputs with the host reference: max abs error and spike agreement.

Outputs whose names start with ``spikes`` are binary spike trains; their agreement rate is the
fraction of (step, neuron) slots where both sides agree; their ``spike_kappa`` (Cohen's kappa)
is that agreement corrected for what two trains at their firing rates would share by chance
(agreement alone rewards silence when spikes are sparse). Stateful models are compared over
every step, and the comparison refuses to pass vacuously: the reference must reach a nonzero
state. A spike output that concatenates several layers (snn.unisparse's ``spikes``) is scored
per layer where the program declares the layers (``SPIKE_LAYERS`` in its meta, read by
``spike_layers``): kappa pooled over layers at different firing rates overstates agreement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from neuroedge.errors import ParityError
from neuroedge.types import Measurement


# A program's meta key: {spike output: neurons of each layer, in order along its last axis}
SPIKE_LAYERS = "spike_layers"


def spike_layers(program: Any) -> Mapping[str, Sequence[int]] | None:
    """The layers a program declares for its concatenated spike outputs (``SPIKE_LAYERS`` in
    its meta), for ``compare``'s ``layers``; None where it declares none."""
    return (getattr(program, "meta", None) or {}).get(SPIKE_LAYERS)


def is_binary(x: Any) -> bool:
    """True if every value of ``x`` is 0 or 1 (a spike train ``spike_kappa`` accepts)."""
    arr = np.asarray(x)
    return arr.dtype == bool or bool(np.all((arr == 0) | (arr == 1)))


def spike_kappa(a: Any, b: Any) -> float:
    """Cohen's kappa of two binary spike trains of one shape (0/1 or bool; ValueError else).

    ``kappa = (p_o - p_e) / (1 - p_e)``, with ``p_o`` the observed agreement (the fraction of
    equal (step, neuron) slots, ``spike_agreement``) and ``p_e = r_a r_b + (1 - r_a)(1 - r_b)``
    the agreement expected by chance from the firing rates ``r_a`` and ``r_b`` alone.
    Agreement alone rewards silence: at a 5% firing rate a silent train agrees 0.95 and two
    independent trains ~0.905 (``1 - 2r(1 - r)``), where kappa is 0 for both; identical
    trains score 1 and anti-correlated ones below 0. ``p_e == 1`` only when both trains are
    constant and equal (both silent, or both always firing): they are identical and kappa
    is defined as 1.0, though such a comparison proves nothing (callers flag a silent
    reference, e.g. ``silent_spike_outputs`` and ``neuroedge nir``'s warning).
    """
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"spike_kappa: shapes {x.shape} and {y.shape} (equal, non-empty)")
    if not (is_binary(x) and is_binary(y)):
        raise ValueError("spike_kappa: spike trains must hold only 0 and 1")
    x, y = x.astype(bool).ravel(), y.astype(bool).ravel()
    observed = float(np.mean(x == y))
    ra, rb = float(np.mean(x)), float(np.mean(y))
    chance = ra * rb + (1.0 - ra) * (1.0 - rb)
    if chance >= 1.0:  # both constant and equal, so identical
        return 1.0
    return (observed - chance) / (1.0 - chance)


def layer_parts(
    name: str, reference: np.ndarray, candidate: np.ndarray, sizes: Sequence[int] | None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(reference, candidate) of each layer of spike output ``name``: ``sizes`` neurons each,
    in order along the last axis (ParityError unless positive and summing to it); the whole
    output as one layer where ``sizes`` is None."""
    if sizes is None:
        return [(reference, candidate)]
    width = reference.shape[-1] if reference.ndim else 0
    if any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 for n in sizes):
        raise ParityError(f"output {name!r}: layer sizes {list(sizes)} must be positive ints")
    if sum(sizes) != width:
        raise ParityError(
            f"output {name!r}: layer sizes {list(sizes)} sum to {sum(sizes)}, not its last "
            f"axis {width} (shape {reference.shape})"
        )
    cuts = np.cumsum([0, *sizes])
    return [(reference[..., a:b], candidate[..., a:b]) for a, b in zip(cuts[:-1], cuts[1:])]


def layer_parity(
    reference: Any, candidate: Any, sizes: Sequence[int], name: str = "spikes"
) -> tuple[list[float], list[float]]:
    """Spike agreement and Cohen's kappa of each layer of a concatenated spike output
    (``layer_parts``): what ``compare`` averages and takes the minimum of."""
    parts = layer_parts(name, np.asarray(reference), np.asarray(candidate), sizes)
    return [float(np.mean(r == g)) for r, g in parts], [spike_kappa(r, g) for r, g in parts]


def compare(
    reference: Mapping[str, Any],
    candidate: Mapping[str, Any],
    layers: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, Measurement]:
    """Metrics over the outputs both sides produced: ``max_abs_err``, ``max_rel_err`` (each
    output's largest error over its largest reference magnitude; the absolute error where the
    reference is all zeros), ``spike_agreement`` (over every spike output together) and
    ``spike_kappa`` (the mean of each spike layer's own kappa; left out if one holds values
    other than 0 and 1). A spike output is one layer, or those ``layers`` gives it (neurons
    per layer along its last axis, ``spike_layers``); with ``layers``, also the worst layer's
    ``min_layer_spike_agreement`` and ``min_layer_spike_kappa``. A NaN on either side counts
    as an infinite error (``max`` would otherwise skip it and the output would pass
    unnoticed)."""
    shared = sorted(set(reference) & set(candidate))
    if not shared:
        raise ParityError(
            f"no common outputs: reference {sorted(reference)}, candidate {sorted(candidate)}"
        )
    worst, worst_rel = 0.0, 0.0
    trains: list[tuple[np.ndarray, np.ndarray]] = []
    for name in shared:
        ref, got = np.asarray(reference[name]), np.asarray(candidate[name])
        if ref.shape != got.shape:
            raise ParityError(f"output {name!r}: reference shape {ref.shape}, got {got.shape}")
        if name.startswith("spikes"):
            trains += layer_parts(name, ref, got, (layers or {}).get(name))
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
    metrics.update(_spike_metrics(trains, by_layer=bool(layers)))
    return metrics


def _spike_metrics(
    trains: Sequence[tuple[np.ndarray, np.ndarray]], by_layer: bool
) -> dict[str, Measurement]:
    """``compare``'s spike metrics of its (reference, candidate) layers: agreement over every
    slot together, kappa as the mean of each layer's own (pooled, two layers firing 90% and
    10% make chance agreement look low and kappa high: 0.64 for layers each independent of
    their reference), and with ``by_layer`` the worst layer's of each."""
    slots = sum(r.size for r, _ in trains)
    if not slots:
        return {}
    agree = [float(np.sum(r == g)) for r, g in trains]
    metrics = {"spike_agreement": Measurement(sum(agree) / slots, "fraction", "measured")}
    if by_layer:
        least = min(a / r.size for a, (r, _) in zip(agree, trains) if r.size)
        metrics["min_layer_spike_agreement"] = Measurement(least, "fraction", "measured")
    if all(is_binary(r) and is_binary(g) for r, g in trains):
        kappas = [spike_kappa(r, g) for r, g in trains if r.size]
        metrics["spike_kappa"] = Measurement(float(np.mean(kappas)), "kappa", "measured")
        if by_layer:
            metrics["min_layer_spike_kappa"] = Measurement(min(kappas), "kappa", "measured")
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
