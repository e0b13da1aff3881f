"""Drafts a killed process leaves (SIGKILL cannot be caught: its ``.part`` stays) are removed
by the next successful write of the same name, and only those: not a live process's, not a
young one's, not another host's nor another name's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from neuroedge.atomic import DEAD_DRAFT_AGE_S, HOST, draft_prefix, write_text
from test_signals import HOLD, SLEEP

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kill -9, pids")


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


def _aged(path: Path) -> Path:
    old = time.time() - DEAD_DRAFT_AGE_S - 60
    os.utime(path, (old, old))
    return path


def test_a_sigkilled_writers_draft_goes_with_the_next_write(tmp_path) -> None:
    run = subprocess.Popen(
        [sys.executable, "-c", HOLD.replace("WORK", SLEEP)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert run.stdout.readline().strip() == "ready"
    finally:
        run.kill()  # SIGKILL: no finally block of its runs
        run.wait(timeout=30)
    assert run.returncode == -signal.SIGKILL
    (left,) = tmp_path.glob(".out.json.*.part")
    assert left.name.startswith(f".out.json.{HOST}-{run.pid}.")
    write_text(tmp_path / "out.json", "young")  # killed a moment ago: kept for now
    assert left.exists()
    _aged(left)
    write_text(tmp_path / "out.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_only_dead_old_drafts_of_this_host_and_name_are_removed(tmp_path) -> None:
    dead, live = (
        _dead_pid(),
        subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE),
    )
    try:
        drafts = {
            "dead": f".r.json.{HOST}-{dead}.abc123.part",
            "dead_folder": f".r.json.{HOST}-{dead}.def456.part",
            "live": f".r.json.{HOST}-{live.pid}.abc123.part",
            "mine": f"{draft_prefix('r.json')}zz.part",
            "other_host": f".r.json.{HOST}x-{dead}.abc123.part",
            "other_name": f".r.json.x.{HOST}-{dead}.abc123.part",
            "other_names_draft": f".r.json.{HOST}-{dead}.{HOST}-1.abc.part",
        }
        for key, name in drafts.items():
            path = tmp_path / name
            path.mkdir() if key == "dead_folder" else path.write_text("draft")
            if key == "dead_folder":
                (path / "inner.onnx").write_text("x")
                _aged(path / "inner.onnx")  # a folder is as young as what is in it
            _aged(path)
        young = tmp_path / f".r.json.{HOST}-{dead}.young1.part"
        young.write_text("draft")
        write_text(tmp_path / "r.json", "{}")
    finally:
        live.kill()
        live.wait(timeout=30)
    left = {p.name for p in tmp_path.iterdir()}
    assert drafts["dead"] not in left and drafts["dead_folder"] not in left
    kept = {k for k, n in drafts.items() if n in left}
    assert kept == {"live", "mine", "other_host", "other_name", "other_names_draft"}
    assert young.name in left and "r.json" in left


def test_export_and_plot_drafts_of_dead_processes_go_with_the_next_publish(tmp_path) -> None:
    from neuroedge.backends.export_folders import export_once
    from neuroedge.bench.report import build_document, write_report

    dead = _dead_pid()
    export = tmp_path / f".net.{HOST}-{dead}.0a1b2c3d4e5f.part"
    export.mkdir()
    _aged(export)
    plots = tmp_path / "report" / f".plots.{HOST}-{dead}.k3j4h5g6.part"
    plots.mkdir(parents=True)
    _aged(plots)

    def write(work: Path) -> Path:
        (work / "net.onnx").write_bytes(b"graph")
        return work / "net.onnx"

    published = export_once(tmp_path, "net", write)
    assert published.read_bytes() == b"graph" and not export.exists()
    write_report(build_document("m", []), tmp_path / "report")
    assert not plots.exists() and (tmp_path / "report" / "report.json").is_file()


def test_odd_draft_names_and_a_folder_written_into_lately_are_left(tmp_path) -> None:
    """Names whose 'pid' int() or os.kill cannot take made the write raise after it was done;
    a folder draft is as young as the newest file in it (writing inside leaves its mtime)."""
    dead = _dead_pid()
    odd = [f".r.json.{HOST}-{'9' * 30}.abc.part", f".r.json.{HOST}-\u00b2.abc.part"]
    for name in odd:
        (tmp_path / name).write_text("x")
        _aged(tmp_path / name)
    busy = tmp_path / f".r.json.{HOST}-{dead}.busy01.part"
    (busy / "sub").mkdir(parents=True)
    (busy / "sub" / "graph.onnx").write_text("being written")
    _aged(busy / "sub")
    _aged(busy)  # its own mtime is old; the file inside is new
    write_text(tmp_path / "r.json", "{}")
    assert (tmp_path / "r.json").read_text() == "{}"
    assert all((tmp_path / name).exists() for name in odd) and busy.exists()
    _aged(busy / "sub" / "graph.onnx")
    write_text(tmp_path / "r.json", "{}")
    assert not busy.exists()
