"""event.bivision's deployment rows keep a backend's variants apart (tensorrt's fp32 / fp16 /
int8) and the summary pairs each row with its own speedup over host."""

from __future__ import annotations

import neuroedge.bench.runner as runner
from neuroedge.models.bivision import deployment as dep
from neuroedge.types import Measurement, Report


def _row(backend: str, variant: str, p50: float) -> Report:
    metrics = {
        "latency_p50_ms": Measurement(p50, "ms"),
        "accuracy": Measurement(0.9, "fraction"),
        "max_abs_err": Measurement(0.0, "abs"),
    }
    return Report("event.bivision", backend, variant, metrics=metrics)


def test_each_variant_keeps_its_label_and_its_own_speedup(tmp_path, monkeypatch):
    def fake_bench_model(spec, backends, **kw):
        assert backends == ["host", "tensorrt"]
        return [
            _row("host", "default", 10.0),
            *(_row("tensorrt", v, p) for v, p in (("fp32", 5.0), ("fp16", 2.5), ("int8", 1.0))),
        ]

    monkeypatch.setattr(runner, "bench_model", fake_bench_model)
    path = dep.net_path(tmp_path, 0, dep.VARIANT)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x")  # never loaded: bench_model is stubbed
    rows, line = dep.deployment_rows(tmp_path, 0, ["host", "tensorrt"])
    assert [(r.backend, r.variant) for r in rows] == [
        ("host", "statnf_e2s@deploy"),
        ("tensorrt", "statnf_e2s@deploy/fp32"),
        ("tensorrt", "statnf_e2s@deploy/fp16"),
        ("tensorrt", "statnf_e2s@deploy/int8"),
    ]
    for name, ratio, p50 in (("fp32", 2, 5), ("fp16", 4, 2.5), ("int8", 10, 1)):
        assert f"tensorrt {name} {ratio:.2f}x faster than host ({p50:.3g} vs 10 ms" in line
