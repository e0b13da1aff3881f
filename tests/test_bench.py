"""Latency statistics, reports (JSON/Markdown/PNG), the SQLite history, atomic writes."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from neuroedge.atomic import atomic_path, write_text
from neuroedge.bench.history import record, runs
from neuroedge.bench.latency import measure_latency, measure_side_by_side
from neuroedge.bench.report import build_document, write_report
from neuroedge.types import Measurement, Report


def test_latency_percentiles_reflect_the_call_time() -> None:
    timing = measure_latency(lambda: time.sleep(0.002), repeats=10, warmup=1, batch=4)
    metrics = timing.metrics()
    assert metrics["latency_p50_ms"].value >= 1.5 and metrics["latency_p50_ms"].value <= 50
    assert metrics["latency_p50_ms"].value <= metrics["latency_p99_ms"].value
    assert metrics["throughput_per_s"].value == pytest.approx(
        4 / (sum(timing.times_ms) / len(timing.times_ms) / 1000)
    )
    assert "peak_rss_mb" not in metrics  # the process's peak, not one backend's: see below


def test_side_by_side_orders_a_slow_and_a_fast_call() -> None:
    timings = measure_side_by_side(
        {"slow": lambda: time.sleep(0.004), "fast": lambda: None}, repeats=6, warmup=1, block=3
    )
    assert len(timings["slow"].times_ms) == 6 == len(timings["fast"].times_ms)
    assert timings["slow"].percentile(50) > 10 * timings["fast"].percentile(50)


def test_report_files_follow_the_schema_and_reach_the_history(tmp_path: Path) -> None:
    rows = [
        Report(
            "snn.toy",
            "host",
            metrics={
                "latency_p50_ms": Measurement(2.0, "ms"),
                "energy_uj": Measurement(1.0, "uJ", "estimated"),
            },
        ),
        Report("snn.toy", "tensorrt", rejections=("no GPU",)),
    ]
    doc = build_document("snn.toy", rows)
    db = tmp_path / "h.sqlite"
    written = write_report(doc, tmp_path / "out", history=db)
    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert set(saved) >= {"model", "created", "machine", "rows"}
    assert saved["rows"][0]["metrics"]["energy_uj"] == {
        "value": 1.0,
        "unit": "uJ",
        "how": "estimated",
    }
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| default | host | - | 2 |" in md and "rejection: no GPU" in md
    assert "| 1* |" in md  # the estimated energy carries its mark
    assert written["latency"].read_bytes()[:4] == b"\x89PNG"
    assert [r["model"] for r in runs(db)] == ["snn.toy"]
    with sqlite3.connect(db) as con:  # the metrics table holds the rows' own values
        stored = con.execute("SELECT variant, backend, name, value, unit, how FROM metrics")
        assert sorted(stored) == [
            ("default", "host", "energy_uj", 1.0, "uJ", "estimated"),
            ("default", "host", "latency_p50_ms", 2.0, "ms", "measured"),
        ]
    record(doc, db)
    assert len(runs(db, model="snn.toy")) == 2


def test_report_md_names_fallbacks_and_each_columns_units(tmp_path: Path) -> None:
    """A lava run's throughput counts time steps/s on measured rows, 1/s on the null row:
    report.md says which unit each row's figure is in, and what ran elsewhere than asked."""
    rows = [
        Report("m", "host", metrics={"throughput_per_s": Measurement(5.0, "time steps/s")}),
        Report(
            "m",
            "null",
            metrics={"throughput_per_s": Measurement(1000.0, "1/s", "estimated")},
            fallbacks=("CPUExecutionProvider instead of CUDAExecutionProvider",),
        ),
    ]
    write_report(build_document("m", rows), tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    units = "throughput_per_s time steps/s (default/host); 1/s (default/null)"
    assert "units: " + units in md
    assert "default/null fallback: CPUExecutionProvider instead of CUDAExecutionProvider" in md


def test_interrupted_atomic_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    write_text(target, "old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_check_parity_flags_tolerance_breaches_and_unreturned_outputs() -> None:
    import numpy as np
    from neuroedge.bench.runner import check_parity
    from neuroedge.registry import get_model

    spec = get_model("snn.lif_convnet")  # tolerance 1e-4
    ref = {"logits": np.array([[2.0, -4.0]]), "spikes": np.array([1.0, 0.0]), "v_final": np.ones(2)}
    close = {"logits": ref["logits"] + 5e-5, "spikes": ref["spikes"], "v_final": ref["v_final"]}
    metrics, notes = check_parity(spec, "onnxrt", "default", ref, close)
    assert notes == []
    assert metrics["within_tolerance"].value == 1.0
    assert abs(metrics["max_rel_err"].value - 5e-5 / 4.0) < 1e-12
    off = {"logits": ref["logits"] + 0.01, "spikes": np.array([1.0, 1.0])}
    metrics, notes = check_parity(spec, "lava", "fixed_pt", ref, off)
    assert metrics["within_tolerance"].value == 0.0
    assert any(
        "0.01 exceeds snn.lif_convnet's tolerance 0.0001 for lava (fixed_pt)" in n for n in notes
    )
    assert any("spike agreement 0.5000" in n for n in notes)
    assert any("returned no v_final" in n for n in notes)


def test_percentiles_are_the_interpolated_order_statistics() -> None:
    from neuroedge.bench.latency import Latency

    metrics = Latency(tuple(float(t) for t in range(100, 0, -1))).metrics()  # 1..100 ms
    assert metrics["latency_p50_ms"].value == pytest.approx(50.5)
    assert metrics["latency_p90_ms"].value == pytest.approx(90.1)
    assert metrics["latency_p99_ms"].value == pytest.approx(99.01)


def test_speedup_is_the_host_p50_over_each_row_p50() -> None:
    from neuroedge.bench.runner import speedups

    def row(backend: str, p50: float) -> Report:
        return Report("m", backend, metrics={"latency_p50_ms": Measurement(p50, "ms")})

    ratios = speedups([row("host", 2.0), row("onnxrt", 0.5)])
    assert ratios == {"default/host": 1.0, "default/onnxrt": 4.0}


def _threads_while_timed(monkeypatch: pytest.MonkeyPatch, module: object, timer: str, run) -> list:
    """torch's thread count inside each call of ``module.timer`` while ``run()`` runs with the
    caller at 2 threads (and that count restored afterwards)."""
    import torch

    seen: list[int] = []
    timed = getattr(module, timer)

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(torch.get_num_threads())
        return timed(*args, **kwargs)

    monkeypatch.setattr(module, timer, spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run()
        assert torch.get_num_threads() == 2  # the caller's count is restored
    finally:
        torch.set_num_threads(before)
    return seen


def test_host_and_onnxrt_are_timed_on_one_torch_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """ONNX Runtime's sessions run one intra-op thread; the host row ran torch's default
    (every core), so the two rows timed different thread counts."""
    from neuroedge.bench import runner
    from neuroedge.registry import get_model

    def run() -> None:
        spec = get_model("snn.lif_convnet")
        runner.bench_model(
            spec, ["host", "onnxrt"], config={"untrained": True}, repeats=2, progress=False
        )

    assert _threads_while_timed(monkeypatch, runner, "measure_side_by_side", run) == [1]


def test_profile_times_torch_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ne.profile`` / ``ne.deploy`` time as ``neuroedge bench`` does: torch on one thread."""
    import neuroedge as ne
    from neuroedge.bench import latency

    def run() -> None:
        ne.deploy("snn.lif_convnet", "host", config={"untrained": True}, repeats=2)

    assert _threads_while_timed(monkeypatch, latency, "measure_latency", run) == [1]


@pytest.mark.parametrize("holds", [True, False, None])
def test_report_md_and_the_console_word_a_claim_alike(holds: bool | None) -> None:
    """A claim with a part not measured read 'not met (a part not measured)' in report.md and
    'not all measured, none failed' on the console."""
    from neuroedge.bench.seeds import claim_lines
    from neuroedge.cli import CLAIM_WORDS

    claim = {"holds": holds, "seeds": [0], "parts": {"p": holds}, "gap": [0.1]}
    header = claim_lines(claim)[0]
    assert header.lower().endswith(CLAIM_WORDS[holds].lower()), header


def test_the_latency_plot_marks_a_fake_timing(tmp_path: Path, monkeypatch) -> None:
    """The null backend's fake 1 ms was drawn as an ordinary, measured-looking bar."""
    import neuroedge.bench.report as report

    seen: list[object] = []
    real = report.save_figure

    def keep(fig: object, path: Path) -> Path:
        seen.append(fig)
        return real(fig, path)

    monkeypatch.setattr(report, "save_figure", keep)
    rows = [
        Report("m", "host", metrics={"latency_p50_ms": Measurement(2.0, "ms")}),
        Report("m", "null", metrics={"latency_p50_ms": Measurement(1.0, "ms", "estimated")}),
    ]
    assert report.latency_plot(build_document("m", rows), tmp_path / "l.png") is not None
    ax = seen[0].axes[0]
    host, null = ax.patches[:2]
    assert (host.get_hatch(), host.get_fill()) == (None, True)
    assert (null.get_hatch(), null.get_fill()) == ("//", False)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["default\nhost", "default\nnull\n(fake)"]


def test_a_reused_report_folder_drops_the_earlier_runs_listed_files_only(tmp_path: Path) -> None:
    """Files an earlier run listed (checkpoints, graphs) and this one did not write again go;
    this run's, and files no report listed, stay; a file outside the folder is refused."""
    out = tmp_path / "out"
    (out / "ckpt").mkdir(parents=True)
    for name in ("ckpt/a.pt", "ckpt/b.pt", "user.txt"):
        (out / name).write_text(name)
    write_report(build_document("m", []), out, files=[out / "ckpt/a.pt", out / "ckpt/b.pt"])
    assert json.loads((out / "report.json").read_text())["files"] == ["ckpt/a.pt", "ckpt/b.pt"]
    write_report(build_document("m", []), out, files=[str(out / "ckpt/a.pt")])
    assert sorted(p.name for p in (out / "ckpt").iterdir()) == ["a.pt"]
    assert (out / "user.txt").is_file()
    with pytest.raises(ValueError, match="not inside the report folder"):
        write_report(build_document("m", []), out, files=[tmp_path / "elsewhere.pt"])
    assert (out / "ckpt/a.pt").is_file() and (out / "report.json").is_file()


def test_an_earlier_reports_files_outside_the_folder_are_never_removed(tmp_path: Path) -> None:
    """A report.json is a file anyone can edit: its ``files`` reach nothing outside the
    folder, through '..', an absolute path or a symlinked subfolder."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.pt").write_text("not the report's")
    out.mkdir()
    (out / "linked").symlink_to(elsewhere, target_is_directory=True)
    forged = ["../elsewhere/keep.pt", str(elsewhere / "keep.pt"), "linked/keep.pt", 3, ""]
    (out / "report.json").write_text(json.dumps({"files": forged}))
    write_report(build_document("m", []), out)
    assert (elsewhere / "keep.pt").read_text() == "not the report's"


def test_a_file_in_a_symlinked_subfolder_is_the_reports_own(tmp_path: Path) -> None:
    """checkpoints/ linked to a scratch disk: its files are still listed (the run's report is
    written, not refused after the run), and a later run never removes through the link."""
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    scratch.mkdir()
    out.mkdir()
    (out / "checkpoints").symlink_to(scratch, target_is_directory=True)
    (scratch / "a.pt").write_text("weights")
    write_report(build_document("m", []), out, files=[out / "checkpoints" / "a.pt"])
    assert json.loads((out / "report.json").read_text())["files"] == ["checkpoints/a.pt"]
    write_report(build_document("m", []), out)
    assert (scratch / "a.pt").read_text() == "weights"
