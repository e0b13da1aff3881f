"""The GPU check's verdicts and its terminal tables: parity per route and latency per call.

An fp32 route must meet the model's tolerance and agree on every spike; fp16/int8 routes are
reported, judged only where the model sets a ``tensorrt-fp16``/``tensorrt-int8`` tolerance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from neuroedge.types import ModelSpec, Report

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
