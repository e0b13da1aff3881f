"""The ttt bench's FLOP count matches torch's FLOP counter, and its roofline is the faster of
the PyTorch and ONNX Runtime matmuls."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from neuroedge.models.ttt import throughput
from neuroedge.models.ttt.module import TTTLayer
from neuroedge.models.ttt.throughput import BENCH_DEFAULTS, layer_flops
from torch.utils.flop_counter import FlopCounterMode

SMALL = {**BENCH_DEFAULTS, "d_model": 16, "heads": 2, "head_dim": 16, "block": 8}


def _counted(cfg: dict, form: str, tokens: int) -> int:
    torch.manual_seed(0)
    layer = TTTLayer(
        cfg["d_model"], cfg["heads"], cfg["head_dim"], cfg["variant"], chunk=1, block=cfg["block"]
    ).eval()
    x = torch.randn(int(cfg["batch"]), tokens, cfg["d_model"])
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        layer(x, form)
    return counter.get_total_flops()


@pytest.mark.parametrize("variant", ["v6", "la_momentum"])
@pytest.mark.parametrize("form", ["recurrent", "parallel", "chunked"])
@pytest.mark.parametrize("tokens", [60, 128])  # 60: the chunked form pads a ragged last block
def test_layer_flops_match_torchs_flop_counter(variant, form, tokens):
    cfg = {**SMALL, "variant": variant, "batch": 2}
    counted = _counted(cfg, form, tokens)
    # the parallel form also counts its L x L mask product, which torch does not
    assert layer_flops(form, tokens, cfg) == pytest.approx(counted, rel=0.02)


@pytest.mark.parametrize("form", ["parallel", "chunked"])
def test_layer_flops_match_at_the_bench_defaults(form):
    assert layer_flops(form, 2048, BENCH_DEFAULTS) == pytest.approx(
        _counted(BENCH_DEFAULTS, form, 2048), rel=0.01
    )


def test_the_roofline_is_the_faster_matmul(tmp_path, monkeypatch):
    monkeypatch.setattr(throughput, "matmul_rates", lambda: {"torch": 10.0, "onnxrt": 40.0})
    doc = throughput.bench(
        tmp_path, ["host"], {"lengths": [32], "repeats": 1}, history=None, progress=False
    )
    assert doc["roofline_gflops"] == 40.0
    for row in doc["rows"]:
        m = row["metrics"]
        assert m["roofline_fraction"]["value"] == pytest.approx(m["gflops_per_s"]["value"] / 40)
    assert "the fastest of torch 10.00, onnxrt 40.00 GFLOP/s" in doc["ratios"][0]
    assert "onnxrt 40.00" in (tmp_path / "report.md").read_text()


@pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None,
    reason="onnxruntime or onnx is not installed",
)
def test_matmul_rates_measure_torch_and_onnxruntime():
    rates = throughput.matmul_rates(64, 2)
    assert set(rates) == {"torch", "onnxrt"} and min(rates.values()) > 0
    assert throughput.matmul_gflops(64, 2) > 0
