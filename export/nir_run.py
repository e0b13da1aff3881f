"""Import a NIR graph (from any framework) as a neuroedge program with explicit state.

``from_nir(graph, dt) -> TorchProgram`` whose step is ``(x_t, *state) -> (*outputs_t,
*state')``, so the host backend, parity checks and ONNX export treat it like any neuroedge SNN.
Every neuron is the forward-Euler step of NIR's continuous equation with the graph's dt:

    LIF      v' = v + dt/tau (v_leak - v + r i), spike v' > v_th, reset (zero | subtract)
    IF       v' = v + dt r i,                    spike and reset as LIF
    LI       v' = v + dt/tau (v_leak - v + r i), output v'
    I        v' = v + dt r i,                    output v'
    CubaLIF  i_s' = i_s + dt/tau_syn (w_in x - i_s);  v' = v + dt/tau_mem (v_leak - v + r i_s')
    CubaLI   the same without spikes

Design decisions, and why:

* Nodes with several incoming edges sum their inputs (NIR's semantics of a residual add).
* Cycles (recurrent weights): an edge ``s -> d`` carries ``s``'s output from the *previous*
  step (zeros at t=0) when a cycle through it has ``d`` as a shallowest node (fewest edges from
  any Input), whatever the nodes are called and however the file orders them
  (neuroedge.export.nir_shapes); a population onto itself delays the edge back into it, as
  norse/nirtorch and the Braille paper's platforms run them. That buffer is explicit state.
* Shapes come from the Inputs through every node (nir_shapes.propagate): a neuron parameter
  that is neither one value nor the shape the node receives is refused, naming the node.
* dt: from ``dt=`` or the graph's ``metadata["dt"]``; neither is an error, never a default.
* Reset: ``reset=`` overrides, else each node's ``metadata["reset"]``, else NIR's reset to
  ``v_reset`` ("zero").
* SumPool2d is ``avg_pool2d * k^2`` with zero padding counted (a sum). Delay, Conv1d and
  nested NIRGraph nodes are refused with the node's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.errors import ArtifactError, ExportRefused
from neuroedge.export.nir import RESETS
from neuroedge.export.nir_shapes import declared, propagate, schedule
from neuroedge.types import TorchProgram

STATEFUL = {
    "LIF": ("v",),
    "IF": ("v",),
    "LI": ("v",),
    "I": ("v",),
    "CubaLIF": ("i", "v"),
    "CubaLI": ("i", "v"),
}
SUPPORTED = (
    "Input",
    "Output",
    "Affine",
    "Linear",
    "Scale",
    "Conv2d",
    "SumPool2d",
    "AvgPool2d",
    "Flatten",
    "Threshold",
    *STATEFUL,
)


def graph_order(graph: Any) -> tuple[list[str], set[tuple[str, str]]]:
    """Nodes in execution order and the set of delayed edges: an edge ``s -> d`` carries
    ``s``'s previous step when ``d`` reaches ``s`` through nodes no shallower than ``d`` (fewest
    edges from an Input): a cycle through the edge has ``d`` as a shallowest node. The rule reads
    the graph's structure only, never node names or the order of nodes and edges
    (neuroedge.export.nir_shapes.schedule)."""
    inputs = [n for n, v in graph.nodes.items() if type(v).__name__ == "Input"]
    if not inputs:
        raise ArtifactError(f"NIR graph has no Input node (nodes: {sorted(graph.nodes)})")
    order, back = schedule(graph)
    unreached = sorted(set(graph.nodes) - set(order))
    if unreached:
        raise ArtifactError(f"NIR nodes {unreached} are not reachable from the inputs {inputs}")
    return order, back


def check_euler_step(name: str, node: Any, dt: float) -> None:
    """Refuse a step ``dt`` longer than a time constant (tau, tau_mem, tau_syn) of neuron node
    ``name``: forward Euler's ``v + dt / tau (...)`` then overshoots (decay ``1 - dt / tau``
    below 0: the membrane flips sign every step, and grows without bound past dt = 2 tau).
    dt = tau (no memory) is allowed; 1e-6 of slack absorbs float32 time constants."""
    for param in ("tau", "tau_mem", "tau_syn"):
        value = getattr(node, param, None)
        if value is None:
            continue
        tau = np.asarray(value, dtype=np.float64)
        bad = dt / tau > 1.0 + 1e-6
        if np.any(bad):
            low = float(tau[bad].min())
            raise ExportRefused(
                f"NIR node {name!r}: dt {dt:g} s > {param} {low:g} s ({int(bad.sum())} of "
                f"{tau.size} value(s)): dt / {param} = {dt / low:.4g} > 1, forward Euler is "
                f"unstable, use dt <= tau (here <= {float(tau.min()):g} s)"
            )


def _tensor(x: Any) -> Any:
    import torch

    return torch.as_tensor(np.asarray(x, dtype=np.float32))


class _Ops:
    """Stateless node functions (torch), keyed by NIR type name."""

    @staticmethod
    def apply(kind: str, node: Any, x: Any) -> Any:
        import torch
        import torch.nn.functional as F

        if kind == "Affine":
            return x @ _tensor(node.weight).T + _tensor(node.bias)
        if kind == "Linear":
            return x @ _tensor(node.weight).T
        if kind == "Scale":
            return x * _tensor(node.scale)
        if kind == "Threshold":
            return (x > _tensor(node.threshold)).to(x.dtype)
        if kind == "Flatten":  # NIR's dims exclude the batch: x has one more, in front
            start, end = (d if d < 0 else d + 1 for d in (node.start_dim, node.end_dim))
            return torch.flatten(x, start, end)
        if kind == "Conv2d":
            pad = (
                node.padding
                if isinstance(node.padding, str)
                else tuple(int(p) for p in np.broadcast_to(node.padding, (2,)))
            )
            return F.conv2d(
                x,
                _tensor(node.weight),
                _tensor(node.bias),
                tuple(int(s) for s in np.broadcast_to(node.stride, (2,))),
                pad,
                tuple(int(d) for d in np.broadcast_to(node.dilation, (2,))),
                node.groups,
            )
        k = tuple(int(v) for v in np.broadcast_to(node.kernel_size, (2,)))
        s = tuple(int(v) for v in np.broadcast_to(node.stride, (2,)))
        p = tuple(int(v) for v in np.broadcast_to(node.padding, (2,)))
        pooled = F.avg_pool2d(x, k, s, p, count_include_pad=True)
        return pooled * (k[0] * k[1]) if kind == "SumPool2d" else pooled


def _neuron(
    kind: str, node: Any, x: Any, state: list[Any], dt: float, reset: str
) -> tuple[Any, list[Any]]:
    """One Euler step of a NIR neuron node; ``state`` is [v] or [i, v]."""
    if kind.startswith("Cuba"):
        i = state[0] + dt / _tensor(node.tau_syn) * (_tensor(node.w_in) * x - state[0])
        v = state[1] + dt / _tensor(node.tau_mem) * (
            _tensor(node.v_leak) - state[1] + _tensor(node.r) * i
        )
        lead = [i]
    elif kind in ("IF", "I"):
        v, lead = state[0] + dt * _tensor(node.r) * x, []
    else:
        v = state[0] + dt / _tensor(node.tau) * (
            _tensor(node.v_leak) - state[0] + _tensor(node.r) * x
        )
        lead = []
    if kind in ("LI", "I", "CubaLI"):
        return v, [*lead, v]
    th = _tensor(node.v_threshold)
    z = (v > th).to(v.dtype)
    if reset == "subtract":
        v = v - th * z
    else:
        v = v * (1 - z) + _tensor(node.v_reset) * z
    return z, [*lead, v]


def node_shape(node: Any, key: str) -> tuple[int, ...]:
    """The shape a node declares in ``input_type``/``output_type``; () when it declares none."""
    return declared(getattr(node, key, None)) or ()


class NIRStepper:
    """Builds the torch module that steps a NIR graph (torch imported lazily)."""

    @staticmethod
    def module(graph: Any, dt: float, reset: str | None) -> Any:
        from torch import nn

        order, back = graph_order(graph)
        for name in order:
            kind = type(graph.nodes[name]).__name__
            if kind not in SUPPORTED:
                raise ExportRefused(
                    f"NIR node {name!r} of type {kind!r} cannot be imported "
                    f"(supported: {', '.join(SUPPORTED)})"
                )
            check_euler_step(name, graph.nodes[name], dt)
        preds = {n: [s for s, d in graph.edges if d == n] for n in graph.nodes}
        inputs = [n for n in order if type(graph.nodes[n]).__name__ == "Input"]
        outputs = [n for n in order if type(graph.nodes[n]).__name__ == "Output"]
        slots = [
            (n, part) for n in order for part in STATEFUL.get(type(graph.nodes[n]).__name__, ())
        ]
        slots += [(s, "prev") for s in sorted({s for s, _ in back})]

        def node_reset(name: str) -> str:
            chosen = reset or graph.nodes[name].metadata.get("reset", "zero")
            if chosen not in RESETS:
                raise ValueError(f"node {name!r}: reset {chosen!r} is not one of {RESETS}")
            return chosen

        resets = {
            n: node_reset(n)
            for n in order
            if type(graph.nodes[n]).__name__ in ("LIF", "IF", "CubaLIF")
        }

        class Stepper(nn.Module):
            def forward(self, *args: Any) -> tuple[Any, ...]:
                vals = dict(zip(inputs, args[: len(inputs)]))
                state = dict(zip(slots, args[len(inputs) :]))
                new_state: dict[tuple[str, str], Any] = {}
                for name in order:
                    node = graph.nodes[name]
                    kind = type(node).__name__
                    if kind == "Input":
                        continue
                    srcs = [
                        state[(s, "prev")] if (s, name) in back else vals[s] for s in preds[name]
                    ]
                    x = srcs[0] if len(srcs) == 1 else sum(srcs[1:], srcs[0])
                    if kind in STATEFUL:
                        parts = [state[(name, p)] for p in STATEFUL[kind]]
                        vals[name], upd = _neuron(
                            kind, node, x, parts, dt, resets.get(name, "zero")
                        )
                        new_state.update({(name, p): u for p, u in zip(STATEFUL[kind], upd)})
                    elif kind == "Output":
                        vals[name] = x
                    else:
                        vals[name] = _Ops.apply(kind, node, x)
                new_state.update({(s, "prev"): vals[s] for s, p in slots if p == "prev"})
                return (*(vals[o] for o in outputs), *(new_state[s] for s in slots))

        return Stepper(), inputs, outputs, slots


def from_nir(graph: Any, dt: float | None = None, reset: str | None = None) -> TorchProgram:
    """A stateful TorchProgram stepping ``graph``; inputs/outputs named after its nodes."""
    import torch

    dt = dt if dt is not None else (graph.metadata or {}).get("dt")
    if dt is None:
        raise ValueError(
            "this NIR graph carries no dt in its metadata: pass dt= (seconds per "
            "step); frameworks disagree on the default (norse 1e-3, snnTorch 1e-4)"
        )
    module, inputs, outputs, slots = NIRStepper.module(graph, float(dt), reset)
    shapes = propagate(graph, where="NIR graph")  # parameters that do not fit: refused
    if not slots:
        raise ExportRefused(
            "this NIR graph has no neuron or recurrent state: nothing to step "
            "over time (import it as a stateless network instead)"
        )

    def init_state(batch: int) -> tuple[Any, ...]:
        # unknown shape (an Input that declares none): (batch, 1) broadcasts
        return tuple(torch.zeros(batch, *(shapes.get(n) or (1,))) for n, _ in slots)

    state_names = tuple(f"{n.replace('.', '_')}_{p}" for n, p in slots)
    return TorchProgram(
        module.eval(),
        tuple(inputs),
        tuple(outputs),
        state_names,
        init_state,
        meta={"dt": float(dt), "source": "nir", "order": graph_order(graph)[0]},
    )


def run_nir(
    graph: Any, inputs: Mapping[str, Any], dt: float | None = None, reset: str | None = None
) -> dict[str, Any]:
    """Step ``graph`` over time-major inputs ``{input node: (T, batch, ...)}`` on the host."""
    from neuroedge.backends.host import run_torch_program

    return run_torch_program(from_nir(graph, dt, reset), inputs)
