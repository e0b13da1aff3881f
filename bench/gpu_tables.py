"""The GPU check's package table, verdicts and terminal tables: parity per route and latency
per call.

A route runs only when its packages are present (``route_blockers``; the TensorRT routes need
onnxruntime of either build too: they export and calibrate through a CPU session). An fp32
route must meet the model's tolerance and agree on every spike; fp16/int8 routes are reported,
judged only where the model sets a ``tensorrt-fp16``/``tensorrt-int8`` tolerance.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence

from neuroedge.types import ModelSpec, Report

ROUTES = ("host-cuda", "onnxrt-cuda", "tensorrt-fp32", "tensorrt-fp16", "tensorrt-int8")
FP32_ROUTES = ("host-cuda", "onnxrt-cuda", "tensorrt-fp32")


def verdict(spec: ModelSpec, row: Report) -> str:
    """PASS/FAIL against the model's tolerance; 'report' for unjudged reduced precision;
    NOT-RUN for a route that never ran (a missing package, the time budget spent): the check
    does not pass on it (``gpu_check.main``)."""
    if row.rejections or row.fallbacks:
        return "FAIL" if row.fallbacks or row.rejections[0].startswith("error") else "NOT-RUN"
    if row.backend not in FP32_ROUTES and row.backend not in spec.tolerance:
        return "report"
    ok = row.metrics["max_abs_err"].value <= spec.tolerance_for(row.backend)
    if row.backend in FP32_ROUTES and "spike_agreement" in row.metrics:
        ok = ok and row.metrics["spike_agreement"].value == 1.0
    return "PASS" if ok else "FAIL"


def _cell(row: Report, metric: str, fmt: str = "{:.4g}") -> str:
    m = row.metrics.get(metric)
    return "-" if m is None else fmt.format(m.value)


def tables(results: Mapping[str, tuple[ModelSpec, list[Report]]]) -> tuple[str, str]:
    """The parity table and the latency table, aligned for a terminal."""
    parity = [("model", "route", "max_abs_err", "spike_agreement", "tolerance", "verdict")]
    latency = [
        (
            "model",
            "route",
            "p50_ms",
            "p90_ms",
            "p99_ms",
            "throughput/s",
            "gpu_compute_p50_ms",
            "speedup_vs_host_cuda",
        )
    ]
    for name, (spec, rows) in results.items():
        base = next(
            (
                r.metrics["latency_p50_ms"].value
                for r in rows
                if r.backend == "host-cuda" and "latency_p50_ms" in r.metrics
            ),
            None,
        )
        for row in rows:
            tol = (
                f"{spec.tolerance_for(row.backend):.0e}"
                if row.backend in FP32_ROUTES or row.backend in spec.tolerance
                else "-"
            )
            parity.append(
                (
                    name,
                    row.backend,
                    _cell(row, "max_abs_err", "{:.3g}"),
                    _cell(row, "spike_agreement", "{:.4f}"),
                    tol,
                    verdict(spec, row),
                )
            )
            p50 = row.metrics.get("latency_p50_ms")
            speed = f"{base / p50.value:.2f}x" if base and p50 else "-"
            latency.append(
                (
                    name,
                    row.backend,
                    _cell(row, "latency_p50_ms"),
                    _cell(row, "latency_p90_ms"),
                    _cell(row, "latency_p99_ms"),
                    _cell(row, "throughput_per_s", "{:.0f}"),
                    _cell(row, "gpu_compute_p50_ms"),
                    speed,
                )
            )
    return align(parity), align(latency)


def align(lines: Sequence[Sequence[str]]) -> str:
    """``lines`` as left-aligned columns two spaces apart, trailing blanks stripped."""
    widths = [max(len(str(c)) for c in col) for col in zip(*lines)]
    return "\n".join(
        "  ".join(f"{c:<{w}}" for c, w in zip(line, widths)).rstrip() for line in lines
    )


# (pip name, module, install): what the routes and the checked models import (scikit-learn and
# scipy: the digits of snn.lif_convnet/unisparse; numba: event.bivision's events); onnxruntime
# of either build: the TensorRT routes export and calibrate through a CPU session
PACKAGES = (
    ("numpy", "numpy", "numpy"),
    ("onnx", "onnx", "onnx"),
    ("onnxruntime", "onnxruntime", "onnxruntime-gpu==1.31.1"),
    ("tqdm", "tqdm", "tqdm"),
    ("matplotlib", "matplotlib", "matplotlib"),
    ("scikit-learn", "sklearn", "scikit-learn"),
    ("scipy", "scipy", "scipy"),
    ("numba", "numba", "numba"),
)


def package_table() -> list[tuple[str, bool, str]]:
    """``(package, ok, detail)`` for each Python package a route or a checked model needs."""
    rows = []
    for name, module, install in PACKAGES:
        ok = importlib.util.find_spec(module) is not None
        rows.append((name, ok, "installed" if ok else f"missing: pip install {install}"))
    rows.append(("torch (CUDA)", *_torch_cuda()))
    rows.append(("onnxruntime-gpu", *_ort_cuda()))
    from neuroedge.backends.tensorrt import tensorrt_availability

    availability = tensorrt_availability()
    rows.append(("tensorrt", availability.ok, availability.reason))
    return rows


def _torch_cuda() -> tuple[bool, str]:
    if importlib.util.find_spec("torch") is None:
        return False, "missing: install a CUDA build of torch==2.13.0"
    import torch

    if not torch.cuda.is_available():
        return False, (
            f"torch {torch.__version__} sees no CUDA device: install a CUDA build "
            "of torch==2.13.0 (and check nvidia-smi)"
        )
    return True, (
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}"
    )


def _ort_cuda() -> tuple[bool, str]:
    if importlib.util.find_spec("onnxruntime") is None:
        return False, "missing: pip install onnxruntime-gpu==1.31.1"
    import onnxruntime as ort

    providers = ort.get_available_providers()
    if "CUDAExecutionProvider" not in providers:
        return False, (
            f"onnxruntime {ort.__version__} offers only {', '.join(providers)}: "
            "replace it with onnxruntime-gpu==1.31.1 (pip uninstall onnxruntime)"
        )
    return True, f"onnxruntime {ort.__version__}: {', '.join(providers)}"


def route_blockers(packages: Sequence[tuple[str, bool, str]]) -> dict[str, str]:
    """``{route: reason}`` for routes a missing package blocks."""
    missing = {name: detail for name, ok, detail in packages if not ok}
    needs = {"host-cuda": ("torch (CUDA)",), "onnxrt-cuda": ("onnxruntime-gpu", "onnx")}
    needs.update({r: ("tensorrt", "onnx", "onnxruntime") for r in ROUTES if "tensorrt" in r})
    return {
        route: "; ".join(f"{p}: {missing[p]}" for p in pkgs if p in missing)
        for route, pkgs in needs.items()
        if any(p in missing for p in pkgs)
    }
