"""Fold ``Conv2d -> AvgPool2d`` into one ``Conv2d`` for NIR consumers without AvgPool2d.

For a stride-1 convolution ``W`` (kernel k) followed by a q x q average pool with stride q::

    avgpool(conv(x))[o, i, j] = conv'(x)[o, i, j],
    W'[o, c, m, n] = 1/q^2 * sum_{a, b < q} W[o, c, m - a, n - b]     (kernel k + q - 1)

with stride q, the same padding and bias. The fold is exact up to float summation order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from neuroedge.errors import ExportRefused


def folded_kernel(weight: np.ndarray, q: int) -> np.ndarray:
    """The kernel of ``avgpool_q(conv_weight(x))`` as one convolution."""
    out_c, in_c, kh, kw = weight.shape
    folded = np.zeros((out_c, in_c, kh + q - 1, kw + q - 1), dtype=np.float64)
    for a in range(q):
        for b in range(q):
            folded[:, :, a : a + kh, b : b + kw] += weight
    return (folded / (q * q)).astype(np.float32)


def _foldable(graph: Any, pool_name: str) -> str | None:
    """The conv feeding AvgPool2d ``pool_name`` when the pair folds exactly, else None."""
    pool = graph.nodes[pool_name]
    sources = [s for s, d in graph.edges if d == pool_name]
    if len(sources) != 1 or type(graph.nodes[sources[0]]).__name__ != "Conv2d":
        return None
    conv = graph.nodes[sources[0]]
    q = int(np.asarray(pool.kernel_size).ravel()[0])
    square = np.all(np.asarray(pool.kernel_size) == q) and np.all(np.asarray(pool.stride) == q)
    plain = (
        np.all(np.asarray(conv.stride) == 1)
        and np.all(np.asarray(conv.dilation) == 1)
        and np.all(np.asarray(pool.padding) == 0)
        and conv.groups == 1
    )
    fan_out = sum(1 for s, _ in graph.edges if s == sources[0])
    return sources[0] if square and plain and fan_out == 1 else None


def fold_avgpool(graph: Any) -> Any:
    """A copy of ``graph`` with every foldable Conv2d -> AvgPool2d pair merged."""
    import nir

    nodes, edges = dict(graph.nodes), list(graph.edges)
    for pool_name in [n for n, v in graph.nodes.items() if type(v).__name__ == "AvgPool2d"]:
        conv_name = _foldable(nir.NIRGraph(nodes, edges, type_check=False), pool_name)
        if conv_name is None:
            raise ExportRefused(
                f"AvgPool2d node {pool_name!r} cannot be folded into the node "
                "before it (needs a stride-1, single-consumer Conv2d and a "
                "square pool with stride = kernel)"
            )
        conv, pool = nodes[conv_name], nodes[pool_name]
        q = int(np.asarray(pool.kernel_size).ravel()[0])
        nodes[conv_name] = nir.Conv2d(
            input_shape=conv.input_shape,
            weight=folded_kernel(conv.weight, q),
            stride=np.array([q, q]),
            padding=conv.padding,
            dilation=conv.dilation,
            groups=conv.groups,
            bias=conv.bias,
        )
        del nodes[pool_name]
        edges = [(conv_name if s == pool_name else s, d) for s, d in edges if d != pool_name]
    return nir.NIRGraph(nodes=nodes, edges=edges, metadata=dict(graph.metadata), type_check=True)
