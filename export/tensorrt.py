"""ONNX -> a graph TensorRT will build: support checks, profiles, budgets and precision.

Everything here runs without TensorRT or a GPU (onnx and onnxruntime only), so CI tests it.

* **Support.** ``tensorrt_issues`` lists what the ONNX-TensorRT parser documents as
  unsupported (onnx-tensorrt ``docs/operators.md`` for TensorRT 10.15, opsets 9..24; TensorRT
  11.x accepts up to opset 25): operator types, non-default domains, opsets out of range,
  Q/DQ with a nonzero zero point, dequantization of int32 (ONNX Runtime's bias quantization). Each
  issue names the node.
* **Optimisation profile.** Every symbolic axis (``batch`` from our exporter) gets
  ``min <= opt <= max``: ``opt`` is the size in the example feeds (the shape that is measured),
  ``min`` 1 and ``max`` from ``ranges`` (``batch`` defaults to 32). A symbol without a range is
  pinned to its example size (min = opt = max): a range we do not know would make TensorRT pick
  kernels for shapes nobody runs.
* **Static budget.** Weight bytes and the sum of every tensor's bytes at the profile's max
  shapes (an upper bound on activation memory: no reuse assumed), from ONNX shape inference.
* **Precision lives in the graph.** TensorRT 11 removed the FP16/INT8 builder flags and
  implicit calibration: networks are strongly typed, so reduced precision must be written into
  the ONNX graph. ``fp16``: every float32 initializer, constant and cast becomes float16, with a
  Cast at each float32 graph input and output (the IO stays float32, so callers do not change).
  We convert ourselves: onnxconverter-common 1.16 mistypes Cast/Unsqueeze outputs of our
  exported graphs (measured), and NVIDIA's ModelOpt AutoCast is a heavy GPU-side dependency.
  Control-flow subgraphs (If/Loop/Scan) are refused for fp16 rather than half-converted.
  ``int8``: explicit Q/DQ from ONNX Runtime's static quantizer with what TensorRT requires:
  symmetric int8 (zero point 0), per-channel weights, Q/DQ only around weighted ops (Conv, Gemm,
  MatMul), min-max calibration on the model's own example inputs (16 seeds by default; a
  spiking layer's input is 0/1, which symmetric int8 with scale 1/127 represents exactly). The same
  graphs run in ONNX
  Runtime on the CPU, which is how the tests check their numerics without a GPU.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuroedge.atomic import atomic_path
from neuroedge.errors import ExportRefused

VARIANTS = ("fp32", "fp16", "int8")
OPSET_RANGE = (9, 25)  # inclusive; 24 in TensorRT 10.15, 25 in 11.x
DEFAULT_RANGES = {"batch": (1, 32)}
FP16_MAX = 65504.0
CALIBRATION_SAMPLES = 16
QUANTIZED_OPS = ("Conv", "Gemm", "MatMul")
PRECISION_KEY = "neuroedge.precision"
# ONNX TensorProto types TensorRT dequantizes: INT8, FLOAT8E4M3FN, INT4, FLOAT4E2M1.
QUANTIZED_TYPES = (3, 17, 22, 23)
# Listed "N" in onnx-tensorrt's operator support matrix (TensorRT 10.15).
UNSUPPORTED_OPS = frozenset(
    (
        "AffineGrid",
        "Bernoulli",
        "BitShift",
        "BitwiseAnd",
        "BitwiseNot",
        "BitwiseOr",
        "BitwiseXor",
        "CenterCropPad",
        "Col2Im",
        "Compress",
        "ConcatFromSequence",
        "ConvInteger",
        "DFT",
        "Det",
        "DynamicQuantizeLinear",
        "ImageDecoder",
        "MatMulInteger",
        "MaxRoiPool",
        "MaxUnpool",
        "MelWeightMatrix",
        "Multinomial",
        "NegativeLogLikelihoodLoss",
        "Optional",
        "OptionalGetElement",
        "OptionalHasElement",
        "QLinearConv",
        "QLinearMatMul",
        "RegexFullMatch",
        "SequenceAt",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceErase",
        "SequenceInsert",
        "SequenceLength",
        "SequenceMap",
        "SoftmaxCrossEntropyLoss",
        "SplitToSequence",
        "StringConcat",
        "StringNormalizer",
        "StringSplit",
        "TfIdfVectorizer",
        "Unique",
    )
)
# Inputs whose type is tensor(float) whatever the op's T is: they stay float32 in fp16 graphs.
FLOAT32_ONLY_INPUTS = {"Resize": (2,), "Upsample": (1,)}


class TensorRTUnsupported(ExportRefused):
    """An ONNX graph TensorRT's parser cannot take; the message names each offending node."""


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


def tensorrt_issues(model: Any) -> list[str]:
    """Why TensorRT's ONNX parser would reject ``model``, one line per node; [] if nothing."""
    from onnx import numpy_helper

    issues = []
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx") and not (
            OPSET_RANGE[0] <= entry.version <= OPSET_RANGE[1]
        ):
            issues.append(
                f"opset {entry.version} is outside TensorRT's {OPSET_RANGE[0]}..{OPSET_RANGE[1]}"
            )
    consts = {i.name: i for i in model.graph.initializer}
    for index, node in enumerate(model.graph.node):
        where = f"node {node.name or f'#{index}'!r} ({node.op_type})"
        if node.domain not in ("", "ai.onnx"):
            issues.append(f"{where}: domain {node.domain!r} needs a TensorRT plugin")
        elif node.op_type in UNSUPPORTED_OPS:
            issues.append(f"{where}: operator not supported by the TensorRT ONNX parser")
        source = consts.get(node.input[0]) if node.input else None
        if (
            node.op_type == "DequantizeLinear"
            and source is not None
            and source.data_type not in QUANTIZED_TYPES
        ):
            issues.append(
                f"{where}: dequantizes {node.input[0]!r} of ONNX type "
                f"{source.data_type}; TensorRT dequantizes int8/int4/fp8/fp4 only"
            )
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and len(node.input) > 2:
            zero = consts.get(node.input[2])
            if zero is not None and numpy_helper.to_array(zero).any():
                issues.append(
                    f"{where}: zero point {node.input[2]!r} is nonzero; TensorRT "
                    "takes symmetric quantization only"
                )
    return issues


def check_tensorrt_support(model: Any, where: str = "model") -> None:
    """Raise TensorRTUnsupported listing every issue ``tensorrt_issues`` finds."""
    issues = tensorrt_issues(model)
    if issues:
        raise TensorRTUnsupported(
            f"{where}: TensorRT cannot parse this graph:\n  " + "\n  ".join(issues)
        )


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


def _to_fp16_tensor(tensor: Any) -> tuple[Any, int]:
    import numpy as np
    from onnx import numpy_helper

    arr = numpy_helper.to_array(tensor)
    clipped = np.clip(arr, -FP16_MAX, FP16_MAX)
    return (
        numpy_helper.from_array(clipped.astype(np.float16), tensor.name),
        int(np.count_nonzero(clipped != arr)),
    )


def _retype_nodes(nodes: Sequence[Any], keep32: set[str]) -> int:
    """Casts, dtype attributes and float constants of ``nodes`` to float16; returns #clipped."""
    from onnx import AttributeProto, TensorProto

    clipped = 0
    for node in nodes:
        for attr in node.attribute:
            if attr.name in ("to", "dtype") and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.FLOAT16
            elif (
                attr.type == AttributeProto.TENSOR
                and attr.t.data_type == TensorProto.FLOAT
                and not keep32.intersection(node.output)
            ):
                converted, n = _to_fp16_tensor(attr.t)
                attr.t.CopyFrom(converted)
                clipped += n
    return clipped


def convert_to_fp16(model: Any) -> Any:
    """A float16 copy of ``model`` with float32 IO (Casts at the boundary); see module doc."""
    import onnx
    from onnx import TensorProto, helper

    check_no_subgraphs(model)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    keep32 = {
        n.input[i]
        for n in graph.node
        for i in FLOAT32_ONLY_INPUTS.get(n.op_type, ())
        if i < len(n.input)
    }
    clipped = 0
    for i, init in enumerate(graph.initializer):
        if init.data_type == TensorProto.FLOAT and init.name not in keep32:
            converted, n = _to_fp16_tensor(init)
            graph.initializer[i].CopyFrom(converted)
            clipped += n
    clipped += _retype_nodes(graph.node, keep32)
    is_float = lambda vi: vi.type.tensor_type.elem_type == TensorProto.FLOAT
    inner = {i.name: f"{i.name}__fp16" for i in graph_inputs(out) if is_float(i)}
    inner.update(
        {o.name: f"{o.name}__fp16" for o in graph.output if is_float(o) and o.name not in inner}
    )
    head = [
        helper.make_node(
            "Cast", [name], [inner[name]], to=TensorProto.FLOAT16, name=f"{name}__to_fp16"
        )
        for name in inner
        if name in {i.name for i in graph.input}
    ]
    tail = [
        helper.make_node(
            "Cast", [inner[o.name]], [o.name], to=TensorProto.FLOAT, name=f"{o.name}__to_fp32"
        )
        for o in graph.output
        if is_float(o)
    ]
    for node in graph.node:
        node.input[:] = [inner.get(n, n) for n in node.input]
        node.output[:] = [inner.get(n, n) for n in node.output]
    nodes = [*head, *graph.node, *tail]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    _set_meta(out, PRECISION_KEY, json.dumps({"precision": "fp16", "clipped": clipped}))
    out = onnx.shape_inference.infer_shapes(out, check_type=True, strict_mode=True)
    onnx.checker.check_model(out)
    return out


def check_no_subgraphs(model: Any) -> None:
    from onnx import AttributeProto

    for node in model.graph.node:
        if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
            raise TensorRTUnsupported(
                f"node {node.name!r} ({node.op_type}) carries a subgraph; fp16 preparation "
                "rewrites flat graphs only: build fp32, or convert with ModelOpt AutoCast"
            )


def _set_meta(model: Any, key: str, value: str) -> None:
    for entry in model.metadata_props:
        if entry.key == key:
            entry.value = value
            return
    entry = model.metadata_props.add()
    entry.key, entry.value = key, value


def calibration_feeds(
    session: Any, meta: Mapping[str, Any], examples: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Graph feeds for int8 calibration from the model's own example inputs.

    Sequence-form (or stateless) graphs take each example whole with the initial state. A
    step-form graph is unrolled with ``session`` (the float32 graph in ONNX Runtime) so that
    every step is calibrated with the state it really meets, not only the initial one.
    """
    import numpy as np

    feeds = []
    state_names = tuple(meta.get("state_names", ()))
    data = [n for n in meta["inputs"] if n not in state_names]
    fetch = [f"{s}_out" for s in state_names]
    for example in examples:
        xs = [np.ascontiguousarray(example[n]) for n in data]
        if not state_names or meta.get("form") == "sequence":
            batch = int(xs[0].shape[1]) if state_names else 0
            state = [
                np.ascontiguousarray(np.broadcast_to(s, (batch, *s.shape[1:])))
                for s in meta.get("state_init", ())
            ]
            feeds.append(dict(zip([*data, *state_names], [*xs, *state])))
            continue
        state = [
            np.ascontiguousarray(np.broadcast_to(s, (int(xs[0].shape[1]), *s.shape[1:])))
            for s in meta["state_init"]
        ]
        for t in range(int(xs[0].shape[0])):
            feed = dict(zip([*data, *state_names], [*(x[t] for x in xs), *state]))
            feeds.append(feed)
            state = session.run(fetch, feed)
    return feeds


def quantize_int8(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], feeds: Sequence[Mapping[str, Any]]
) -> Path:
    """Explicit Q/DQ int8 graph of ``src`` at ``dst`` (atomically), calibrated on ``feeds``.

    Inputs and weights of Conv/Gemm/MatMul are quantized, their outputs are not (as NVIDIA's
    pytorch-quantization places its quantizers): an SNN's synaptic current feeds a membrane
    that is compared with a threshold, and rounding it to 8 bits each step flipped spikes.
    Measured on the ``make demo`` lif_convnet checkpoint (ONNX Runtime CPU, 10 test digits):
    spike agreement with fp32 0.933 / 0.830 (layer 1 / 2) with output Q/DQ, 0.998 / 0.987
    without.
    """
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    if not feeds:
        raise ValueError("int8 calibration needs at least one feed")

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(feeds)

        def get_next(self) -> dict[str, Any] | None:
            return next(self._it, None)

    with atomic_path(dst) as tmp:
        quantize_static(
            str(src),
            str(tmp),
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=list(QUANTIZED_OPS),
            calibrate_method=CalibrationMethod.MinMax,
            extra_options={
                "ActivationSymmetric": True,
                "WeightSymmetric": True,
                "AddQDQPairToWeight": True,
                "DedicatedQDQPair": True,
                "QuantizeBias": False,  # int32 bias DQ: TensorRT rejects it
                "QDQOpTypePerChannelSupportToAxis": {"MatMul": 1},
                "OpTypesToExcludeOutputQuantization": list(QUANTIZED_OPS),
            },
        )
        model = onnx.load(str(tmp))
        _set_meta(
            model,
            PRECISION_KEY,
            json.dumps(
                {
                    "precision": "int8",
                    "calibration": {"feeds": len(feeds), "method": "minmax", "symmetric": True},
                }
            ),
        )
        onnx.save(model, str(tmp))
    return Path(dst)


def prepare_precision(
    src: str | os.PathLike[str],
    variant: str,
    dst_dir: str | os.PathLike[str],
    feeds: Sequence[Mapping[str, Any]] = (),
    *,
    check: bool = True,
) -> Path:
    """The ``variant`` graph of float32 ``src`` in ``dst_dir``.

    ``check`` refuses graphs the support matrix flags (``TensorRTUnsupported``); the backend
    passes False when TensorRT itself is present, so that its parser has the last word.
    """
    import onnx

    if variant not in VARIANTS:
        raise ValueError(f"TensorRT variant {variant!r} is not one of {', '.join(VARIANTS)}")
    src = Path(src)
    dst = Path(dst_dir) / f"{src.stem}.{variant}.onnx"
    if variant == "fp32":
        model = onnx.load(str(src))
        _set_meta(model, PRECISION_KEY, json.dumps({"precision": "fp32"}))
        with atomic_path(dst) as tmp:
            onnx.save(model, str(tmp))
    elif variant == "fp16":
        model = convert_to_fp16(onnx.load(str(src)))
        with atomic_path(dst) as tmp:
            onnx.save(model, str(tmp))
    else:
        quantize_int8(src, dst, feeds)
    if check:
        check_tensorrt_support(onnx.load(str(dst)), str(dst))
    return dst
