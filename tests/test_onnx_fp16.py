"""float16 conversion of ONNX graphs (neuroedge.export.onnx_fp16), checked in ONNX Runtime on
the CPU: ops with no float16 form computed in float32 between Casts, others refused by name."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from neuroedge.errors import ExportRefused  # noqa: E402
from neuroedge.export.onnx_fp16 import PRECISION_KEY, convert_to_fp16  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits=()) -> Any:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)


def _positions(dtype: int) -> Any:
    """Y = X * Range(0, n d, d) with n = X's length cast to ``dtype`` (d = 0.5, or 1 for an
    integer type): a position table over a float length, as torch.arange exports it."""
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    step = np.array(0.5 if dtype == TensorProto.FLOAT else 1, dtype=np_type)
    nodes = [
        helper.make_node("Shape", ["X"], ["n64"]),
        helper.make_node("Squeeze", ["n64"], ["n_scalar"]),
        helper.make_node("Cast", ["n_scalar"], ["n"], to=dtype),
        helper.make_node("Mul", ["n", "step"], ["limit"]),
        helper.make_node("Range", ["start", "limit", "step"], ["pos"], name="positions"),
        helper.make_node("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["X", "posf"], ["Y"]),
    ]
    inits = [
        numpy_helper.from_array(np.zeros((), np_type), "start"),
        numpy_helper.from_array(step, "step"),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n"])],
        inits,
    )


def test_float_range_is_computed_in_float32_between_casts() -> None:
    model = _positions(TensorProto.FLOAT)
    x = np.linspace(-3, 3, 20, dtype=np.float32)
    half = convert_to_fp16(model)
    record = json.loads({p.key: p.value for p in half.metadata_props}[PRECISION_KEY])
    assert record["float32_ops"] == 1
    types = {v.name: v.type.tensor_type.elem_type for v in half.graph.value_info}
    types.update({i.name: i.data_type for i in half.graph.initializer})
    rng = next(n for n in half.graph.node if n.op_type == "Range")
    assert {types[i] for i in rng.input} == {TensorProto.FLOAT}, "Range must see float32"
    assert types[rng.output[0]] == TensorProto.FLOAT
    (want,), (got,) = _run(model, {"X": x}), _run(half, {"X": x})
    assert got.dtype == np.float32 and got.shape == want.shape == (20,)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    assert err < 2e-3, err  # the positions are right
    # start and step feed Range: they stay float32, with the Cast and Mul that make its limit
    assert {i.name: i.data_type for i in half.graph.initializer} == {
        "start": TensorProto.FLOAT,
        "step": TensorProto.FLOAT,
    }
    assert record["float32_nodes"] == 3  # Cast, Mul, Range


@pytest.mark.parametrize(
    ("limit", "step", "length"), [(1.0, 0.1, 10), (2049.0, 1.0, 2049), (300.5, 0.25, 1202)]
)
def test_range_arguments_are_never_rounded_to_float16(limit, step, length) -> None:
    # in float16 0.1 is 0.09998 (Range(0, 1, .) gives 11 elements) and 2049 is 2048
    inits = [
        numpy_helper.from_array(np.array(0.0, np.float32), "s"),
        numpy_helper.from_array(np.array(step, np.float32), "d"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),  # used in float16
    ]
    nodes = [
        helper.make_node("Cast", ["n"], ["limit"], to=TensorProto.FLOAT),
        helper.make_node("Range", ["s", "limit", "d"], ["r"]),
        helper.make_node("Mul", ["r", "half"], ["Y"]),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("n", TensorProto.DOUBLE, [])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None])],
        inits,
    )
    feed = {"n": np.array(limit, np.float64)}
    half = convert_to_fp16(model)
    (want,), (got,) = _run(model, feed), _run(half, feed)
    assert want.shape == got.shape == (length,)
    np.testing.assert_allclose(got, want, rtol=1e-3)
    types = {i.name: i.data_type for i in half.graph.initializer}
    assert types == {"s": TensorProto.FLOAT, "d": TensorProto.FLOAT, "half": TensorProto.FLOAT16}


def test_integer_range_is_left_alone() -> None:
    model = _positions(TensorProto.INT64)
    half = convert_to_fp16(model)
    record = json.loads({p.key: p.value for p in half.metadata_props}[PRECISION_KEY])
    assert record["float32_ops"] == 0
    assert not any(n.name.endswith(("__to32", "__to16")) for n in half.graph.node)
    x = np.arange(10, dtype=np.float32)
    (want,), (got,) = _run(model, {"X": x}), _run(half, {"X": x})
    np.testing.assert_allclose(got, want, rtol=1e-3)


def test_an_op_still_without_a_float16_form_is_refused_naming_it() -> None:
    # NonMaxSuppression's boxes and scores are float32 only: not an island op, so refused.
    model = _model(
        [helper.make_node("NonMaxSuppression", ["B", "S"], ["I"], name="nms")],
        [
            helper.make_tensor_value_info("B", TensorProto.FLOAT, [1, 4, 4]),
            helper.make_tensor_value_info("S", TensorProto.FLOAT, [1, 1, 4]),
        ],
        [helper.make_tensor_value_info("I", TensorProto.INT64, [None, 3])],
    )
    with pytest.raises(ExportRefused, match="no float16 form.*NonMaxSuppression"):
        convert_to_fp16(model)
    onnx.checker.check_model(model)  # the float32 graph itself is fine
