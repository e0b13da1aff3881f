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
