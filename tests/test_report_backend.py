"""Plots are drawn on figures of their own: the caller's matplotlib backend and pyplot state
are left as they were (a notebook's inline backend kept showing nothing after a report)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CODE = """
import matplotlib, sys
matplotlib.use("svg")
from neuroedge.bench.report import build_document, write_report
from neuroedge.types import Measurement, Report
rows = [Report("m", "host", "v", metrics={"latency_p50_ms": Measurement(1.0, "ms"),
                                           "latency_p99_ms": Measurement(2.0, "ms")})]
written = write_report(build_document("m", rows), sys.argv[1])
print(matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules, sorted(written))
"""


def test_a_report_leaves_the_callers_matplotlib_backend_alone(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", CODE, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    backend, pyplot_loaded, written = run.stdout.split(maxsplit=2)
    assert backend == "svg"  # was switched to agg
    assert pyplot_loaded == "False"
    assert "latency" in written
    png = (tmp_path / "latency.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 1000
