"""bench/gpu_check: verdicts, tables and missing-package reports (CPU), the full run (GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from neuroedge.bench.gpu_check import ROUTES, main, route_blockers, tables, verdict
from neuroedge.registry import get_model
from neuroedge.types import Measurement, Report

ROOT = Path(__file__).resolve().parents[1]
MODEL = "snn.lif_convnet"


def row(
    route: str, err: float, agree: float = 1.0, p50: float | None = None, **kw: object
) -> Report:
    metrics = {
        "max_abs_err": Measurement(err, "abs"),
        "spike_agreement": Measurement(agree, "fraction"),
    }
    if p50 is not None:
        metrics.update(
            {
                f"latency_{q}_ms": Measurement(p50 * f, "ms")
                for q, f in (("p50", 1.0), ("p90", 1.5), ("p99", 2.0))
            }
        )
    return Report(MODEL, route, metrics=metrics, **kw)


def test_fp32_routes_must_meet_tolerance_and_agree_on_every_spike() -> None:
    spec = get_model(MODEL)
    tol = spec.tolerance_for("tensorrt-fp32")
    assert verdict(spec, row("tensorrt-fp32", tol / 2)) == "PASS"
    assert verdict(spec, row("tensorrt-fp32", tol * 2)) == "FAIL"
    assert verdict(spec, row("onnxrt-cuda", 0.0, agree=0.999)) == "FAIL"
    assert verdict(spec, row("tensorrt-int8", 0.3, agree=0.9)) == "report"
    assert verdict(spec, row("host-cuda", 0.0, fallbacks=("ran on CPU",))) == "FAIL"
    assert verdict(spec, Report(MODEL, "onnxrt-cuda", rejections=("error: boom",))) == "FAIL"


def test_missing_packages_block_only_their_routes() -> None:
    blocked = route_blockers(
        [
            ("torch (CUDA)", True, "ok"),
            ("onnx", True, "ok"),
            ("onnxruntime-gpu", False, "install onnxruntime-gpu==1.31.1"),
            ("tensorrt", False, "the tensorrt package is not installed"),
        ]
    )
    assert set(blocked) == set(ROUTES) - {"host-cuda"}
    assert "onnxruntime-gpu==1.31.1" in blocked["onnxrt-cuda"]
    assert "tensorrt package is not installed" in blocked["tensorrt-int8"]


def test_tables_show_percentiles_and_speedup_over_host_cuda() -> None:
    spec = get_model(MODEL)
    rows = [
        row("host-cuda", 0.0, p50=2.0),
        row("tensorrt-fp16", 1e-3, p50=0.5),
        Report(MODEL, "tensorrt-int8", rejections=("not run: time budget spent",)),
    ]
    parity, latency = tables({MODEL: (spec, rows)})
    assert "p50_ms" in latency and "p90_ms" in latency and "p99_ms" in latency
    fp16 = next(line for line in latency.splitlines() if "tensorrt-fp16" in line).split()
    assert fp16[2:5] == ["0.5", "0.75", "1"] and fp16[-1] == "4.00x"
    int8 = next(line for line in parity.splitlines() if "tensorrt-int8" in line).split()
    assert int8[-1] == "NOT-RUN"  # never a blank: the check does not pass on it


def test_script_names_missing_packages_and_fails(tmp_path: Path) -> None:
    from neuroedge.backends.tensorrt import tensorrt_availability

    if tensorrt_availability().ok:
        pytest.skip("every package is present here; the GPU test covers this machine")
    env = {**os.environ, "PYTHON": sys.executable}
    out = subprocess.run(
        [
            "bash",
            str(ROOT / "bench" / "gpu_check.sh"),
            "--models",
            MODEL,
            "--repeats",
            "2",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert out.returncode == 1, out.stderr[-2000:]
    assert "tensorrt         MISSING" in out.stdout
    assert f"{MODEL} tensorrt-fp32: not run: tensorrt:" in out.stdout
    assert "latency per call" in out.stdout and (tmp_path / MODEL / "report.json").is_file()


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_gpu_check_passes_on_a_gpu_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--models", MODEL, "--repeats", "20", "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert text.count("PASS") == 3 and "FAIL" not in text


def test_tensorrt_routes_need_onnxruntime_of_either_build() -> None:
    blocked = route_blockers(
        [
            ("torch (CUDA)", True, "ok"),
            ("onnx", True, "installed"),
            ("onnxruntime", False, "missing: pip install onnxruntime-gpu==1.31.1"),
            ("onnxruntime-gpu", False, "missing: pip install onnxruntime-gpu==1.31.1"),
            ("tensorrt", True, "TensorRT 11.4.0.106"),
        ]
    )
    assert set(blocked) == set(ROUTES) - {"host-cuda"}  # TensorRT exports through onnxruntime
    assert blocked["tensorrt-fp32"] == "onnxruntime: missing: pip install onnxruntime-gpu==1.31.1"


def test_package_table_names_what_the_checked_models_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from neuroedge.bench.gpu_check import package_table

    find_spec = importlib.util.find_spec
    absent = {"sklearn", "scipy", "numba"}  # digits of lif_convnet/unisparse; bivision's events
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in absent else find_spec(name)
    )
    rows = {name: (ok, detail) for name, ok, detail in package_table()}
    assert rows["scikit-learn"] == (False, "missing: pip install scikit-learn")
    assert rows["scipy"] == (False, "missing: pip install scipy")
    assert rows["numba"] == (False, "missing: pip install numba")
    assert rows["onnxruntime"] == (True, "installed")


def test_wrapper_refuses_to_start_without_a_package_a_model_imports(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "sklearn"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    path = os.pathsep.join(p for p in (str(shadow.parent), os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), "--models", MODEL, "--routes", "host-cuda"]
        + ["--repeats", "2", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable, "PYTHONPATH": path},
        timeout=300,
        check=False,
    )
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert "Python package 'scikit-learn' is missing" in out.stderr
    assert "pip install scikit-learn" in out.stderr


def test_runs_under_python_oo_without_docstrings() -> None:
    out = subprocess.run(
        [sys.executable, "-OO", "-m", "neuroedge.bench.gpu_check", "--routes", "nowhere"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2 and "unknown routes ['nowhere']" in out.stderr, out.stderr


def test_silent_spike_outputs_are_named_in_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from neuroedge.bench import gpu_check, gpu_tables
    from neuroedge.registry import get_backend

    spec = get_model(MODEL)
    program = spec.build({"smoke": True})  # untrained: no neuron reaches its threshold
    example = spec.built_example(0, program, {**spec.default_config, "smoke": True})
    host = get_backend("host")
    reference = host.run(host.compile(program, spec), example)
    cpu = lambda route, spec, program: (gpu_check.host_cuda_runner(program, "cpu"), None)
    monkeypatch.setattr(gpu_check, "compile_route", cpu)
    row, _ = gpu_check._check_route(spec, "host-cuda", program, reference, example)
    assert row.metrics["spike_agreement"].value == 1.0
    assert row.notes == ("no spike on either side in spikes1, spikes2: agreement vacuous",)
    # main() prints each row's notes under the tables (the CPU standing in for CUDA)
    monkeypatch.setattr(gpu_tables, "_torch_cuda", lambda: (True, "faked: the CPU stands in"))
    argv = ["--models", MODEL, "--routes", "host-cuda", "--repeats", "2", "--out", str(tmp_path)]
    code = gpu_check.main(argv)
    text = capsys.readouterr().out
    assert f"{MODEL} host-cuda: {row.notes[0]}" in text.splitlines() and code == 0, text
