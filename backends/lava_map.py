"""Map a NIR graph onto Lava's LIF + Dense/Sparse layers, quantise for Loihi, check chip fit.

Pure numpy (no lava import): the Lava backend builds processes from the :class:`Layer` list.

Each neuron population becomes one Lava ``LIF``; each chain of linear nodes feeding it (Conv2d,
AvgPool2d/SumPool2d, Flatten, Affine/Linear/Scale) is composed into one synaptic matrix
``W = f(I) - f(0)`` and bias ``b = f(0)`` by applying the chain to the identity, so a conv and
the pooling after it become a single ``Sparse`` process with exactly torch's arithmetic (Lava's
own ``Conv`` computes a flipped-kernel convolution in (x, y, c) layout; the composed sparse
matrix needs neither the flip nor the layout change). Dense matrices (< 50% zeros) use ``Dense``.
Shapes come from the Inputs through the synapses (neuroedge.export.nir_shapes.propagate), so a
population whose parameters are single values (norse writes 0-d arrays) takes its input's shape.

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

fixed_pt quantisation (Loihi 2 bit-accurate formats) is in neuroedge.backends.lava_fixed_point;
``quantize`` and ``FixedLayer`` stay importable from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from neuroedge.backends.lava_fixed_point import (  # public names, kept importable from here
    BIAS_MANT_MAX,  # noqa: F401
    BIAS_SOURCE,
    DENDRITE_MAX,  # noqa: F401
    UV_MAX,  # noqa: F401
    WEIGHT_EXP_MAX,  # noqa: F401
    WEIGHT_EXP_MIN,  # noqa: F401
    WEIGHT_MAX,  # noqa: F401
    FixedLayer,  # noqa: F401
    quantize,  # noqa: F401
)
from neuroedge.errors import ExportRefused

LINEAR_KINDS = ("Conv2d", "AvgPool2d", "SumPool2d", "Flatten", "Affine", "Linear", "Scale")
NEURON_KINDS = ("LIF", "IF", "LI", "CubaLIF", "CubaLI")
READOUT_KINDS = ("LI", "CubaLI")  # non-spiking: only a graph output, integrated on the host


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


def _known(shapes: dict[str, tuple[int, ...] | None], name: str) -> tuple[int, ...]:
    """Node ``name``'s output shape as propagated from the Inputs (a population's from the
    synapses into it: norse writes 0-d parameters); refused when no Input declares one."""
    if not shapes.get(name):
        raise ExportRefused(
            f"Lava mapping: the shape of node {name!r} is unknown (no shape reaches it from "
            "the graph's Input nodes); give the Input its shape"
        )
    return shapes[name]


def _synapses(
    graph: Any,
    name: str,
    preds: dict[str, list[str]],
    depths: dict[str, int],
    shapes: dict[str, tuple[int, ...] | None],
) -> tuple[list[tuple[str, np.ndarray]], np.ndarray, int, np.ndarray]:
    """The composed ``(source, W)`` of every edge into ``name``, the summed bias of the
    feed-forward edges, the depth, and the summed bias of the recurrent edges."""
    found, bias, recurrent = [], 0.0, 0.0
    for pred in preds[name]:
        source, chain = _walk_back(graph, pred, preds)
        if type(graph.nodes[source]).__name__ in READOUT_KINDS:
            raise ExportRefused(
                f"Lava mapping: node {source!r} is a non-spiking "
                f"{type(graph.nodes[source]).__name__} population feeding {name!r}; a "
                "non-spiking LI population can only be a readout on Lava (its membrane is "
                "integrated on the host from the recorded synaptic input, and Lava's neurons "
                "send spikes, not membranes)"
            )
        if source != name and source not in depths:
            raise ExportRefused(
                f"Lava mapping: edge {source!r} -> {name!r} feeds back from a "
                "later population; only a population's edges onto itself are "
                "mapped as recurrence"
            )
        w, b = compose_chain(graph, chain, _known(shapes, source))
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
    from neuroedge.export.nir_shapes import propagate

    order, _ = graph_order(graph)  # back edges: checked per population in _synapses
    shapes = propagate(graph, where="Lava mapping")
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
            found, bias, depth, _ = _synapses(graph, name, preds, depths, shapes)
            # the chain's output shape (a Flatten keeping axes gives (3, 36), not (108,)): the
            # composed weights flatten it in C order, so the host readout reshapes back to it
            shape = _known(shapes, pred)
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
        found, bias, depth, recurrent_bias = _synapses(graph, name, preds, depths, shapes)
        depths[name] = depth
        layers.append(
            _fold(name, node, kind, found, (bias, recurrent_bias), depth, depths, dt, shapes)
        )
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
    shapes: dict[str, tuple[int, ...] | None],
) -> Layer:
    """The population ``name`` with its synapses' gains and thresholds folded in."""
    shape = _known(shapes, name)
    g, spiking, offset, dv, du = _neuron_terms(name, node, kind, shape, dt)
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


def _neuron_terms(
    name: str, node: Any, kind: str, shape: tuple[int, ...], dt: float
) -> tuple[np.ndarray, bool, np.ndarray, float, float]:
    """``(gain, spiking, offset, dv, du)`` of neuron node ``name``: the per-neuron factor of
    its input and its leak bias, threshold folded in (none for a readout)."""
    from neuroedge.export.nir_run import check_euler_step

    check_euler_step(name, node, dt)  # dt > tau: dv or du above 1, unstable
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
    if kind in READOUT_KINDS:
        return gain, False, leak, dv, du
    if (node.metadata or {}).get("reset", "zero") != "zero" or np.any(flat(node.v_reset)):
        raise ExportRefused(
            f"Lava mapping: node {name!r} resets by subtraction or to a "
            "nonzero v_reset; Lava's LIF resets to 0"
        )
    theta = flat(node.v_threshold)
    if np.any(theta <= 0):
        raise ExportRefused(f"Lava mapping: node {name!r} has a threshold <= 0")
    return gain / theta, True, leak / theta, dv, du


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
