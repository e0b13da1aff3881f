"""The TTT layer module, its streaming step, ONNX exports, MQAR data and the bench hook."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from neuroedge.errors import ExportRefused
from neuroedge.models.ttt.data import IGNORE, MQARTask, mqar_batch
from neuroedge.models.ttt.module import TTTLayer, TTTStreamingStep, chunk_means
from neuroedge.registry import get_backend, get_model


def layer(variant: str, chunk: int = 1, order: str = "update_then_apply", seed: int = 0):
    torch.manual_seed(seed)
    return TTTLayer(16, 2, 8, variant, chunk, order).eval()


@pytest.mark.parametrize(
    "variant,chunk,order",
    [
        ("v2", 8, "apply_then_update"),
        ("v3", 8, "update_then_apply"),
        ("la_momentum", 4, "apply_then_update"),
        ("v6", 1, "update_then_apply"),
    ],
)
def test_layer_forms_agree_and_gradients_flow(variant, chunk, order):
    net = layer(variant, chunk, order)
    x = torch.randn(2, 35, 16, requires_grad=True)
    ref = net(x, "recurrent")
    forms = [f for f in ("parallel", "chunked") if f in net.variant.forms]
    for form in forms:
        assert (net(x, form) - ref).abs().max() < 1e-5
    net(x, forms[-1]).square().sum().backward()
    assert net.w1.grad is not None and net.w1.grad.abs().sum() > 0


def test_baseline_layer_updates_kernel_weights_and_trains():
    net = layer("baseline", 4, "apply_then_update")
    x = torch.randn(2, 12, 16)
    net(x).sum().backward()
    assert net.w0.grad.abs().sum() > 0 and net.w2.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="only the recurrent form"):
        net(x, "chunked")


def test_more_inner_steps_change_the_output():
    net = layer("baseline", 4, "apply_then_update")
    x = torch.randn(1, 16, 16)
    with torch.no_grad():
        assert (net(x, "recurrent", 4) - net(x, "recurrent", 1)).abs().max() > 1e-3


@pytest.mark.parametrize("variant", ["v6", "la_momentum"])
def test_streaming_step_matches_the_parallel_layer(variant):
    net = layer(variant)
    step = TTTStreamingStep(net)
    x = torch.randn(2, 20, 16)
    state = step.init_state(2)
    assert state[0].abs().sum() > 0  # S_0 is the learned W1_0, not zeros
    ys = []
    with torch.no_grad():
        for t in range(20):
            y, *state = step(x[:, t], *state)
            ys.append(y)
        ref = net(x, "chunked")
    assert (torch.stack(ys, 1) - ref).abs().max() < 1e-5


def test_streaming_step_refuses_chunked_or_muon_layers():
    with pytest.raises(ValueError, match="token-level"):
        TTTStreamingStep(layer("v6", chunk=4))
    with pytest.raises(ValueError, match="only the recurrent form"):
        TTTStreamingStep(layer("v1"))


def test_chunk_means_handle_a_short_last_chunk():
    x = torch.arange(10.0).view(1, 5, 2)
    means = chunk_means(x, 2)
    assert means.shape == (1, 3, 2)
    assert torch.equal(means[0, 2], x[0, 4])


def test_mqar_targets_are_the_bound_values():
    task = MQARTask(pairs=6, keys=10, values=7)
    tokens, targets = mqar_batch(task, 4, seed=3)
    assert tokens.shape == targets.shape == (4, 18)
    for seq, tgt in zip(tokens, targets):
        bound = dict(zip(seq[0:12:2], seq[1:12:2]))
        assert len(bound) == 6 and all(v >= 10 for v in bound.values())
        assert all(tgt[12 + i] == bound[k] for i, k in enumerate(seq[12:]))
        assert (tgt[:12] == IGNORE).all()
    with pytest.raises(ValueError, match="pairs"):
        MQARTask(pairs=8, keys=4)


def test_registered_spec_runs_on_host_with_nonzero_state():
    spec = get_model("ttt.linear_attention")
    host = get_backend("host")
    out = host.run(host.compile(spec.build({"smoke": True}), spec), spec.example(0))
    assert out["y"].shape == (16, 2, 32) and np.abs(out["S_final"]).sum() > 0


@pytest.mark.parametrize("variant", ["v6", "la_momentum"])
def test_onnx_streaming_step_matches_host_over_many_steps(require, tmp_path, variant):
    require("onnxrt")
    spec = get_model("ttt.linear_attention")
    program = spec.build({**spec.default_config, "variant": variant})
    host, ort = get_backend("host"), get_backend("onnxrt")
    x = np.random.default_rng(1).standard_normal((96, 3, 32)).astype(np.float32)
    ref = host.run(host.compile(program, spec), {"x": x})
    art = ort.compile(program, spec, {"form": "step", "path": str(tmp_path / "step.onnx")})
    got = ort.run(art, {"x": x})
    assert set(ref) == set(got)
    for name in ref:
        assert np.abs(ref[name] - got[name]).max() < 1e-4, name


def test_onnx_parallel_form_has_a_dynamic_length(require, tmp_path):
    require("onnxrt")
    from neuroedge.models.ttt.export import export_parallel_onnx, onnx_session

    net = layer("v6")
    session = onnx_session(export_parallel_onnx(net, tmp_path / "p.onnx", tokens=32))
    for tokens in (7, 100):
        x = torch.randn(2, tokens, 16)
        with torch.no_grad():
            ref = net(x, "recurrent").numpy()
        assert np.abs(session.run(["y"], {"x": x.numpy()})[0] - ref).max() < 1e-5
    with pytest.raises(ExportRefused, match="Muon"):
        export_parallel_onnx(layer("v5"), tmp_path / "bad.onnx")


def test_bench_hook_writes_rows_ratios_and_plot(tmp_path):
    spec = get_model("ttt.linear_attention")
    doc = spec.hook("bench")(
        out_dir=tmp_path, backends=["host"], history=None, config={"lengths": [2048], "repeats": 2}
    )
    rows = {r["variant"]: r["metrics"] for r in doc["rows"]}
    assert set(rows) == {"recurrent@L=2048", "parallel@L=2048", "chunked@L=2048"}
    best = max(rows[f"{f}@L=2048"]["throughput_per_s"]["value"] for f in ("parallel", "chunked"))
    assert best >= 5 * rows["recurrent@L=2048"]["throughput_per_s"]["value"]
    assert rows["chunked@L=2048"]["max_abs_err"]["value"] < 1e-4
    assert doc["roofline_gflops"] > 0
    assert json.loads((tmp_path / "report.json").read_text())["model"] == spec.name
    assert (tmp_path / "scaling.png").stat().st_size > 1000


def test_layer_names_the_expected_input_width():
    with pytest.raises(ValueError, match=r"\(batch, tokens, 16\), got \[2, 5, 12\]"):
        layer("v6")(torch.randn(2, 5, 12))


def test_bench_hook_onnxrt_rows_stream_and_parallel(tmp_path):
    spec = get_model("ttt.linear_attention")
    doc = spec.hook("bench")(
        out_dir=tmp_path,
        backends=["host", "onnxrt"],
        history=None,
        config={"lengths": [256], "repeats": 1, "stream_steps": 8, "onnx_length": 256},
    )
    rows = {(r["variant"], r["backend"]): r["metrics"] for r in doc["rows"]}
    assert rows[("step@T=8", "onnxrt")]["max_abs_err"]["value"] < 1e-4
    assert ("parallel@L=256", "onnxrt") in rows


@pytest.mark.parametrize(
    "key,value",
    [("d_model", 0), ("heads", -2), ("head_dim", None), ("d_model", 32.5), ("heads", True)],
)
def test_bad_layer_sizes_are_refused_naming_the_key(key: str, value: object) -> None:
    from neuroedge.registry import get_model

    with pytest.raises(ValueError, match=rf"{key}={value!r}: expected an integer (>= 1|in 1\.\.)"):
        get_model("ttt.linear_attention").build({key: value})  # ConfigError, a ValueError
