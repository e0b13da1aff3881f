"""ONNX preparation for TensorRT, checked without TensorRT: support matrix, profiles, budgets,
fp16 and int8 graphs (run in ONNX Runtime on the CPU against the float32 graph)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from neuroedge.export.tensorrt import (
    PRECISION_KEY,
    InputProfile,
    TensorRTUnsupported,
    calibration_feeds,
    check_tensorrt_support,
    convert_to_fp16,
    optimization_profile,
    prepare_precision,
    static_budget,
    tensorrt_issues,
)
from neuroedge.registry import get_backend, get_model
from onnx import TensorProto, helper, numpy_helper

MODEL = "snn.lif_convnet"


def tiny_graph(
    nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any] = (), opset: int = 17
) -> Any:
    graph = helper.make_graph(nodes, "tiny", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def matmul_add(weight: np.ndarray | None = None) -> Any:
    """Z = X @ W + B with X [batch, 8], W [8, 4], B [4]."""
    w = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4) if weight is None else weight
    return tiny_graph(
        [
            helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm"),
            helper.make_node("Add", ["Y", "B"], ["Z"], name="add"),
        ],
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["batch", 4])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.ones(4, np.float32), "B")],
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The LIF convnet exported in both forms, with its ONNX Runtime (CPU) artifacts."""
    import torch

    spec = get_model(MODEL)
    program = spec.build({"smoke": True})
    with torch.no_grad():  # untrained weights barely fire; x4 gives layer 1 ~6-10 % spikes
        for layer in program.module.modules():
            if isinstance(layer, torch.nn.Conv2d | torch.nn.Linear):
                layer.weight.mul_(4.0)
    out = tmp_path_factory.mktemp("trt_prep")
    arts = {
        form: get_backend("onnxrt").compile(
            program,
            spec,
            {"form": form, "path": str(out / f"{form}.onnx"), "providers": "CPUExecutionProvider"},
        )
        for form in ("sequence", "step")
    }
    return {"spec": spec, "dir": out, "arts": arts}


def run_cpu(path: Path, feed: dict[str, Any]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feed)


def test_exported_spiking_graph_has_no_tensorrt_issues(exported: dict[str, Any]) -> None:
    for art in exported["arts"].values():
        assert tensorrt_issues(onnx.load(art.path)) == []


def test_unsupported_operator_is_named_with_its_node() -> None:
    model = tiny_graph(
        [
            helper.make_node("Unique", ["X"], ["U"], name="dedupe_tokens"),
            helper.make_node("Relu", ["X"], ["R"], name="ms_relu", domain="com.microsoft"),
        ],
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])],
        [
            helper.make_tensor_value_info("U", TensorProto.FLOAT, [None]),
            helper.make_tensor_value_info("R", TensorProto.FLOAT, [4]),
        ],
    )
    with pytest.raises(TensorRTUnsupported) as err:
        check_tensorrt_support(model, "tiny.onnx")
    text = str(err.value)
    assert "tiny.onnx" in text and "'dedupe_tokens' (Unique)" in text
    assert "'ms_relu' (Relu): domain 'com.microsoft'" in text


def test_opset_outside_the_parsers_range_is_reported() -> None:
    assert any("opset 8" in i for i in tensorrt_issues(matmul_add_with_opset(8)))
    assert tensorrt_issues(matmul_add_with_opset(17)) == []


def matmul_add_with_opset(opset: int) -> Any:
    model = matmul_add()
    model.opset_import[0].version = opset
    return model


def test_nonzero_quantization_zero_point_is_reported() -> None:
    model = tiny_graph(
        [helper.make_node("QuantizeLinear", ["X", "s", "z"], ["Q"], name="q_in")],
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("Q", TensorProto.INT8, [4])],
        [numpy_helper.from_array(np.float32(0.1), "s"), numpy_helper.from_array(np.int8(3), "z")],
    )
    assert any("'q_in'" in i and "zero point" in i for i in tensorrt_issues(model))


def test_int32_dequantization_is_reported() -> None:
    model = tiny_graph(
        [helper.make_node("DequantizeLinear", ["b", "s"], ["B"], name="bias_dq")],
        [],
        [helper.make_tensor_value_info("B", TensorProto.FLOAT, [4])],
        [
            numpy_helper.from_array(np.arange(4, dtype=np.int32), "b"),
            numpy_helper.from_array(np.float32(0.1), "s"),
        ],
    )
    assert any("'bias_dq'" in i and "int8/int4/fp8/fp4 only" in i for i in tensorrt_issues(model))


def test_profile_spans_batch_range_and_pins_unknown_symbols() -> None:
    model = tiny_graph(
        [helper.make_node("Relu", ["X"], ["Y"])],
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", "tokens", 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", "tokens", 4])],
    )
    feed = {"X": np.zeros((2, 5, 4), np.float32)}
    (prof,) = optimization_profile(model, feed)
    assert (prof.min, prof.opt, prof.max) == ((1, 5, 4), (2, 5, 4), (32, 5, 4))
    (wide,) = optimization_profile(model, feed, {"tokens": (1, 64), "batch": (1, 8)})
    assert (wide.min, wide.max) == ((1, 1, 4), (8, 64, 4))
    assert wide.admits((8, 64, 4)) and not wide.admits((9, 5, 4))
    with pytest.raises(ValueError, match="axis 2 is fixed at 4"):
        optimization_profile(model, {"X": np.zeros((2, 5, 3), np.float32)})


def test_profile_rejects_inverted_ranges() -> None:
    with pytest.raises(ValueError, match="min <= opt <= max"):
        InputProfile("x", (4,), (2,), (8,))


def test_static_budget_counts_weights_and_activations_at_max_shapes() -> None:
    model = matmul_add()
    profile = optimization_profile(model, {"X": np.zeros((3, 8), np.float32)})
    budget = static_budget(model, profile)
    assert budget.weight_bytes == (8 * 4 + 4) * 4
    # X [32, 8], Y [32, 4], Z [32, 4] float32 at the max batch of 32
    assert budget.activation_bytes == (32 * 8 + 32 * 4 + 32 * 4) * 4
    assert budget.unknown_tensors == () and budget.nodes == 2


def test_fp16_graph_keeps_float32_io_and_computes_in_half(
    exported: dict[str, Any], tmp_path: Path
) -> None:
    art = exported["arts"]["sequence"]
    feed = calibration_feeds(None, art.meta, [exported["spec"].example(1)])[0]
    path = prepare_precision(art.path, "fp16", tmp_path)
    model = onnx.load(str(path))
    assert {i.type.tensor_type.elem_type for i in (*model.graph.input, *model.graph.output)} == {
        TensorProto.FLOAT
    }
    assert {i.data_type for i in model.graph.initializer} - {TensorProto.INT64} == {
        TensorProto.FLOAT16
    }
    ref, half = run_cpu(Path(art.path), feed), run_cpu(path, feed)
    scale = max(float(np.abs(r).max()) for r in ref)
    errors = [float(np.abs(r - h).max()) for r, h in zip(ref, half)]
    assert max(errors) <= 2e-3 * max(scale, 1.0)
    assert max(errors) > 0.0, "identical to float32: the graph did not compute in float16"


def test_fp16_refuses_initializers_beyond_half_range() -> None:
    # clipping them to 65504 would change every output silently
    from neuroedge.errors import ExportRefused

    weight = np.full((8, 4), 1e6, dtype=np.float32)
    with pytest.raises(ExportRefused, match="initializer 'W' holds 32 finite value"):
        convert_to_fp16(matmul_add(weight))
    half = convert_to_fp16(matmul_add(np.full((8, 4), 65504.0, dtype=np.float32)))
    w = numpy_helper.to_array(next(i for i in half.graph.initializer if i.name == "W"))
    assert w.dtype == np.float16 and float(w.max()) == 65504.0
    assert "clipped" not in json.loads({p.key: p.value for p in half.metadata_props}[PRECISION_KEY])


def test_fp16_refuses_control_flow_subgraphs() -> None:
    branch = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["O"])],
        "b",
        [],
        [helper.make_tensor_value_info("O", TensorProto.FLOAT, [4])],
    )
    model = tiny_graph(
        [helper.make_node("If", ["C"], ["Y"], name="gate", then_branch=branch, else_branch=branch)],
        [
            helper.make_tensor_value_info("C", TensorProto.BOOL, []),
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [4]),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])],
    )
    with pytest.raises(TensorRTUnsupported, match="'gate' \\(If\\)"):
        convert_to_fp16(model)


def test_int8_graph_is_symmetric_qdq_on_every_weight(
    exported: dict[str, Any], tmp_path: Path
) -> None:
    art, spec = exported["arts"]["sequence"], exported["spec"]
    feeds = calibration_feeds(None, art.meta, [spec.example(s) for s in range(4)])
    model = onnx.load(str(prepare_precision(art.path, "int8", tmp_path, feeds)))
    produced_by = {o: n for n in model.graph.node for o in n.output}
    weighted = [n for n in model.graph.node if n.op_type in ("Conv", "Gemm")]
    assert len(weighted) == 3 * 8  # two convs and a dense layer, unrolled over T = 8
    for node in weighted:
        assert produced_by[node.input[1]].op_type == "DequantizeLinear", node.name
        assert produced_by[node.input[0]].op_type == "DequantizeLinear", node.name
    zeros = [i for i in model.graph.initializer if "zero_point" in i.name]
    assert zeros and all(
        i.data_type == TensorProto.INT8 and not numpy_helper.to_array(i).any() for i in zeros
    )
    assert tensorrt_issues(model) == []


def test_int8_graph_keeps_spikes_and_logits_close(exported: dict[str, Any], tmp_path: Path) -> None:
    art, spec = exported["arts"]["sequence"], exported["spec"]
    feeds = calibration_feeds(None, art.meta, [spec.example(s) for s in range(8)])
    path = prepare_precision(art.path, "int8", tmp_path, feeds)
    test_feed = calibration_feeds(None, art.meta, [spec.example(99)])[0]
    names = art.meta["outputs"]
    ref = dict(zip(names, run_cpu(Path(art.path), test_feed)))
    got = dict(zip(names, run_cpu(path, test_feed)))
    assert ref["spikes1"].mean() > 0.02, "too few spikes: the comparison would be vacuous"
    assert float((ref["spikes1"] == got["spikes1"]).mean()) >= 0.99
    assert float(np.abs(ref["logits"] - got["logits"]).max()) <= 0.05 * float(
        np.abs(ref["logits"]).max()
    )


def test_step_form_calibration_sees_the_state_move(exported: dict[str, Any]) -> None:
    art, spec = exported["arts"]["step"], exported["spec"]
    feeds = calibration_feeds(art.handle, art.meta, [spec.example(0), spec.example(1)])
    steps = spec.example(0)["x"].shape[0]
    assert len(feeds) == 2 * steps
    graph_inputs = {i.name: i for i in onnx.load(art.path).graph.input}
    for feed in feeds:
        assert set(feed) == set(graph_inputs)
        assert all(v.dtype == np.float32 for v in feed.values())
    assert not feeds[0]["v1"].any() and feeds[steps - 1]["v1"].any()


def test_unknown_variant_is_refused(exported: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fp32, fp16, int8"):
        prepare_precision(exported["arts"]["sequence"].path, "bf16", tmp_path)


def test_precision_bench_compares_every_output_of_both_reduced_graphs() -> None:
    from neuroedge.bench.precision import compare_precisions

    result = compare_precisions(
        MODEL, calibration=2, samples=2, config={"untrained": True}, repeats=3
    )
    assert result["weights"] == "untrained"
    assert set(result["latency_p50_ms"]) == {"fp32", "fp16", "int8"}
    assert all(v > 0 for v in result["latency_p50_ms"].values())
    fp32 = result["latency_p50_ms"]["fp32"]
    assert result["speedup_vs_fp32"]["int8"] == pytest.approx(
        fp32 / result["latency_p50_ms"]["int8"]
    )
    for variant in ("fp16", "int8"):
        rows = result["outputs"][variant]
        assert {"logits", "spikes1", "spikes2"} <= set(rows)
        assert rows["spikes1"]["metric"] == "spike_agreement"
        assert 0.9 <= rows["spikes1"]["value"] <= 1.0
        assert rows["logits"]["metric"] == "max_rel_err" and rows["logits"]["value"] < 0.2
    with pytest.raises(ValueError, match="must be >= 1"):
        compare_precisions(MODEL, calibration=0)
