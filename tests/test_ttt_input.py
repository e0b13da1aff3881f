"""ttt.linear_attention bench and layer: the config is checked before any work, the step rows
run the config they are labelled with, and an oversized layer is refused before allocating."""

from __future__ import annotations

import importlib.util
import time

import pytest
import torch
from neuroedge.errors import ConfigError
from neuroedge.models.ttt.bench_checks import check_bench_config
from neuroedge.models.ttt.module import MAX_LAYER_PARAMETERS, TTTLayer
from neuroedge.models.ttt.throughput import BENCH_DEFAULTS, bench, bench_stream, step_program

SMALL = {"d_model": 16, "heads": 1, "head_dim": 8}


def test_the_step_program_follows_the_bench_config():
    program = step_program({**BENCH_DEFAULTS, **SMALL})
    assert program.module.layer.qkv.in_features == 16
    assert tuple(program.init_state(2)[0].shape) == (2, 1, 8, 8)
    assert {k: program.meta["config"][k] for k in SMALL} == SMALL


@pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime is not installed"
)
def test_the_exported_step_has_the_configured_width_and_state(tmp_path):
    import onnx

    cfg = {**BENCH_DEFAULTS, **SMALL, "stream_steps": 2, "repeats": 1}
    rows = bench_stream(cfg, tmp_path)
    assert [r.variant for r in rows] == ["step@T=2", "step@T=2"]
    graph = onnx.load(str(tmp_path / "step.onnx")).graph
    dims = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim][1:] for i in graph.input}
    assert dims == {"x": [16], "S": [1, 8, 8]}


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("lengths", [-3], r"lengths=\[-3\]: \[-3\] are not integers >= 1"),
        ("lengths", [0], r"lengths=\[0\]: \[0\] are not integers >= 1"),
        ("lengths", "abc", r"lengths='abc': expected a non-empty list"),
        ("lengths", 16, r"lengths=16: expected a non-empty list"),
        ("lengths", [], r"lengths=\[\]: expected a non-empty list"),
        ("lengths", [16, 2.5], r"\[2.5\] are not integers >= 1"),
        ("threads", 0, r"threads=0: expected an integer in 1..4096"),
        ("stream_steps", 0, r"stream_steps=0: expected an integer in 1..65536"),
        ("onnx_length", 0, r"onnx_length=0: expected an integer >= 1"),
        ("batch", 0, r"batch=0: expected an integer >= 1"),
        ("block", 0, r"block=0: expected an integer in 1..65536"),
        ("block", -1, r"block=-1: expected an integer in 1..65536"),
        ("repeats", 0, r"repeats=0: expected an integer in 1..10000"),
        ("heads", True, r"heads=True: expected an integer >= 1"),
        ("seed", -1, r"seed=-1: expected an integer in 0..4294967295"),
        ("variant", "v2", r"variant='v2'.*v6, la_momentum"),
        ("variant", "bogus", r"variant='bogus'"),
        ("head_dim", 100000, r"head_dim=100000 needs .*MAX_LAYER_PARAMETERS"),
        ("lengths", [10**6], r"lengths=1000000 with batch=\d+, heads=\d+: the parallel form .*"),
        ("onnx_length", 10**6, r"onnx_length=1000000 with heads=\d+: the parallel form"),
        # a batch too large named only lengths, and said "use shorter lengths or fewer heads"
        ("batch", 10**12, r"batch=1000000000000, heads=\d+: .*a smaller batch, or fewer heads"),
        # no upper bound: a 46 TiB stream input, an overflow in torch, a run without end
        ("stream_steps", 99999999999, r"stream_steps=99999999999: .* in 1..65536 \(tokens"),
        ("threads", 3000000000, r"threads=3000000000: .* in 1..4096 \(torch takes"),
        ("repeats", 99999999999, r"repeats=99999999999: .* in 1..10000"),
        ("block", 99999999999, r"block=99999999999: .* in 1..65536"),
        ("seed", 2**32, r"seed=4294967296: .* in 0..4294967295"),
        ("d_model", 99999999999, r"d_model=99999999999: .* in 1..4096 \(MAX_D_MODEL"),
    ],
)
def test_bad_bench_config_values_name_key_value_and_expectation(key, value, expected):
    with pytest.raises(ConfigError, match=expected):
        check_bench_config({**BENCH_DEFAULTS, key: value})


def test_the_defaults_pass_the_check():
    check_bench_config(BENCH_DEFAULTS)


def test_bench_refuses_before_any_work(tmp_path):
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="lengths"):
        bench(tmp_path / "out", ("host", "onnxrt"), {"lengths": []}, progress=False)
    assert time.perf_counter() - start < 5
    assert not (tmp_path / "out").exists()  # no export, no report


@pytest.mark.parametrize(("key", "value"), [("onnx_length", 7), ("stream_steps", 4)])
def test_an_onnxrt_only_key_without_onnxrt_is_refused_before_any_work(key, value, tmp_path, capsys):
    """--backend host --config onnx_length=7 exited 0 with onnx_length in the report, unread."""
    from neuroedge.cli import main

    out = tmp_path / "out"
    args = ["bench", "ttt.linear_attention", "--backend", "host", "--out", str(out)]
    start = time.perf_counter()
    assert main([*args, "--config", "lengths=[16]", "repeats=1", f"{key}={value}"]) == 2
    assert time.perf_counter() - start < 5 and not out.exists()
    err = capsys.readouterr().err
    assert f"config {key}={value} (" in err and "read only with the onnxrt backend" in err
    assert "backends (host): add --backend host,onnxrt" in err and "Traceback" not in err
    from neuroedge.config_values import check_backend_keys
    from neuroedge.models.ttt.bench_checks import ONNXRT_KEYS

    check_backend_keys({"lengths": [16]}, ("host",), "onnxrt", ONNXRT_KEYS)  # host keys: fine


def _onnxrt_probe(monkeypatch, ok: bool) -> None:
    """The onnxrt backend's probe answering ``ok`` (with a reason when not), whatever is
    installed here."""
    from neuroedge.registry import get_backend
    from neuroedge.types import Availability

    answer = Availability(ok, "" if ok else "stubbed: onnxruntime is not installed")
    monkeypatch.setattr(type(get_backend("onnxrt")), "probe", lambda self: answer)


@pytest.mark.parametrize("named", [["--backend", "host,onnxrt"], []])  # [] the CLI's default
@pytest.mark.parametrize(("key", "value"), [("onnx_length", 7), ("stream_steps", 4)])
def test_an_onnxrt_key_with_onnxrt_unavailable_is_refused(
    key, value, named, tmp_path, capsys, monkeypatch
):
    """onnxrt asked for but its probe failing: the onnxrt rows were skipped and onnx_length /
    stream_steps accepted, written into the report, unread."""
    from neuroedge.cli import main

    _onnxrt_probe(monkeypatch, ok=False)
    out = tmp_path / "out"
    args = ["bench", "ttt.linear_attention", *named, "--out", str(out), "--config"]
    assert main([*args, "lengths=[16]", "repeats=1", f"{key}={value}"]) == 2
    err = capsys.readouterr().err
    assert f"config {key}={value} (" in err and "read only with the onnxrt backend" in err
    assert "not available here (stubbed: onnxruntime is not installed)" in err
    assert f"leave {key} out" in err and "Traceback" not in err and not out.exists()


def test_an_onnxrt_key_is_accepted_when_onnxrt_runs(monkeypatch):
    from neuroedge.config_values import check_backend_keys
    from neuroedge.models.ttt.bench_checks import ONNXRT_KEYS

    _onnxrt_probe(monkeypatch, ok=True)
    both = ("host", "onnxrt")
    check_backend_keys({"onnx_length": 7, "stream_steps": 4}, both, "onnxrt", ONNXRT_KEYS)
    _onnxrt_probe(monkeypatch, ok=False)
    check_backend_keys({"lengths": [16]}, both, "onnxrt", ONNXRT_KEYS)  # default: skipped rows


def test_an_oversized_layer_is_refused_before_allocating():
    with pytest.raises(ValueError, match="head_dim=100000 needs") as err:
        TTTLayer(32, 2, 100000)
    assert not isinstance(err.value, RuntimeError)
    assert MAX_LAYER_PARAMETERS == 2**28


def test_the_chunked_form_runs_the_configured_block():
    from neuroedge.models.ttt import forms

    calls = []
    original = forms.ttt_chunked

    def spy(*args, **kwargs):
        calls.append(args[5] if len(args) > 5 else kwargs.get("block"))
        return original(*args, **kwargs)

    layer = TTTLayer(16, 1, 8, block=8).eval()
    with pytest.MonkeyPatch.context() as mp, torch.inference_mode():
        mp.setattr("neuroedge.models.ttt.module.ttt_chunked", spy)
        x = torch.randn(1, 20, 16)
        diff = (layer(x, "chunked") - layer(x, "recurrent")).abs().max()
    assert calls == [8] and float(diff) < 1e-4


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("steps", 2.5, "steps=2.5: expected an integer in 1..1000000"),  # ran 2 steps
        ("steps", 0, "steps=0"),  # wrote an untrained ladder
        ("seed", 1.5, "seed=1.5"),
        ("seed", 10**9, "seed=1000000000"),  # would reach the evaluation seeds
        ("lr", 0, "lr=0"),
        ("order", "both", "order='both'"),
        ("inner_steps", [1, 0], "inner_steps"),
        ("d_model", True, "d_model=True"),
        # no upper bound: allocation errors of terabytes, an overflow in torch
        ("batch", 99999999999, r"batch=99999999999: .* in 1..8192 \(sequences per step"),
        ("chunk", 99999999999, r"chunk=99999999999: .* in 1..24 \(at most the sequence"),
        ("keys", 99999999999, r"keys=99999999999: .* in 1..8192"),
        ("values", 99999999999, r"values=99999999999: .* in 1..8192"),
        ("d_model", 99999999999, r"d_model=99999999999: .* in 1..4096"),
        ("threads", 3000000000, r"threads=3000000000: .* in 1..4096"),
        ("steps", 99999999999, r"steps=99999999999: .* in 1..1000000"),
        ("head_dim", 100000, r"head_dim=100000 needs .*MAX_LAYER_PARAMETERS"),
    ],
)
def test_the_ladder_refuses_bad_values_before_training(tmp_path, monkeypatch, key, value, expected):
    from neuroedge.errors import ConfigError
    from neuroedge.models.ttt import train

    def train_one(*args, **kwargs):
        pytest.fail("a model trained: the bad value was not refused first")

    monkeypatch.setattr(train, "train_one", train_one)
    with pytest.raises(ConfigError, match=expected):
        train.ladder({key: value}, tmp_path, progress=False)
    assert not list(tmp_path.iterdir())


def test_the_step_program_refuses_a_fractional_seed():
    import neuroedge as ne
    from neuroedge.errors import ConfigError

    with pytest.raises(ConfigError, match="seed=1.5"):  # ran as seed 1
        ne.model("ttt.linear_attention").build({"seed": 1.5})


def test_run_refuses_a_huge_width_before_the_example_is_allocated(capsys):
    from neuroedge.cli import main

    args = ["run", "ttt.linear_attention", "--repeats", "1", "--config", "d_model=99999999999"]
    assert main(args) == 2  # was numpy's _ArrayMemoryError (23.3 TiB), a traceback
    assert "d_model=99999999999: expected an integer in 1..4096" in capsys.readouterr().err
