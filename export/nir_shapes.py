"""Execution order, delayed edges and the shapes each node of a NIR graph really receives.

Cycles. NIR describes continuous time, where no edge delays; a discrete step must delay at
least one edge of every cycle, and NIR does not say which (nirtorch takes the one its queue of
nodes meets late, so renaming a node moves it). The rule here depends only on the graph's
structure, never on node names or on the order of nodes and edges in the file: with ``depth``
the fewest edges from any Input to a node, an edge ``s -> d`` carries ``s``'s output of the
*previous* step (zeros at t=0) exactly when ``d`` reaches ``s`` through nodes none shallower
than ``d``, i.e. when some cycle through the edge has ``d`` as a shallowest node (so
``depth[d] <= depth[s]``). Every cycle has a shallowest node, and the cycle's edge into it is
delayed, so the undelayed edges form no cycle. A population onto itself (directly or through
linear nodes) delays the edge back into it, as norse, nirtorch and snnTorch's graphs mean; a
cycle entered at several nodes of the same depth delays the edge into each of them, so each
sees the others' previous step (a synchronous update); a member entered deeper, through a
shortcut, is no shallowest node: on ``A -> B -> C -> A`` with a chord ``A -> C``, entered at
``A``, only ``C -> A`` is delayed and ``C`` sums ``B``'s and ``A``'s current steps.

Shapes. nir 1.0.8 declares no shape for pooling nodes and infers Conv2d's wrongly (input
channels without ``groups``, the kernel's height for both axes), and writers omit neuron
shapes (norse writes 0-d parameters), so :func:`propagate` computes every node's output shape
from the Inputs' declared shapes with torch's formulas, and refuses (naming the node, the
expected and the given shape) a parameter array that does not fit what the node receives: it
would otherwise broadcast along the last axis.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

import numpy as np
from neuroedge.errors import ArtifactError

Shape = tuple[int, ...]
# per-element parameters, as (parameter, ...) per node type: population shaped or scalar
ELEMENTWISE = {
    "LIF": ("tau", "r", "v_leak", "v_threshold", "v_reset"),
    "IF": ("r", "v_threshold", "v_reset"),
    "LI": ("tau", "r", "v_leak"),
    "I": ("r",),
    "CubaLIF": ("tau_syn", "tau_mem", "r", "v_leak", "v_threshold", "v_reset", "w_in"),
    "CubaLI": ("tau_syn", "tau_mem", "r", "v_leak", "w_in"),
    "Scale": ("scale",),
    "Threshold": ("threshold",),
}


def schedule(graph: Any) -> tuple[list[str], set[tuple[str, str]]]:
    """The nodes reached from the Inputs in an execution order, and the delayed edges (the
    module's rule); nodes not reached from an Input are left out."""
    succ: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for s, d in graph.edges:
        succ[s].append(d)
    inputs = [n for n, v in graph.nodes.items() if type(v).__name__ == "Input"]
    depth = dict.fromkeys(inputs, 0)
    queue = deque(inputs)
    while queue:
        node = queue.popleft()
        for nxt in succ[node]:
            if nxt not in depth:
                depth[nxt] = depth[node] + 1
                queue.append(nxt)
    above: dict[str, set[str]] = {}  # per node: what it reaches through nodes no shallower

    def closes_at(s: str, d: str) -> bool:
        """Does a cycle through ``s -> d`` have ``d`` as a shallowest node?"""
        if d not in above:
            seen, todo = {d}, [d]
            while todo:
                for nxt in succ[todo.pop()]:
                    if nxt not in seen and depth[nxt] >= depth[d]:
                        seen.add(nxt)
                        todo.append(nxt)
            above[d] = seen
        return s in above[d]

    back = {
        (s, d) for s, d in graph.edges if s in depth and depth[d] <= depth[s] and closes_at(s, d)
    }
    return _topological(graph, depth, back), back


def _topological(graph: Any, depth: dict[str, int], back: set[tuple[str, str]]) -> list[str]:
    """Kahn's order of the reached nodes over the undelayed edges (acyclic: each cycle's edge
    into its shallowest node is delayed), shallow nodes first."""
    index = {n: i for i, n in enumerate(graph.nodes)}
    waiting = dict.fromkeys(depth, 0)
    succ: dict[str, list[str]] = {n: [] for n in depth}
    for s, d in graph.edges:
        if s in depth and (s, d) not in back:
            waiting[d] += 1
            succ[s].append(d)
    ready = [(depth[n], index[n], n) for n in depth if not waiting[n]]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)[2]
        order.append(node)
        for nxt in succ[node]:
            waiting[nxt] -= 1
            if not waiting[nxt]:
                heapq.heappush(ready, (depth[nxt], index[nxt], nxt))
    return order


def declared(types: Any) -> Shape | None:
    """The shape in a node's ``input_type``/``output_type`` dict; None when absent or empty."""
    arr = next(iter(types.values()), None) if types else None
    if arr is None or np.asarray(arr).ndim != 1 or np.asarray(arr).size == 0:
        return None
    return tuple(int(d) for d in np.asarray(arr))


def pair(value: Any) -> tuple[int, int]:
    a, b = np.broadcast_to(np.asarray(value).reshape(-1), (2,))
    return int(a), int(b)


def conv2d_out(node: Any, hw: tuple[int, int]) -> Shape:
    """torch.nn.Conv2d's output shape for a spatial input ``hw``."""
    weight = np.asarray(node.weight)
    if isinstance(node.padding, str):
        pad = (0, 0) if node.padding == "valid" else None
    else:
        pad = pair(node.padding)
    if pad is None:  # "same"
        return (int(weight.shape[0]), *hw)
    stride, dil = pair(node.stride), pair(node.dilation)
    spatial = (
        (hw[i] + 2 * pad[i] - dil[i] * (weight.shape[2 + i] - 1) - 1) // stride[i] + 1
        for i in range(2)
    )
    return (int(weight.shape[0]), *spatial)


def conv2d_io(node: Any) -> tuple[Shape | None, Shape | None]:
    """A Conv2d's declared (input, output) shapes from ``input_shape``, the weight (out,
    in / groups, kh, kw), stride, padding, dilation and groups (torch's formula)."""
    if node.input_shape is None:
        return None, None
    hw = pair(node.input_shape)
    channels = int(np.asarray(node.weight).shape[1]) * int(node.groups)
    return (channels, *hw), conv2d_out(node, hw)


def _lead_ones_off(shape: Shape) -> Shape:
    return tuple(shape)[next((i for i, d in enumerate(shape) if d != 1), len(shape)) :]


def _check_params(where: str, name: str, kind: str, node: Any, got: Shape) -> None:
    """Refuse a per-element parameter that is neither one value nor ``got``'s shape."""
    for param in ELEMENTWISE[kind]:
        value = getattr(node, param, None)
        if value is None:
            continue
        shape = np.shape(value)
        if int(np.prod(shape)) != 1 and _lead_ones_off(shape) != _lead_ones_off(got):
            raise ArtifactError(
                f"{where}: node {name!r} ({kind}) parameter {param!r} has shape "
                f"{list(shape)}, but the node receives shape {list(got)}: expected "
                f"{list(got)} (or one value)"
            )


def _output(where: str, name: str, node: Any, got: Shape) -> Shape | None:
    """The output shape of ``node`` receiving ``got`` (torch's formulas)."""
    kind = type(node).__name__
    if kind in ELEMENTWISE:
        _check_params(where, name, kind, node, got)
        return got
    if kind in ("Affine", "Linear"):
        weight = np.shape(node.weight)
        if got[-1:] != weight[1:]:
            raise ArtifactError(
                f"{where}: node {name!r} ({kind}, weight {list(weight)}) receives shape "
                f"{list(got)}: expected a last axis of {weight[1]}"
            )
        return (*got[:-1], int(weight[0]))
    if kind in ("Conv2d", "SumPool2d", "AvgPool2d") and len(got) != 3:
        raise ArtifactError(
            f"{where}: node {name!r} ({kind}) receives shape {list(got)}: expected "
            "(channels, height, width)"
        )
    if kind == "Conv2d":
        channels = int(np.shape(node.weight)[1]) * int(node.groups)
        if got[0] != channels:
            raise ArtifactError(
                f"{where}: node {name!r} (Conv2d, weight {list(np.shape(node.weight))}, "
                f"groups {node.groups}) receives shape {list(got)}: expected {channels} "
                "input channels"
            )
        return conv2d_out(node, (got[1], got[2]))
    if kind in ("SumPool2d", "AvgPool2d"):
        k, s, p = pair(node.kernel_size), pair(node.stride), pair(node.padding)
        return (got[0], *((got[1 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(2)))
    if kind == "Flatten":
        start, end = (d % len(got) for d in (node.start_dim, node.end_dim))
        return (*got[:start], int(np.prod(got[start : end + 1])), *got[end + 1 :])
    if kind == "Output":
        return got
    return declared(getattr(node, "output_type", None))  # Delay, Conv1d, nested graphs


def _received(where: str, name: str, node: Any, sources: list[tuple[str, Shape]]) -> Shape:
    """The one shape the summed incoming edges deliver; refuse shapes that differ (a sum would
    broadcast them) or that disagree with the node's declared input."""
    got = sources[0][1]
    for src, shape in sources[1:]:
        if shape != got:
            raise ArtifactError(
                f"{where}: node {name!r} sums inputs of different shapes: {list(got)} "
                f"from {sources[0][0]!r}, {list(shape)} from {src!r}"
            )
    kind = type(node).__name__
    want = conv2d_io(node)[0] if kind == "Conv2d" else declared(getattr(node, "input_type", None))
    if want is not None and int(np.prod(want)) != int(np.prod(got)):
        raise ArtifactError(
            f"{where}: node {name!r} ({kind}) expects shape {list(want)} but receives "
            f"{list(got)} from {sources[0][0]!r}"
        )
    return got


def propagate(graph: Any, where: str = "graph") -> dict[str, Shape | None]:
    """Every reached node's output shape, from the Inputs' declared shapes (None: unknown,
    e.g. an Input without a shape); refuses parameters and edges that do not fit."""
    order, back = schedule(graph)
    preds: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for s, d in graph.edges:
        preds[d].append(s)
    out: dict[str, Shape | None] = {}
    into: dict[str, Shape] = {}
    for name in order:
        node = graph.nodes[name]
        known = [(s, out[s]) for s in preds[name] if (s, name) not in back and out.get(s)]
        if type(node).__name__ == "Input" or not known:
            out[name] = declared(getattr(node, "output_type", None)) or declared(
                getattr(node, "input_type", None)
            )
            continue
        into[name] = _received(where, name, node, known)
        out[name] = _output(where, name, node, into[name])
    for s, d in sorted(back):
        if out.get(s) and d in into and out[s] != into[d]:
            raise ArtifactError(
                f"{where}: node {d!r} sums inputs of different shapes: {list(into[d])} and "
                f"{list(out[s])} from {s!r} (its previous step)"
            )
    return out
