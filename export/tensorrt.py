"""ONNX -> a graph TensorRT will build: support checks, profiles, budgets and precision.

Everything here runs without TensorRT or a GPU (onnx and onnxruntime only), so CI tests it.

* **Support** (``neuroedge.export.tensorrt_support``): what the ONNX-TensorRT parser documents
  as unsupported, each issue naming the node.
* **Optimisation profile and static budget** (``neuroedge.export.tensorrt_profile``): min/opt/max
  shapes of every symbolic axis, weight and activation bytes at the profile's max shapes.
* **Precision lives in the graph.** TensorRT 11 removed the FP16/INT8 builder flags and
  implicit calibration: networks are strongly typed, so reduced precision must be written into
  the ONNX graph. ``fp16``: ``neuroedge.export.onnx_fp16`` (float16 inside, float32 IO, the ops
  with no float16 form kept float32 between Casts).
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
from pathlib import Path
from typing import Any

from neuroedge.atomic import atomic_path
from neuroedge.log_handlers import quiet_root_logger  # noqa: F401 (public here too)
from neuroedge.export.onnx_fp16 import (  # public names, kept importable from here
    FP16_MAX,  # noqa: F401
    PRECISION_KEY,
    check_no_subgraphs,  # noqa: F401
    convert_to_fp16,
)
from neuroedge.export.onnx_fp16 import set_meta as _set_meta
from neuroedge.export.tensorrt_profile import (  # public names, kept importable from here
    DEFAULT_RANGES,  # noqa: F401
    InputProfile,  # noqa: F401
    StaticBudget,  # noqa: F401
    optimization_profile,  # noqa: F401
    static_budget,  # noqa: F401
)
from neuroedge.export.tensorrt_support import (  # public names, kept importable from here
    OPSET_RANGE,  # noqa: F401
    QUANTIZED_TYPES,  # noqa: F401
    UNSUPPORTED_OPS,  # noqa: F401
    TensorRTUnsupported,  # noqa: F401
    check_tensorrt_support,
    tensorrt_issues,  # noqa: F401
)

VARIANTS = ("fp32", "fp16", "int8")
CALIBRATION_SAMPLES = 16
QUANTIZED_OPS = ("Conv", "Gemm", "MatMul")


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

    with atomic_path(dst) as tmp, quiet_root_logger():
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
        _record_int8(tmp, len(feeds))
    return Path(dst)


def _record_int8(path: Path, n_feeds: int) -> None:
    """Write the int8 precision record (how it was calibrated) into the graph at ``path``."""
    import onnx

    model = onnx.load(str(path))
    _set_meta(
        model,
        PRECISION_KEY,
        json.dumps(
            {
                "precision": "int8",
                "calibration": {"feeds": n_feeds, "method": "minmax", "symmetric": True},
            }
        ),
    )
    onnx.save(model, str(path))


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
    carry_state(src, dst, dst)
    if check:
        check_tensorrt_support(onnx.load(str(dst)), str(dst))
    return dst


def carry_state(state_of: Path, graph: Path, out: Path) -> Path:
    """Write ``graph`` to ``out`` with the initial state saved beside ``state_of`` (a stateful
    export) copied beside ``out`` first and the metadata pointing at it: a reduced graph loads
    on its own with the same learned state, and never lands beside an older state file."""
    import onnx

    from neuroedge.atomic import write_bytes
    from neuroedge.export.onnx import STATE_KEY, state_file

    if not state_file(state_of).is_file() and Path(graph) == Path(out):
        return Path(out)  # stateless, in place: nothing to carry, no second write
    model = onnx.load(str(graph))
    if state_file(state_of).is_file():
        write_bytes(state_file(out), state_file(state_of).read_bytes())
        _set_meta(model, STATE_KEY, state_file(out).name)
    with atomic_path(out) as tmp:
        onnx.save(model, str(tmp))
    return Path(out)
