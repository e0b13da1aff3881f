"""Reduced-precision ONNX graphs for edge CPUs: `neuroedge export --precision fp16|int8`, the
onnxrt backend's `precision` option, their initial state, and what they refuse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from neuroedge.cli import main  # noqa: E402
from neuroedge.registry import get_backend, get_model  # noqa: E402

NAME = "ttt.linear_attention"  # continuous outputs, a learned initial state, untrained weights


def _unread_qdq(graph) -> list[str]:
    """The Q/DQ nodes of ``graph`` whose output no node reads (a graph output is no reader
    here: no graph output may come out of a DequantizeLinear)."""
    read = {i for n in graph.node for i in n.input}
    qdq = ("QuantizeLinear", "DequantizeLinear")
    return [n.name for n in graph.node if n.op_type in qdq and n.output[0] not in read]


def _host(x: np.ndarray) -> np.ndarray:
    spec, host = get_model(NAME), get_backend("host")
    return host.run(host.compile(spec.build({}), spec), {"x": x})["y"]


@pytest.mark.parametrize(("precision", "bound"), [("fp16", 0.01), ("int8", 0.1)])
def test_exported_reduced_graph_runs_alone_at_any_t_close_to_the_host(
    tmp_path: Path, capsys, precision: str, bound: float
) -> None:
    out = tmp_path / f"ttt_{precision}.onnx"
    assert main(["export", NAME, "--precision", precision, "--out", str(out)]) == 0
    assert "state.npz" in capsys.readouterr().out
    with np.load(out.with_suffix(".state.npz")) as state:  # carried beside the new name
        assert state.files
    ort = get_backend("onnxrt")
    art = ort.load(out, get_model(NAME))
    assert art.meta["precision"] == precision and art.meta["form"] == "step"
    x = np.random.default_rng(1).standard_normal((7, 2, 32)).astype(np.float32)  # T=7: any T
    got, want = ort.run(art, {"x": x})["y"], _host(x)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    assert 0 < err <= bound, err  # reduced (not the fp32 graph), yet close


def test_onnxrt_precision_option_labels_rows_and_reports_parity() -> None:
    from neuroedge.api import deploy

    art, report = deploy(NAME, "onnxrt", options={"precision": "int8"})
    assert art.meta["precision"] == "int8" and report.variant == "int8"
    assert report.metrics["max_abs_err"].value > 0
    art, report = deploy(NAME, "onnxrt")
    assert art.meta["precision"] == "fp32" and report.variant == "default"


def test_unknown_precisions_are_refused_before_any_file_is_written(tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.onnx"
    assert main(["export", NAME, "--precision", "int4", "--out", str(out)]) == 2
    assert "precision 'int4': expected one of fp32, fp16, int8" in capsys.readouterr().err
    assert main(["export", NAME, "--target", "nir", "--precision", "int8"]) == 2
    assert "'nir' exports are fp32" in capsys.readouterr().err
    assert main(["run", NAME, "--backend", "onnxrt", "--option", "precision=int4"]) == 2
    assert "option precision='int4': expected one of fp32, fp16, int8" in capsys.readouterr().err
    assert not out.exists()


def test_float_range_keeps_float32_so_specprune_exports_in_fp16(tmp_path: Path, capsys) -> None:
    # vla.specprune's position tables are Range over a float length: Range has no float16
    # form, so it runs in float32 between Casts (it was refused before).
    import json

    import onnx

    name, config = "vla.specprune", {"smoke": True}
    out = tmp_path / "v.onnx"
    assert (
        main(["export", name, "--config", "smoke=true", "--precision", "fp16", "--out", str(out)])
        == 0
    )
    assert "Traceback" not in capsys.readouterr().err
    record = {p.key: p.value for p in onnx.load(str(out)).metadata_props}["neuroedge.precision"]
    assert json.loads(record)["float32_ops"] >= 1
    spec, host, ort = get_model(name), get_backend("host"), get_backend("onnxrt")
    art = ort.load(out, spec)
    assert art.meta["precision"] == "fp16"
    model = host.compile(spec.build(config), spec)
    agreements = []
    for seed in range(5):
        x = spec.example(seed)
        got, want = ort.run(art, x), host.run(model, x)
        kept = want["scores"] != 0
        agreements.append(float(np.mean(kept == (got["scores"] != 0))))
        both = kept & (got["scores"] != 0)
        scale = float(np.abs(want["scores"]).max())
        assert float(np.abs(got["scores"] - want["scores"])[both].max()) <= 5e-2 * scale
        if agreements[-1] == 1.0:  # the same tokens kept: the actions follow closely
            err = float(np.abs(got["actions"] - want["actions"]).max())
            assert 0 < err <= 1e-2 * float(np.abs(want["actions"]).max()), (seed, err)
    # a score near the pruning cut can flip in float16 (seed 0: 4 of 128 tokens)
    assert np.mean(agreements) >= 0.95 and agreements.count(1.0) >= 3, agreements


def test_default_reduced_export_path_keeps_the_fp32_graph(tmp_path, monkeypatch) -> None:
    from neuroedge.api import export

    monkeypatch.chdir(tmp_path)
    fp32 = export(NAME, "onnx")
    int8 = export(NAME, "onnx", precision="int8")
    assert fp32.name == "model.onnx" and int8.name == "model.int8.onnx" and fp32.is_file()


def test_precision_bench_command_reports_errors_without_a_traceback(capsys) -> None:
    from neuroedge.bench.precision import main as precision_main

    assert precision_main(["--repeats", "0"]) == 2
    assert "repeats (0) must be >= 1" in capsys.readouterr().err
    assert precision_main(["--model", "causal.cadre"]) == 2
    assert "causal.cadre has no ONNX export" in capsys.readouterr().err
    assert precision_main(["--model", NAME, "--config", "bogus=1"]) == 2
    assert "does not read the config key 'bogus'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def ttt_int8_graphs(tmp_path_factory) -> dict[str, Path]:
    """ttt's int8 graphs in both forms: the exported step graph and the onnxrt sequence one."""
    tmp = tmp_path_factory.mktemp("ttt_int8")
    step = tmp / "step.onnx"
    assert main(["export", NAME, "--precision", "int8", "--out", str(step)]) == 0
    spec = get_model(NAME)
    options = {"precision": "int8", "form": "sequence", "path": str(tmp / "seq.onnx")}
    seq = get_backend("onnxrt").compile(spec.build({}), spec, options)
    return {"step": step, "sequence": Path(seq.path)}


@pytest.mark.parametrize("form", ["step", "sequence"])
def test_int8_dequantizes_only_into_weighted_ops_and_never_the_state(ttt_int8_graphs, form):
    # The quantizer also gave a Q/DQ pair to the other readers of a quantized tensor and to a
    # graph output: ttt's new state S_out came out of a DequantizeLinear (rounded to int8 and
    # clipped at the calibrated max every step), and the sequence graph's state Adds read it.
    import onnx

    model = onnx.load(str(ttt_int8_graphs[form]))
    onnx.checker.check_model(model)
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    assert [o.name for o in graph.output] == ["y", "S_out"]  # names kept
    assert all(producer[o.name].op_type != "DequantizeLinear" for o in graph.output)
    assert _unread_qdq(graph) == []  # the bypassed pairs went
    dq = {n.output[0]: n for n in graph.node if n.op_type == "DequantizeLinear"}
    assert dq, "no Q/DQ left: not an int8 graph"
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in dq:
                assert node.op_type in ("Conv", "Gemm", "MatMul") and i < 2, (node.name, name)
                q = producer[dq[name].input[0]]
                assert q.input[0] not in ("S", "S_out"), (node.name, q.input[0])


def test_int8_step_graph_stays_close_to_the_host_far_past_calibration(ttt_int8_graphs) -> None:
    # Calibrated on 16 examples of the model's own length; the state grows with T (max 0.925
    # calibrated, 2.0 at T=256). Measured: 0.022 (0.209 with the state quantized).
    ort = get_backend("onnxrt")
    art = ort.load(ttt_int8_graphs["step"], get_model(NAME))
    x = np.random.default_rng(1).standard_normal((256, 2, 32)).astype(np.float32)
    got, want = ort.run(art, {"x": x})["y"], _host(x)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    assert 0 < err <= 0.05, err


def test_int8_of_a_graph_output_a_matmul_reads_twice_is_valid_and_close(tmp_path) -> None:
    # r is a graph output and both inputs of one MatMul: two dedicated Q/DQ pairs share r's
    # scale, and dropping the bypassed graph-output pair must leave the scale the other reads.
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from neuroedge.export.tensorrt import quantize_int8

    def info(name: str) -> object:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [4, 4])

    w = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32) * 0.3
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "r"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [info("x")], [info("r"), info("y")], [numpy_helper.from_array(w, "W")]
    )
    src, dst = tmp_path / "f32.onnx", tmp_path / "int8.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    feeds = [{"x": np.random.default_rng(s).standard_normal((4, 4), np.float32)} for s in range(9)]
    model = onnx.load(str(quantize_int8(src, dst, feeds[1:])))
    onnx.checker.check_model(model)
    assert [o.name for o in model.graph.output] == ["r", "y"] and _unread_qdq(model.graph) == []
    assert sum(n.op_type == "QuantizeLinear" for n in model.graph.node) >= 3  # int8 still
    run = [ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]) for p in (src, dst)]
    want, got = (s.run(None, feeds[0]) for s in run)
    for a, b in zip(want, got):
        err = float(np.abs(a - b).max() / np.abs(a).max())
        assert 0 < err <= 0.05, err


def test_int8_step_export_of_a_spiking_net_quantizes_every_conv_input(tmp_path) -> None:
    # bivision's states s_* are spikes (0/1, exact in int8) that also feed the next layer's
    # convs: only a state that is not binary (its membrane v_*, ttt's S) is kept float.
    import onnx

    out = tmp_path / "bi.onnx"
    config = ["--config", "smoke=true", "size=8"]
    assert (
        main(["export", "event.bivision", *config, "--precision", "int8", "--out", str(out)]) == 0
    )
    graph = onnx.load(str(out)).graph
    producer = {o: n for n in graph.node for o in n.output}
    convs = [n for n in graph.node if n.op_type == "Conv"]
    assert len(convs) >= 20 and any(n.input[0].startswith("s_") for n in convs)
    dq = {n.output[0] for n in graph.node if n.op_type == "DequantizeLinear"}
    assert [(n.name, n.input[i]) for n in convs for i in (0, 1) if n.input[i] not in dq] == []
    quantized = {n.input[0] for n in graph.node if n.op_type == "QuantizeLinear"}
    assert not {q for q in quantized if q.startswith(("v_", "h_"))}, quantized
    assert all(producer[o.name].op_type != "DequantizeLinear" for o in graph.output)
    assert _unread_qdq(graph) == []
