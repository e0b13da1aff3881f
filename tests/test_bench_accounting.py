"""What a report counts and keeps: MACs of Linear subclasses and attention, counts when host is
not benched, a reused report folder, the process's memory peak, TTT FLOPs per batch, null's
parity, an empty history path and the seed mean's device and fallbacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from neuroedge.errors import ArtifactError
from neuroedge.types import Measurement, Report


def test_attention_and_linear_subclasses_are_counted() -> None:
    """Only exact ``Linear`` types were hooked: MultiheadAttention's out_proj (a subclass) and
    its functional in-projection were missed, half the ViT block's MACs."""
    import torch
    from neuroedge.bench.sops import OpCounter
    from neuroedge.models.specprune.module import ViTBlock

    class LoraLinear(torch.nn.Linear):
        pass

    block, lora = ViTBlock(64, 4).eval(), LoraLinear(64, 32)
    x = torch.randn(2, 16, 64)
    with torch.no_grad(), OpCounter(torch.nn.ModuleList([block, lora])) as counter:
        block(x)
        lora(x)
    layers = counter.totals(2).per_layer
    per = {k: v.macs for k, v in layers.items()}
    # attention is counted dense on both counts (its functional projections are not hooked)
    assert layers["0.attn"].effective_macs == per["0.attn"] > 0
    assert layers["1"].effective_macs == per["1"]  # a randn input has no zeros
    length, dim = 16, 64
    attention = 4 * length * dim * dim + 2 * length * length * dim  # q, k, v, out; qk^T, av
    assert per["0.attn"] == 2 * attention
    assert per["0.mlp.0"] == per["0.mlp.2"] == 2 * length * dim * 2 * dim
    assert per["1"] == 2 * length * dim * 32
    assert not any(k.startswith("0.attn.") for k in per)  # out_proj not counted twice


def test_a_bench_without_host_still_carries_the_host_counts(tmp_path: Path) -> None:
    from neuroedge.bench.runner import bench_model
    from neuroedge.registry import get_model

    spec = get_model("snn.lif_convnet")
    config = {"untrained": True}
    (row,) = bench_model(spec, ["onnxrt"], config=config, repeats=2, progress=False)
    assert not row.rejections
    assert row.metrics["sops_per_sample"].value > 0  # was missing ("-") though noted as counted
    assert "counted on the host reference" in " ".join(row.notes)


def _doc(rows: list[Report]) -> dict:
    from neuroedge.bench.report import build_document

    return build_document("m", rows)


def test_a_reused_report_folder_drops_the_earlier_runs_plot(tmp_path: Path) -> None:
    from neuroedge.bench.report import write_report

    timed = Report("m", "host", metrics={"latency_p50_ms": Measurement(1.0, "ms")})
    history = tmp_path / "h.sqlite"
    first = write_report(_doc([timed]), tmp_path / "r", history=history)
    assert (tmp_path / "r" / "latency.png").is_file() and "latency" in first
    (tmp_path / "r" / "mine.png").write_bytes(b"user's")  # not the report's: kept
    second = write_report(
        _doc([Report("m", "x", rejections=("no",))]), tmp_path / "r", history=history
    )
    assert "latency" not in second and not (tmp_path / "r" / "latency.png").exists()
    assert (tmp_path / "r" / "mine.png").read_bytes() == b"user's"
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["plots"] == [] and doc["process_peak_rss_mb"] > 0
    assert "peak_rss_mb" not in json.dumps(doc["rows"])
    assert "peak resident memory of the bench process" in (tmp_path / "r" / "report.md").read_text()


def test_an_empty_history_path_is_refused() -> None:
    from neuroedge.bench.history import check, record

    for call in (lambda: check(""), lambda: record({}, " ")):
        with pytest.raises(ArtifactError, match="an empty path"):
            call()


def test_ttt_flops_grow_with_the_batch() -> None:
    from neuroedge.models.ttt.throughput import BENCH_DEFAULTS, layer_flops

    for form in ("recurrent", "parallel", "chunked"):
        one = layer_flops(form, 256, {**BENCH_DEFAULTS, "batch": 1})
        assert layer_flops(form, 256, {**BENCH_DEFAULTS, "batch": 4}) == pytest.approx(4 * one)


def test_deploy_on_null_checks_no_parity() -> None:
    import neuroedge as ne

    _, report = ne.deploy("snn.lif_convnet", backend="null", repeats=2, config={"untrained": True})
    assert "within_tolerance" not in report.metrics
    assert any("no parity" in n for n in report.notes)


def test_the_seed_mean_keeps_device_and_fallbacks() -> None:
    from neuroedge.bench.seeds import seed_rows

    row = Report(
        "m", "onnxrt", device="cuda", metrics={"a": Measurement(1.0, "x")}, fallbacks=("cpu",)
    )
    mean = seed_rows({0: [row], 1: [row]})[0]
    assert mean.device == "cuda" and mean.fallbacks == ("cpu",)
