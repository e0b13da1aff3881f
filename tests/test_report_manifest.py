"""A reused report folder: report.json's manifest lists the files the run wrote, and the next
report removes those it did not write again (a folder never mixes two runs: run 1's ONNX net
beside run 2's checkpoint), never a file no manifest listed, never one outside the folder,
and nothing when the new run fails."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from neuroedge.bench.report import build_document, write_report
from neuroedge.types import Report


def _doc() -> dict:
    return build_document("m", [Report("m", "x", rejections=("no",))])  # no plot: fast


def _put(path: Path, data: bytes, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def _run_one(tmp_path: Path) -> tuple[Path, float]:
    """Run 1 (a while ago): onnx/a.onnx and checkpoints/b.pt, then its report; notes.txt is
    the user's, older than the run."""
    out, now = tmp_path / "us", time.time()
    _put(out / "notes.txt", b"user's", now - 1000)
    _put(out / "onnx" / "a.onnx", b"net 1", now - 100)
    _put(out / "checkpoints" / "b.pt", b"ckpt 1", now - 100)
    write_report(_doc(), out, history=tmp_path / "h.sqlite", started=now - 110)
    listed = [e["path"] for e in json.loads((out / "report.json").read_text())["manifest"]]
    assert listed == ["checkpoints/b.pt", "onnx/a.onnx", "report.md"]  # not notes.txt
    return out, time.time()


def test_a_second_run_removes_the_files_of_the_first_it_did_not_write(tmp_path: Path) -> None:
    out, started = _run_one(tmp_path)
    _put(out / "checkpoints" / "b.pt", b"ckpt 2")  # run 2 writes only its checkpoint
    write_report(_doc(), out, history=tmp_path / "h.sqlite", started=started)
    assert not (out / "onnx").exists()  # run 1's net, and the folder it leaves empty
    assert (out / "checkpoints" / "b.pt").read_bytes() == b"ckpt 2"
    assert (out / "notes.txt").read_bytes() == b"user's"
    doc = json.loads((out / "report.json").read_text())
    assert doc["stale_removed"] == ["onnx/a.onnx"]
    assert [e["path"] for e in doc["manifest"]] == ["checkpoints/b.pt", "report.md"]
    assert "removed 1 file(s)" in (out / "report.md").read_text()


def test_a_listed_file_changed_since_or_in_a_kept_folder_stays(tmp_path: Path) -> None:
    out, started = _run_one(tmp_path)
    _put(out / "onnx" / "mine.txt", b"user's", started - 50)  # the user's, in run 1's folder
    _put(out / "checkpoints" / "b.pt", b"edited by the user", started - 50)
    write_report(_doc(), out, history=tmp_path / "h.sqlite", started=started)
    assert not (out / "onnx" / "a.onnx").exists() and (out / "onnx" / "mine.txt").is_file()
    assert (out / "checkpoints" / "b.pt").read_bytes() == b"edited by the user"
    listed = [e["path"] for e in json.loads((out / "report.json").read_text())["manifest"]]
    assert listed == ["report.md"]  # neither file is this run's


def test_a_failed_second_run_leaves_the_first_intact(tmp_path: Path) -> None:
    out, started = _run_one(tmp_path)
    before = (out / "report.json").read_text()

    def failing_bench() -> None:  # writes its checkpoint, then fails before its report
        _put(out / "checkpoints" / "b.pt", b"ckpt 2")
        raise RuntimeError("training diverged")

    with pytest.raises(RuntimeError):
        failing_bench()

    def broken_plot(doc: dict, path: Path) -> Path:
        raise RuntimeError("plot failed")

    with pytest.raises(RuntimeError, match="plot failed"):  # failing inside write_report too
        write_report(_doc(), out, plots=[broken_plot], started=started)
    with pytest.raises(TypeError):  # a document JSON cannot hold
        write_report({**_doc(), "extra": object()}, out, started=started)
    assert (out / "onnx" / "a.onnx").read_bytes() == b"net 1"
    assert (out / "report.json").read_text() == before


def test_manifest_entries_outside_the_folder_are_ignored(tmp_path: Path) -> None:
    out, started = _run_one(tmp_path)
    old = time.time() - 100
    outside = _put(tmp_path / "x", b"outside", old)
    absolute = _put(tmp_path / "abs.txt", b"outside", old)
    linked = _put(tmp_path / "elsewhere" / "t.txt", b"outside", old)
    (out / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (out / "lnk.txt").symlink_to(outside)
    doc = json.loads((out / "report.json").read_text())
    for rel, path in [
        ("../x", outside),
        ("onnx/../../x", outside),
        (str(absolute), absolute),
        ("link/t.txt", linked),
        ("lnk.txt", outside),
    ]:
        st = path.stat()  # the entry matches the file: only the path check keeps it
        doc["manifest"].append({"path": rel, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns})
    doc["manifest"] += [{"path": 3}, {"path": "onnx/a.onnx", "bytes": "5"}, "junk"]
    (out / "report.json").write_text(json.dumps(doc))
    write_report(_doc(), out, history=tmp_path / "h.sqlite", started=started)
    assert outside.is_file() and absolute.is_file() and linked.is_file()
    assert (out / "link").is_symlink() and (out / "lnk.txt").is_symlink()
    assert not (out / "onnx" / "a.onnx").exists()  # the well-formed entry still counts
    listed = [e["path"] for e in json.loads((out / "report.json").read_text())["manifest"]]
    assert listed == ["report.md"]  # symlinks are neither listed nor followed


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"manifest": "onnx/a.onnx"}', ""])
def test_a_corrupt_earlier_report_removes_nothing(tmp_path: Path, text: str) -> None:
    out, started = _run_one(tmp_path)
    (out / "report.json").write_text(text)
    write_report(_doc(), out, history=tmp_path / "h.sqlite", started=started)
    assert (out / "onnx" / "a.onnx").is_file() and (out / "checkpoints" / "b.pt").is_file()
