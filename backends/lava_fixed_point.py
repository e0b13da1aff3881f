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
exp = 0 and bounds ``s`` by its largest weight instead: Lava 0.10's bit-accurate DelaySparse
does shift by a ``weight_exp``, but neuroedge passes it none (lava_processes.py), so the
delayed shortcut's weights share the population's scale cap (an emulation with the exponent
made no measurable difference: b1_lif2 isolated agreement 0.9991 -> 0.9989).
``dv_int = round(4096 dv)``, ``du_int = round(4096 du) - 1``, bias
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
    from neuroedge.backends.lava_map import Layer

BIAS_SOURCE = "<bias>"  # a constant input channel: a bias into a synaptic current

WEIGHT_MAX = 254  # even 8-bit weights, mixed sign
DENDRITE_MAX = 2**15 - 1
BIAS_MANT_MAX = 4095
UV_MAX = 2**23 - 1  # Loihi's 24-bit current and voltage
WEIGHT_EXP_MIN, WEIGHT_EXP_MAX = -8, 7  # weight exponent of a synaptic process
VTH_MAX = 2**17 - 1  # LIF threshold field, 17 bits unsigned
VTH_SHIFT = 6  # the threshold compared with v is vth << 6
DECAY_MAX = 4095  # dv and du, 12 bits: decays by dv / 4096 and (du + 1) / 4096 per step


@dataclass(frozen=True)
class FixedLayer:
    """A Layer quantised to Loihi's formats."""

    weights: tuple[np.ndarray, ...]  # per synapse (out, in) int32, even, in [-256, 254]
    weight_exps: tuple[int, ...]  # per synapse: effective weight W_int << exp (exp may be < 0)
    bias_mant: np.ndarray  # (out,) int, 13-bit signed
    bias_exp: int  # 0..7
    vth: int  # 17-bit: 1..VTH_MAX
    dv: int  # 12-bit
    du: int  # 12-bit; Lava decays u by (du + 1) / 4096
    scale: float  # integer membrane / 64 = scale * float membrane
    weight_err: float  # max |W_int / scale * s_in - W| over the synapses (float units)
    bias_scale: float = 1.0  # integer value of the constant bias channel (BIAS_SOURCE)


def quantize(layer: Layer, input_scales: dict[str, float] | float = 1.0) -> FixedLayer:
    """Loihi 2 fixed-point form of ``layer``. ``input_scales``: integer input per unit input of
    each graded source (by name; a number applies to every synapse), 1 for spikes. The
    constant bias channel (``BIAS_SOURCE``) takes its own scale: given in the dict, else
    :func:`bias_channel_scale` picks it for this population, whatever the inputs' scale."""
    scales = dict(input_scales) if isinstance(input_scales, dict) else None
    if scales is not None and BIAS_SOURCE not in scales:
        scales[BIAS_SOURCE] = bias_channel_scale(layer, scales)
    q = [
        float(scales.get(syn.source, 1.0) if scales is not None else input_scales)
        for syn in layer.synapses
    ]
    bias_scale = float(scales[BIAS_SOURCE] if scales is not None else input_scales)
    bounds = _scale_bounds(layer, q)
    s, weights, exps = _fit_dendrite(layer, q, math.floor(min(bounds.values())), bounds)
    err = max(
        (
            float(np.abs(w * 2.0**e * qk / s - syn.weight).max())
            for w, e, qk, syn in zip(weights, exps, q, layer.synapses)
            if syn.weight.size
        ),
        default=0.0,
    )
    _check_kept(layer, q, s, weights, exps)
    mant, exp = _bias_mantissa(layer.bias, s)
    dv, du = _decays(layer)
    if not 1 <= s <= VTH_MAX:  # _scale_bounds caps s: a guard, not a clip
        raise ExportRefused(
            f"Lava fixed_pt: layer {layer.name!r} threshold vth={s} is outside Loihi's "
            f"17-bit field 1..{VTH_MAX}"
        )
    return FixedLayer(
        tuple(weights), tuple(exps), mant, exp, int(s), dv, du, float(s), err, bias_scale
    )


def bias_channel_scale(layer: Layer, input_scales: dict[str, float]) -> float:
    """The integer value (1..255) of the constant bias channel into ``layer``: the smallest
    that lets a delayed bias synapse (exp = 0, 8-bit weights) take the scale the other
    bounds allow, so its largest weight uses all 8 bits; 1 without one (an undelayed
    synapse takes an exponent, any channel value gives it the same resolution)."""
    delayed = [syn for syn in layer.synapses if syn.source == BIAS_SOURCE and syn.delay]
    if not delayed:
        return 1.0
    q = [float({**input_scales, BIAS_SOURCE: 255.0}.get(syn.source, 1.0)) for syn in layer.synapses]
    bounds = _scale_bounds(layer, q)
    others = min(v for k, v in bounds.items() if not k.startswith(f"delayed {BIAS_SOURCE}"))
    peak = max(float(np.abs(syn.weight).max(initial=0.0)) for syn in delayed)
    return float(np.clip(math.ceil(math.floor(others) * peak / WEIGHT_MAX), 1, 255))


def _check_kept(
    layer: Layer, q: list[float], s: int, weights: list[np.ndarray], exps: list[int]
) -> None:
    """Refuse a synapse whose every nonzero weight rounds to 0 at scale ``s`` (it would
    vanish silently: the weight exponent bottoms out at -8)."""
    for syn, qk, w, e in zip(layer.synapses, q, weights, exps):
        if np.any(syn.weight) and not np.any(w):
            raise ExportRefused(
                f"Lava fixed_pt: layer {layer.name!r}: every weight from {syn.source!r} "
                f"(largest {float(np.abs(syn.weight).max()):.3g}) rounds to 0 at scale {s}; "
                f"the smallest it can hold is {2.0 ** (e + 1) * qk / s:.3g}"
            )


def _decays(layer: Layer) -> tuple[int, int]:
    """``(dv_int, du_int)`` in Loihi's 12-bit fields (see the module), refusing what they
    cannot hold instead of clipping it: dt > tau (a decay above 1 per step) and a current or
    voltage leak slower than Loihi's slowest, 1/4096 per step (a voltage leak that rounds to 0
    would silently make a leaky neuron an integrate-and-fire one; dv = 0 exactly, a neuron
    without leak, is kept). ``dv = 1`` (dt = tau: no memory)
    is 4096, stored as 4095, the nearest the field holds (v keeps 1/4096 of itself)."""
    found = []
    for what, value, offset in (("dv", layer.dv, 0), ("du", layer.du, 1)):
        got = round(value * 4096) - offset
        vanished = what == "dv" and value > 0 and got == 0  # a leak rounded away: no leak
        if value <= 1.0 + 1e-6 and got >= 0 and not vanished:  # dt / tau = 1 may be 1 + 1e-7
            found.append(min(got, DECAY_MAX))
            continue
        hint = (
            "dt > tau: forward Euler is unstable, use dt <= tau"
            if value > 1.0
            else "its decay is slower than Loihi's slowest, 1/4096 per step (a longer dt, or "
            "a non-leaky neuron if that is meant)"
        )
        raise ExportRefused(
            f"Lava fixed_pt: layer {layer.name!r} {what} = dt / tau = {value:.6g} needs the "
            f"integer {got}, outside Loihi's 12-bit 0..{DECAY_MAX} ({hint})"
        )
    return found[0], found[1]


def _scale_bounds(layer: Layer, q: list[float]) -> dict[str, float]:
    """The largest population scale each limit allows (before rounding), by limit: the
    dendrite, the bias mantissa, the current, the threshold field (``vth = s`` in 17 bits,
    ``vth << 6`` below the 24-bit voltage's top) and the delayed synapses' 8-bit weights."""
    # the largest integer input is max(q, 1): an effective integer weight W s / q then adds up
    # to |W| s max(q, 1) / q to the 16-bit dendrite per input
    per_in = [max(qk, 1.0) / qk for qk in q]
    pos = sum(np.clip(syn.weight, 0, None).sum(1) * k for syn, k in zip(layer.synapses, per_in))
    neg = sum(-np.clip(syn.weight, None, 0).sum(1) * k for syn, k in zip(layer.synapses, per_in))
    row_bound = max(float(np.max(pos, initial=0.0)), float(np.max(neg, initial=0.0)), 1e-12)
    peak_bias = max(float(np.abs(layer.bias).max(initial=0.0)), 1e-12)
    bounds = {
        "dendrite": DENDRITE_MAX / row_bound,  # one step's synaptic input fits 16 bits
        "bias": BIAS_MANT_MAX * 2**7 / (64 * peak_bias),  # bias within mantissa << 7
        "current": UV_MAX * layer.du / (64 * row_bound),  # the current u stays in 24 bits
        "vth": VTH_MAX,  # vth = s fits its 17 bits
        "voltage": (UV_MAX - 1) >> VTH_SHIFT,  # v can still exceed vth << 6 (24-bit clip)
    }
    # neuroedge gives DelaySparse no weight_exp (lava_processes.py; Lava 0.10's bit-accurate
    # model would shift by one): a delayed synapse's weights must fit 8 bits at the
    # population's scale itself
    for j, (syn, qk) in enumerate(zip(layer.synapses, q)):
        if syn.delay:
            peak = max(np.abs(syn.weight).max(initial=0.0), 1e-12)
            bounds[f"delayed {syn.source} #{j}"] = WEIGHT_MAX * qk / peak
    return bounds


def _fit_dendrite(
    layer: Layer, q: list[float], s: int, bounds: dict[str, float]
) -> tuple[int, list[np.ndarray], list[int]]:
    """``(scale, weights, exponents)``: the largest scale from ``s`` down whose rounded
    weights keep every row sum inside the 16-bit dendrite (``bounds``: for the message)."""
    while True:  # rounding may push a row sum one step past the dendrite: then one scale less
        if s < 1:
            limits = ", ".join(f"{k} {v:.3g}" for k, v in bounds.items())
            raise ExportRefused(
                f"Lava fixed_pt: layer {layer.name!r} cannot be quantised: its scale "
                f"(integer threshold vth) would be {s} < 1, leaving no precision "
                f"(largest scale each limit allows: {limits}); its weights or bias span "
                "too wide a range for Loihi's 8-bit weights and 24-bit state"
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
