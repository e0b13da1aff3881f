"""The ttt bench's ONNX Runtime sessions run the thread count torch runs the host side with
(cfg ``threads``), so ``speedup_vs_host`` compares like with like."""

from __future__ import annotations

from pathlib import Path

import neuroedge.backends.onnxrt as onnxrt
from neuroedge.models.ttt import throughput
from neuroedge.models.ttt.module import TTTLayer
from neuroedge.seeding import torch_threads

SMALL = {
    **throughput.BENCH_DEFAULTS,
    **{"d_model": 16, "heads": 2, "head_dim": 8, "block": 8, "threads": 2, "repeats": 1},
    **{"stream_steps": 2, "onnx_length": 8},
}


def test_onnxrt_sessions_run_the_benchs_thread_count(tmp_path, monkeypatch, require):
    require("onnxrt")
    opened = []
    original = onnxrt.open_session

    def spy(path, providers=None, threads=1, **kw):
        session, fallbacks = original(path, providers, threads, **kw)
        opened.append((Path(path).name, session.get_session_options().intra_op_num_threads))
        return session, fallbacks

    monkeypatch.setattr(onnxrt, "open_session", spy)
    cfg = SMALL
    with torch_threads(cfg["threads"]):
        shape = (cfg["d_model"], cfg["heads"], cfg["head_dim"], cfg["variant"])
        layer = TTTLayer(*shape, chunk=1, block=cfg["block"]).eval()
        throughput.bench_stream(cfg, tmp_path)
        throughput.bench_parallel_onnx(cfg, layer, tmp_path, 1.0)
    assert opened == [("step.onnx", 2), ("parallel.onnx", 2)]
