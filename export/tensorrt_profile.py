"""Optimisation profiles and static memory budgets of an ONNX graph bound for TensorRT.

Both run without TensorRT or a GPU (onnx only):

* **Optimisation profile.** Every symbolic axis (``batch`` from our exporter) gets
  ``min <= opt <= max``: ``opt`` is the size in the example feeds (the shape that is measured),
  ``min`` 1 and ``max`` from ``ranges`` (``batch`` defaults to 32). A symbol without a range is
  pinned to its example size (min = opt = max): a range we do not know would make TensorRT pick
  kernels for shapes nobody runs.
* **Static budget.** Weight bytes and the sum of every tensor's bytes at the profile's max
  shapes (an upper bound on activation memory: no reuse assumed), from ONNX shape inference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_RANGES = {"batch": (1, 32)}


@dataclass(frozen=True)
class InputProfile:
    """One input's optimisation-profile shapes: TensorRT tunes for ``opt``, accepts min..max."""

    name: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def __post_init__(self) -> None:
        if not len(self.min) == len(self.opt) == len(self.max):
            raise ValueError(
                f"profile {self.name!r}: ranks differ {self.min} {self.opt} {self.max}"
            )
        if any(not lo <= mid <= hi for lo, mid, hi in zip(self.min, self.opt, self.max)):
            raise ValueError(
                f"profile {self.name!r}: need min <= opt <= max per axis, got "
                f"{self.min} / {self.opt} / {self.max}"
            )

    def admits(self, shape: Sequence[int]) -> bool:
        return len(shape) == len(self.min) and all(
            lo <= int(d) <= hi for lo, d, hi in zip(self.min, shape, self.max)
        )


@dataclass(frozen=True)
class StaticBudget:
    """Memory an engine needs at the profile's max shapes, known before any build."""

    weight_bytes: int  # initializers and constants, at their stored dtype
    activation_bytes: int  # every non-weight tensor at max shapes summed (no reuse: upper bound)
    nodes: int
    unknown_tensors: tuple[str, ...] = ()  # tensors shape inference could not size

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.activation_bytes


def graph_inputs(model: Any) -> list[Any]:
    """The real inputs of a graph (old IR versions also list initializers as inputs)."""
    consts = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in consts]


def optimization_profile(
    model: Any, feeds: Mapping[str, Any], ranges: Mapping[str, tuple[int, int]] | None = None
) -> tuple[InputProfile, ...]:
    """min/opt/max shapes of every graph input; ``opt`` from ``feeds`` (see module docstring)."""
    ranges = {**DEFAULT_RANGES, **(ranges or {})}
    profiles = []
    for inp in graph_inputs(model):
        if inp.name not in feeds:
            raise ValueError(
                f"no example feed for graph input {inp.name!r} (feeds: {sorted(feeds)})"
            )
        opt = tuple(int(d) for d in feeds[inp.name].shape)
        dims = inp.type.tensor_type.shape.dim
        if len(dims) != len(opt):
            raise ValueError(
                f"graph input {inp.name!r} has rank {len(dims)}, example feed has shape {list(opt)}"
            )
        lo, hi = [], []
        for axis, (dim, size) in enumerate(zip(dims, opt)):
            if dim.HasField("dim_value"):
                if dim.dim_value != size:
                    raise ValueError(
                        f"graph input {inp.name!r} axis {axis} is fixed at "
                        f"{dim.dim_value}, example feed has {size}"
                    )
                lo.append(size), hi.append(size)
                continue
            low, high = ranges.get(dim.dim_param, (size, size))
            lo.append(min(low, size)), hi.append(max(high, size))
        profiles.append(InputProfile(inp.name, tuple(lo), opt, tuple(hi)))
    return tuple(profiles)


def static_budget(model: Any, profile: Sequence[InputProfile]) -> StaticBudget:
    """Weights and activations (bytes) with every input at its profile max."""
    import numpy as np
    import onnx
    from onnx import helper

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    maxima = {p.name: p.max for p in profile}
    for inp in graph_inputs(fixed):
        for dim, size in zip(inp.type.tensor_type.shape.dim, maxima[inp.name]):
            dim.Clear()
            dim.dim_value = size
    del fixed.graph.value_info[:]
    inferred = onnx.shape_inference.infer_shapes(fixed, data_prop=True)
    weights = sum(
        int(np.prod(i.dims, dtype=np.int64)) * helper.tensor_dtype_to_np_dtype(i.data_type).itemsize
        for i in fixed.graph.initializer
    )
    activations, unknown = 0, []
    for vi in (*inferred.graph.value_info, *inferred.graph.output, *graph_inputs(inferred)):
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if not tt.HasField("shape") or None in dims or not tt.elem_type:
            unknown.append(vi.name)
            continue
        activations += (
            int(np.prod(dims, dtype=np.int64))
            * helper.tensor_dtype_to_np_dtype(tt.elem_type).itemsize
        )
    return StaticBudget(weights, activations, len(fixed.graph.node), tuple(unknown))
