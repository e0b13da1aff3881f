"""Map a NIR graph onto Lava's LIF + Dense/Sparse layers, quantise for Loihi, check chip fit.

Pure numpy (no lava import): the Lava backend builds processes from the :class:`Layer` list.

Each neuron population becomes one Lava ``LIF``; each chain of linear nodes feeding it (Conv2d,
AvgPool2d/SumPool2d, Flatten, Affine/Linear/Scale) is composed into one synaptic matrix
``W = f(I) - f(0)`` and bias ``b = f(0)`` by applying the chain to the identity, so a conv and
the pooling after it become a single ``Sparse`` process with exactly torch's arithmetic (Lava's
own ``Conv`` computes a flipped-kernel convolution in (x, y, c) layout; the composed sparse
matrix needs neither the flip nor the layout change). Dense matrices (< 50% zeros) use ``Dense``.

Graphs, not only chains. A population with several incoming edges (a residual net's membrane
shortcut: NIR sums a node's inputs) gets one synapse per edge, all into its ``a_in`` (Lava sums
the messages of every connection into a port). Every synaptic process delays by one step, so a
population at depth ``d`` (longest path from the input, in populations) sees step ``t`` of the
host at Lava step ``t + d``; an edge from a population at depth ``d_s`` therefore carries
``d - d_s - 1`` extra steps of synaptic delay (``DelaySparse``/``DelayDense``; Loihi 2 has
6-bit synaptic delays: up to 63 extra steps, checked by ``chip_fit``). A linear readout
straight into an Output (an ``Affine`` with no neuron after it) is a non-spiking population
with ``dv = 1``: its value is the synaptic input of the step plus the bias, computed on the
host from the recorded ``a_out`` like the LI readout.

Neuron equations. NIR LIF with Euler step dt, ``v' = v + dt/tau (v_leak - v + r i)``, equals
Lava's LIF ``u = a_in`` (du = 1), ``v' = (1 - dv) v + u + bias`` with::

    dv = dt / tau,   W_lava = (dt r / tau) W / theta,   bias = dt / tau (r b + v_leak) / theta

and threshold 1: the per-neuron threshold theta is folded into the incoming weights and bias
(Lava's LIF takes one ``vth`` per population), which scales the membrane by 1/theta and leaves
spikes unchanged. The LI readout keeps scale 1 (no threshold): Lava runs its synapses (Dense)
and the 10-neuron leaky integrator runs on the host from the Dense output, as lava-dl does.

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from neuroedge.errors import ExportRefused

LINEAR_KINDS = ("Conv2d", "AvgPool2d", "SumPool2d", "Flatten", "Affine", "Linear", "Scale")
NEURON_KINDS = ("LIF", "IF", "LI", "CubaLIF", "CubaLI")
BIAS_SOURCE = "<bias>"  # a constant-1 input channel: a bias into a synaptic current
WEIGHT_MAX = 254  # even 8-bit weights, mixed sign
DENDRITE_MAX = 2**15 - 1
BIAS_MANT_MAX = 4095
UV_MAX = 2**23 - 1  # Loihi's 24-bit current and voltage
WEIGHT_EXP_MIN, WEIGHT_EXP_MAX = -8, 7  # weight exponent of a synaptic process


@dataclass(frozen=True)
class Synapse:
    """One incoming edge of a population: composed weights from one source population."""

    source: str  # NIR node name of the source population (or the Input node)
    weight: np.ndarray  # (out, in) float64, threshold folded in
    delay: int = 0  # extra steps on top of the one step every synaptic process takes


@dataclass(frozen=True)
class Layer:
    """One neuron population and the synapses feeding it, in Lava's float units."""

    name: str  # NIR node name of the neurons (the last linear node for a bare readout)
    synapses: tuple[Synapse, ...]
    bias: np.ndarray  # (out,) per-step bias current, threshold folded in
    dv: float  # voltage decay per step, dt / tau (1: no memory)
    spiking: bool  # False: readout (integrated on the host)
    shape: tuple[int, ...]  # population shape without batch
    depth: int = 1  # populations on the longest path from the input, this one included
    du: float = 1.0  # synaptic current decay per step, dt / tau_syn (1: u = a_in, no memory)


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


@dataclass(frozen=True)
class Loihi2Limits:
    """Per-core resources of Loihi 2 (Intel: 128 neuro cores, 1 M neurons, 120 M synapses per
    chip). Synapses per core assume uncompressed 8-bit weights in 128 KiB of synaptic memory,
    the conservative bound; Intel's 120 M counts compressed/shared weights."""

    neurons_per_core: int = 8192
    synapses_per_core: int = 131072
    cores_per_chip: int = 128
    chips: int = 1
    max_delay: int = 63  # synaptic delay field, 6 bits (steps on top of the one of every synapse)


@dataclass(frozen=True)
class ChipFit:
    """What a mapping needs; ``reason`` is empty when it fits."""

    neurons: int
    synapses: int
    cores: int
    per_layer: tuple[tuple[str, int, int, int], ...]  # (name, neurons, synapses, cores)
    limits: Loihi2Limits = field(default_factory=Loihi2Limits)
    reason: str = ""

    @property
    def fits(self) -> bool:
        return not self.reason


def _chain_fn(graph: Any, chain: list[str]) -> Any:
    from neuroedge.export.nir_run import _Ops

    def apply(x: Any) -> Any:
        for name in chain:
            node = graph.nodes[name]
            x = _Ops.apply(type(node).__name__, node, x)
        return x

    return apply


def compose_chain(
    graph: Any, chain: list[str], in_shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """``(W, b)`` with ``chain(x).flatten() == W @ x.flatten() + b`` (float64)."""
    import torch

    fn = _chain_fn(graph, chain)
    n = int(np.prod(in_shape))
    with torch.inference_mode():
        zero = fn(torch.zeros(1, *in_shape)).reshape(1, -1).double()
        eye = fn(torch.eye(n).reshape(n, *in_shape)).reshape(n, -1).double()
    return (eye - zero).T.numpy(), zero[0].numpy()


def _walk_back(graph: Any, start: str, preds: dict[str, list[str]]) -> tuple[str, list[str]]:
    """``(source population, linear chain)`` of the edge that ends in node ``start``'s output."""
    chain: list[str] = []
    node = start
    while True:
        kind = type(graph.nodes[node]).__name__
        if kind in (*NEURON_KINDS, "Input"):
            return node, chain
        if kind not in LINEAR_KINDS:
            raise ExportRefused(f"Lava mapping: node {node!r} of type {kind!r} has no Lava mapping")
        chain.insert(0, node)
        sources = preds[node]
        if len(sources) != 1:
            raise ExportRefused(
                f"Lava mapping: linear node {node!r} has {len(sources)} inputs "
                f"({sources}); only neurons may sum several inputs"
            )
        node = sources[0]


def _out_shape(node: Any) -> tuple[int, ...]:
    from neuroedge.export.nir_run import _node_shape

    return _node_shape(node, "output_type")


def _synapses(
    graph: Any, name: str, preds: dict[str, list[str]], depths: dict[str, int]
) -> tuple[list[tuple[str, np.ndarray]], np.ndarray, int, np.ndarray]:
    """The composed ``(source, W)`` of every edge into ``name``, the summed bias of the
    feed-forward edges, the depth, and the summed bias of the recurrent edges."""
    found, bias, recurrent = [], 0.0, 0.0
    for pred in preds[name]:
        source, chain = _walk_back(graph, pred, preds)
        if source != name and source not in depths:
            raise ExportRefused(
                f"Lava mapping: edge {source!r} -> {name!r} feeds back from a "
                "later population; only a population's edges onto itself are "
                "mapped as recurrence"
            )
        w, b = compose_chain(graph, chain, _out_shape(graph.nodes[source]))
        found.append((source, w))
        if source == name:
            recurrent = recurrent + b
        else:
            bias = bias + b
    forward = [depths[s] for s, _ in found if s != name]
    if not forward:
        raise ExportRefused(f"Lava mapping: node {name!r} has no feed-forward input")
    return (
        found,
        np.asarray(bias, np.float64),
        1 + max(forward),
        np.asarray(recurrent, np.float64),
    )


def plan(graph: Any, dt: float) -> list[Layer]:
    """The populations of ``graph`` in order, with composed, threshold-folded synapses."""
    from neuroedge.export.nir_run import graph_order

    order, _ = graph_order(graph)  # back edges: checked per population in _synapses
    preds = {n: [s for s, d in graph.edges if d == n] for n in graph.nodes}
    depths = {n: 0 for n, v in graph.nodes.items() if type(v).__name__ == "Input"}
    layers = []
    for name in order:
        node = graph.nodes[name]
        kind = type(node).__name__
        if kind == "Output":
            if not any(type(graph.nodes[p]).__name__ in LINEAR_KINDS for p in preds[name]):
                continue  # fed by a population: the output reads that population
            if len(preds[name]) != 1:
                raise ExportRefused(
                    f"Lava mapping: output {name!r} sums {len(preds[name])} "
                    f"inputs ({preds[name]}); a readout takes one"
                )
            pred = preds[name][0]
            found, bias, depth, _ = _synapses(graph, name, preds, depths)
            shape = tuple(int(v) for v in np.atleast_1d(bias.shape))
            layers.append(
                Layer(pred, tuple(Synapse(s, w) for s, w in found), bias, 1.0, False, shape, depth)
            )
            continue
        if kind == "Input" or kind in LINEAR_KINDS:
            continue
        if kind not in NEURON_KINDS:
            raise ExportRefused(
                f"Lava mapping: node {name!r} of type {kind!r} is not mapped "
                f"(neurons: {', '.join(NEURON_KINDS)}, synapses: "
                f"{', '.join(LINEAR_KINDS)})"
            )
        found, bias, depth, recurrent_bias = _synapses(graph, name, preds, depths)
        depths[name] = depth
        layers.append(_fold(name, node, kind, found, (bias, recurrent_bias), depth, depths, dt))
    return layers


def _fold(
    name: str,
    node: Any,
    kind: str,
    found: list[tuple[str, np.ndarray]],
    biases: tuple[np.ndarray, np.ndarray],
    depth: int,
    depths: dict[str, int],
    dt: float,
) -> Layer:
    shape = _out_shape(node)
    flat = lambda a: np.broadcast_to(np.asarray(a, np.float64), shape).reshape(-1)

    def one(values: Any, what: str) -> float:
        v = flat(values)
        if not np.allclose(v, v[0]):
            raise ExportRefused(
                f"Lava mapping: node {name!r} has per-neuron {what}; Lava's LIF "
                "takes one decay per population"
            )
        return float(v[0])

    r, du = flat(node.r), 1.0
    if kind == "IF":
        gain, dv, leak = dt * r, 0.0, np.zeros_like(r)
    elif kind.startswith("Cuba"):  # u = dv r / theta i: the current decays by du, feeds v
        du, dv = dt / one(node.tau_syn, "tau_syn"), dt / one(node.tau_mem, "tau_mem")
        gain, leak = dv * r * du * flat(node.w_in), dv * flat(node.v_leak)
    else:
        dv = dt / one(node.tau, "tau")
        gain, leak = dv * r, dv * flat(node.v_leak)
    if kind in ("LI", "CubaLI"):
        g, spiking, offset = gain, False, leak
    else:
        if (node.metadata or {}).get("reset", "zero") != "zero" or np.any(flat(node.v_reset)):
            raise ExportRefused(
                f"Lava mapping: node {name!r} resets by subtraction or to a "
                "nonzero v_reset; Lava's LIF resets to 0"
            )
        theta = flat(node.v_threshold)
        if np.any(theta <= 0):
            raise ExportRefused(f"Lava mapping: node {name!r} has a threshold <= 0")
        g, spiking, offset = gain / theta, True, leak / theta
    # a recurrent edge (source == name) arrives one step later by itself: no extra delay
    synapses = [
        Synapse(s, g[:, None] * w, 0 if s == name else depth - depths[s] - 1) for s, w in found
    ]
    b, b_rec = biases
    recurrent = any(s == name for s, _ in found)
    if recurrent and np.any(offset):
        raise ExportRefused(
            f"Lava mapping: recurrent node {name!r} has a leak bias: it would "
            "fire before its input starts and feed that back into step 0"
        )
    # A bias into u (du < 1) accumulates there, so it comes in as a constant input channel,
    # aligned like the edge it belongs to; so does any bias of a recurrent population (a
    # voltage bias would make it fire before its input starts). Otherwise a feed-forward bias
    # is a voltage bias. A recurrent edge's bias starts one step later: the edge carries the
    # previous step's output of its chain, zero at step 0 (neuroedge's NIR runner, nirtorch).
    if np.any(b) and (du != 1.0 or recurrent):
        synapses.append(Synapse(BIAS_SOURCE, (g * b)[:, None], depth - 1))
        b = np.zeros_like(b)
    if np.any(b_rec):
        synapses.append(Synapse(BIAS_SOURCE, (g * b_rec)[:, None], depth))
    return Layer(name, tuple(synapses), g * b + offset, dv, spiking, shape, depth, du)


def quantize(layer: Layer, input_scales: dict[str, float] | float = 1.0) -> FixedLayer:
    """Loihi 2 fixed-point form of ``layer``. ``input_scales``: integer input per unit input of
    each graded source (by name; a number applies to every synapse), 1 for spikes."""

    def scale_of(syn: Synapse) -> float:
        if isinstance(input_scales, dict):
            return float(input_scales.get(syn.source, 1.0))
        return float(input_scales)

    q = [scale_of(syn) for syn in layer.synapses]
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
    s = math.floor(min(bounds))
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
            break
        s -= 1
    err = max(
        (
            float(np.abs(w * 2.0**e * qk / s - syn.weight).max())
            for w, e, qk, syn in zip(weights, exps, q, layer.synapses)
            if syn.weight.size
        ),
        default=0.0,
    )
    bias = np.round(layer.bias * s * 64)
    exp = 0
    while np.abs(bias).max(initial=0) / 2**exp > BIAS_MANT_MAX and exp < 7:
        exp += 1
    mant = np.clip(np.round(bias / 2**exp), -BIAS_MANT_MAX - 1, BIAS_MANT_MAX).astype(int)
    du = int(np.clip(round(layer.du * 4096) - 1, 0, 4095))
    return FixedLayer(
        tuple(weights), tuple(exps), mant, exp, int(s), round(layer.dv * 4096), du, float(s), err
    )


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


def chip_fit(layers: list[Layer], limits: Loihi2Limits = Loihi2Limits()) -> ChipFit:
    """Neurons, synapses (nonzero weights) and cores each population needs on Loihi 2."""
    rows, total_cores = [], 0
    for layer in layers:
        neurons = int(np.prod(layer.shape))
        synapses = sum(int(np.count_nonzero(syn.weight)) for syn in layer.synapses)
        cores = max(
            math.ceil(neurons / limits.neurons_per_core),
            math.ceil(synapses / limits.synapses_per_core),
            1,
        )
        rows.append((layer.name, neurons, synapses, cores))
        total_cores += cores
    available = limits.cores_per_chip * limits.chips
    reason = ""
    late = [
        (layer.name, syn.source, syn.delay)
        for layer in layers
        for syn in layer.synapses
        if syn.delay > limits.max_delay
    ]
    if late:
        reason = (
            f"synapses {late[0][1]!r} -> {late[0][0]!r} need a delay of {late[0][2]} "
            f"steps; Loihi 2 delays at most {limits.max_delay} (6 bits)"
        )
    elif total_cores > available:
        worst = max(rows, key=lambda r: r[3])
        reason = (
            f"needs {total_cores} Loihi 2 cores, {available} available "
            f"({limits.chips} chip(s) x {limits.cores_per_chip}); largest: layer "
            f"{worst[0]!r} with {worst[1]} neurons and {worst[2]} synapses takes "
            f"{worst[3]} cores (per core: {limits.neurons_per_core} neurons, "
            f"{limits.synapses_per_core} synapses)"
        )
    return ChipFit(
        sum(r[1] for r in rows), sum(r[2] for r in rows), total_cores, tuple(rows), limits, reason
    )
