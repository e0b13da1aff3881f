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
    without. No other tensor is quantized, nor a recurrent state graph input/output even where
    a weighted op reads it, unless it is binary (spikes: every calibration value 0 or 1, which
    int8 holds exactly): see ``_keep_qdq_on_weighted_inputs`` and ``_float_states``.
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
        _keep_qdq_on_weighted_inputs(tmp, _float_states(src, feeds))
        _record_int8(tmp, len(feeds))
    return Path(dst)


def _float_states(src: str | os.PathLike[str], feeds: Sequence[Mapping[str, Any]]) -> set[str]:
    """The recurrent states of ``src`` (graph inputs ``<s>`` with outputs ``<s>_out``) that
    are not binary: some calibration value of ``<s>`` in ``feeds``, or of ``<s>_out`` in the
    float graph run on them, is neither 0 nor 1. The outputs count too: a sequence graph's
    feeds hold only the initial state, and one of zeros is no sign of spikes."""
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    outputs = {o.name for o in session.get_outputs()}
    state = {i.name for i in session.get_inputs() if f"{i.name}_out" in outputs}

    def binary(value: Any) -> bool:
        return bool(np.isin(np.asarray(value), (0, 1)).all())

    spikes = [s for s in sorted(state) if all(binary(f[s]) for f in feeds)]
    for feed in feeds if spikes else ():
        values = session.run([f"{s}_out" for s in spikes], dict(feed))
        spikes = [s for s, v in zip(spikes, values) if binary(v)]
    return state - set(spikes)


def _keep_qdq_on_weighted_inputs(path: Path, float_states: set[str]) -> None:
    """Bypass every Q/DQ pair the quantizer put anywhere but a Conv/Gemm/MatMul input, and
    those on the ``float_states`` (graph inputs ``<s>``, outputs ``<s>_out``) wherever they are.

    ``DedicatedQDQPair`` gives the other readers of a quantized tensor (an Add, a Shape) and a
    graph output their own Q/DQ pair too: ttt's state ``S_out = S + dS`` feeds a MatMul, so
    the state carried to the next step was rounded to int8, and in the sequence graph every
    step's update added to the rounded state. Those readers and outputs now read the float
    tensor that went into the QuantizeLinear; a graph output keeps its name (the float
    producer's output is renamed to it). A float state's graph input and output stay float
    even at a weighted op: its range grows with the steps run, past what calibration on the
    examples saw (ttt's step graph: max 0.925 calibrated, 2.0 at T=256, where y's max rel err
    against the host was 0.21 with the state quantized and is 0.022 without). That holds for
    the step form; a sequence graph's states between steps are internal tensors and keep their
    Q/DQ at a MatMul like any activation. A binary state (bivision's spikes ``s_*``, which also
    feed the next layer's Conv) keeps its Q/DQ at weighted ops: 0/1 is exact in int8. Pairs
    left unread go.
    """
    import onnx

    model = onnx.load(str(path))
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    source = {  # DQ output -> the float tensor behind its QuantizeLinear
        n.output[0]: producer[n.input[0]].input[0]
        for n in graph.node
        if n.op_type == "DequantizeLinear"
        and n.input[0] in producer
        and producer[n.input[0]].op_type == "QuantizeLinear"
    }
    state = float_states | {f"{s}_out" for s in float_states}
    for node in graph.node:
        weighted = node.op_type in QUANTIZED_OPS
        for i, name in enumerate(node.input):
            if name not in source:
                continue
            if not (weighted and i < 2) or name in state or source[name] in state:
                node.input[i] = source[name]
    renamed: dict[str, str] = {}
    for out in graph.output:
        if out.name in source:
            src = renamed.get(source[out.name], source[out.name])
            renamed[src] = _float_graph_output(graph, out.name, src)
    _drop_unread_qdq(graph)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _float_graph_output(graph: Any, name: str, src: str) -> str:
    """Graph output ``name`` (a DQ output) made the float ``src`` under the same name; the DQ,
    still read by weighted ops, gets a new name. Returns the name ``src`` is now known by."""
    import onnx

    producer = {o: n for n in graph.node for o in n.output}
    dq = producer[name]
    dq.output[0] = f"{name}_weighted_input"
    for node in graph.node:
        node.input[:] = [dq.output[0] if i == name else i for i in node.input]
    made = producer.get(src)
    if made is None or src in {o.name for o in graph.output}:  # a graph input or output
        graph.node.append(onnx.helper.make_node("Identity", [src], [name]))
        return src
    made.output[:] = [name if o == src else o for o in made.output]
    for node in graph.node:
        node.input[:] = [name if i == src else i for i in node.input]
    return name


def _drop_unread_qdq(graph: Any) -> None:
    """Remove the Q/DQ nodes nothing reads any more, with their scales and zero points."""
    gone: set[str] = set()
    while True:
        read = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        dead = [
            n
            for n in graph.node
            if n.op_type in ("QuantizeLinear", "DequantizeLinear") and n.output[0] not in read
        ]
        if not dead:
            break
        for node in dead:
            gone.update([*node.input[1:], *node.output])
            graph.node.remove(node)
    read = {i for n in graph.node for i in n.input}
    for init in [t for t in graph.initializer if t.name in gone and t.name not in read]:
        graph.initializer.remove(init)
    for info in [v for v in graph.value_info if v.name in gone]:
        graph.value_info.remove(info)


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
