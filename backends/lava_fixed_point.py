"""Quantise a mapped Lava population (:class:`~neuroedge.backends.lava_map.Layer`) for Loihi 2.

fixed_pt (Loihi 2 bit-accurate models): weights become even 8-bit integers in [-256, 254]
(Lava's mixed-sign mode drops the lowest bit) with one weight exponent per synaptic process,
``a = (W_int s_in) << exp``, ``u' = u (4096 - du_int - 1) >> 12 + a << 6``,
``v' = v (4096 - dv_int) >> 12 + u' + bias_mant << bias_exp``, spike ``v > vth << 6``. Per
population one integer scale ``s`` maps float membrane to integer (``vth = s``), as large as
the 16-bit dendrite (any input), the bias mantissa and the 24-bit current allow; each synapse
then picks the exponent that puts its largest weight in 8 bits, ``W_int = round(s W / s_in /
2^exp)``, so a graded input, a shortcut and a recurrent loop into one population each keep
their own 8-bit resolution (one scale for all would round the small ones to 0; measured on
snnTorch's Braille RNN, whose input weights all quantised to 0). A delayed synapse keeps
exp = 0 (Lava's bit-accurate DelaySparse applies no exponent) and bounds ``s`` by its
largest weight instead. ``dv_int = round(4096 dv)``, ``du_int = round(4096 du) - 1``, bias
``round(64 s bias)`` as a 13-bit mantissa with the smallest exponent that fits. Graph inputs
are graded 8-bit ``round(x * input_scale)`` (default 255: inputs in [0, 1]).

Pure numpy (no lava import).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from neuroedge.errors import ExportRefused

if TYPE_CHECKING:
    from neuroedge.backends.lava_map import Layer, Synapse

WEIGHT_MAX = 254  # even 8-bit weights, mixed sign
DENDRITE_MAX = 2**15 - 1
BIAS_MANT_MAX = 4095
UV_MAX = 2**23 - 1  # Loihi's 24-bit current and voltage
WEIGHT_EXP_MIN, WEIGHT_EXP_MAX = -8, 7  # weight exponent of a synaptic process


@dataclass(frozen=True)
class FixedLayer:
    """A Layer quantised to Loihi's formats."""

    weights: tuple[np.ndarray, ...]  # per synapse (out, in) int32, even, in [-256, 254]
    weight_exps: tuple[int, ...]  # per synapse: effective weight W_int << exp (exp may be < 0)
    bias_mant: np.ndarray  # (out,) int, 13-bit signed
    bias_exp: int  # 0..7
    vth: int  # 17-bit
    dv: int  # 12-bit
    du: int  # 12-bit; Lava decays u by (du + 1) / 4096
    scale: float  # integer membrane / 64 = scale * float membrane
    weight_err: float  # max |W_int / scale * s_in - W| over the synapses (float units)


def quantize(layer: Layer, input_scales: dict[str, float] | float = 1.0) -> FixedLayer:
    """Loihi 2 fixed-point form of ``layer``. ``input_scales``: integer input per unit input of
    each graded source (by name; a number applies to every synapse), 1 for spikes."""

    def scale_of(syn: Synapse) -> float:
        if isinstance(input_scales, dict):
            return float(input_scales.get(syn.source, 1.0))
        return float(input_scales)

    q = [scale_of(syn) for syn in layer.synapses]
    s = math.floor(_scale_bound(layer, q))
    s, weights, exps = _fit_dendrite(layer, q, s)
    err = max(
        (
            float(np.abs(w * 2.0**e * qk / s - syn.weight).max())
            for w, e, qk, syn in zip(weights, exps, q, layer.synapses)
            if syn.weight.size
        ),
        default=0.0,
    )
    mant, exp = _bias_mantissa(layer.bias, s)
    du = int(np.clip(round(layer.du * 4096) - 1, 0, 4095))
    return FixedLayer(
        tuple(weights), tuple(exps), mant, exp, int(s), round(layer.dv * 4096), du, float(s), err
    )


def _scale_bound(layer: Layer, q: list[float]) -> float:
    """The largest population scale the dendrite, the bias mantissa, the current and the
    delayed synapses' 8-bit weights allow (before rounding)."""
    # the largest integer input is max(q, 1): an effective integer weight W s / q then adds up
    # to |W| s max(q, 1) / q to the 16-bit dendrite per input
    per_in = [max(qk, 1.0) / qk for qk in q]
    pos = sum(np.clip(syn.weight, 0, None).sum(1) * k for syn, k in zip(layer.synapses, per_in))
    neg = sum(-np.clip(syn.weight, None, 0).sum(1) * k for syn, k in zip(layer.synapses, per_in))
    row_bound = max(float(np.max(pos, initial=0.0)), float(np.max(neg, initial=0.0)), 1e-12)
    peak_bias = max(float(np.abs(layer.bias).max(initial=0.0)), 1e-12)
    bounds = [
        DENDRITE_MAX / row_bound,  # one step's synaptic input fits the 16-bit dendrite
        BIAS_MANT_MAX * 2**7 / (64 * peak_bias),  # bias within mantissa << 7
        UV_MAX * layer.du / (64 * row_bound),
    ]  # the current u stays inside 24 bits
    # DelaySparse's bit-accurate model applies no weight exponent: a delayed synapse's weights
    # must fit 8 bits at the population's scale itself
    bounds += [
        WEIGHT_MAX * qk / max(np.abs(syn.weight).max(initial=0.0), 1e-12)
        for syn, qk in zip(layer.synapses, q)
        if syn.delay
    ]
    return min(bounds)


def _fit_dendrite(layer: Layer, q: list[float], s: int) -> tuple[int, list[np.ndarray], list[int]]:
    """``(scale, weights, exponents)``: the largest scale from ``s`` down whose rounded
    weights keep every row sum inside the 16-bit dendrite."""
    while True:  # rounding may push a row sum one step past the dendrite: then one scale less
        if s < 1:
            raise ExportRefused(
                f"Lava fixed_pt: layer {layer.name!r} cannot be quantised "
                f"(scale {s} < 1: weights span too wide a range for 8 bits)"
            )
        weights, exps = _integer_weights(layer, q, s)
        eff = [w * 2.0**e * max(qk, 1.0) for w, e, qk in zip(weights, exps, q)]
        if (
            max(
                sum(np.clip(x, 0, None).sum(1) for x in eff).max(initial=0.0),
                sum(-np.clip(x, None, 0).sum(1) for x in eff).max(initial=0.0),
            )
            <= DENDRITE_MAX
        ):
            return s, weights, exps
        s -= 1


def _bias_mantissa(bias: np.ndarray, s: int) -> tuple[np.ndarray, int]:
    """``(mantissa, exponent)`` of the integer bias ``round(64 s bias)``, smallest exponent."""
    bias = np.round(bias * s * 64)
    exp = 0
    while np.abs(bias).max(initial=0) / 2**exp > BIAS_MANT_MAX and exp < 7:
        exp += 1
    mant = np.clip(np.round(bias / 2**exp), -BIAS_MANT_MAX - 1, BIAS_MANT_MAX).astype(int)
    return mant, exp


def _integer_weights(layer: Layer, q: list[float], s: int) -> tuple[list[np.ndarray], list[int]]:
    """Even 8-bit weights and one exponent per synapse for the population scale ``s``."""
    weights, exps = [], []
    for syn, qk in zip(layer.synapses, q):
        target = syn.weight * s / qk  # effective integer weight W_int << exp
        peak = float(np.abs(target).max(initial=0.0))
        exp = (
            0
            if syn.delay or peak == 0
            else int(
                np.clip(math.ceil(math.log2(peak / WEIGHT_MAX)), WEIGHT_EXP_MIN, WEIGHT_EXP_MAX)
            )
        )
        w_int = (2 * np.round(target / 2.0**exp / 2)).astype(np.int32)
        weights.append(np.clip(w_int, -WEIGHT_MAX - 2, WEIGHT_MAX))
        exps.append(exp)
    return weights, exps
