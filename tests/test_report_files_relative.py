"""report.json's ``files`` are relative to the report folder whatever form the caller passes,
so a rerun in a folder given as a relative ``--out`` removes the earlier run's stale files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from neuroedge.bench.report import build_document, write_report


def _files(out: Path, *names: str) -> None:
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(name)


@pytest.mark.parametrize("out", ["rep", "./rep", "runs/../rep"])
def test_a_relative_out_lists_files_inside_it_and_a_rerun_removes_the_stale_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str
) -> None:
    """``out / name`` of a relative out (unisparse's bench under ``--out rep``) was listed as
    ``rep/ckpt/a.pt``: the next run looked for ``rep/rep/ckpt/a.pt`` and removed nothing."""
    monkeypatch.chdir(tmp_path)
    rel = Path(out)
    _files(rel, "ckpt/a.pt", "ckpt/b.pt", "onnx/c.onnx")
    given = [rel / "ckpt/a.pt", str(rel / "ckpt/b.pt"), tmp_path / "rep/onnx/c.onnx"]
    write_report(build_document("m", []), rel, files=given)
    listed = json.loads((rel / "report.json").read_text())["files"]
    assert listed == ["ckpt/a.pt", "ckpt/b.pt", "onnx/c.onnx"]
    write_report(build_document("m", []), rel, files=[rel / "ckpt/a.pt"])
    assert sorted(p.name for p in (tmp_path / "rep").rglob("*.*")) == [
        "a.pt",
        "report.json",
        "report.md",
    ]
    assert json.loads((rel / "report.json").read_text())["files"] == ["ckpt/a.pt"]


def test_the_working_directory_as_out_and_a_file_outside_a_relative_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _files(Path("."), "ckpt/a.pt")
    write_report(build_document("m", []), ".", files=["ckpt/a.pt"])
    assert json.loads(Path("report.json").read_text())["files"] == ["ckpt/a.pt"]
    Path("rep").mkdir()
    with pytest.raises(ValueError, match="not inside the report folder rep"):
        write_report(build_document("m", []), "rep", files=["../ckpt/a.pt"])


def test_the_data_parallel_bench_replaces_an_earlier_report_in_a_reused_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It wrote report.json alone: an earlier report's report.md, plots and listed files
    stayed beside it, as if they were this run's (no training here: compare is faked)."""
    from neuroedge.bench import data_parallel

    out = tmp_path / "out"
    _files(out, "ckpt/dense.pt", "user.txt")
    write_report(build_document("m", []), out, files=[out / "ckpt/dense.pt"])
    (out / "pareto.png").write_text("png")  # no rows draw no plot: one listed by hand
    doc = json.loads((out / "report.json").read_text())
    (out / "report.json").write_text(json.dumps({**doc, "plots": ["pareto.png"]}))
    fake = {"model": "snn.unisparse", "rows": {"one_process": {"wall_s": 2.0}}, "speedup_wall": 1}
    monkeypatch.setattr(data_parallel, "compare", lambda *a: fake)
    assert data_parallel.main(["--nproc", "2", "--out", str(out)]) == 0
    assert json.loads((out / "report.json").read_text()) == fake
    assert sorted(p.name for p in out.rglob("*.*")) == ["report.json", "user.txt"]


def test_a_relative_name_is_the_working_directorys_never_a_users_file_in_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rule, as Python opens a file: ``rep/x.pt`` under ``--out rep`` is the run's
    ``rep/x.pt``. A second rule (names relative to ``out`` unless they started with it) read
    a name ``x.pt`` as ``rep/x.pt`` and a later run deleted a user's file there."""
    monkeypatch.chdir(tmp_path)
    _files(Path("rep"), "x.pt", "rep/x.pt")
    write_report(build_document("m", []), "rep", files=["rep/rep/x.pt"])
    assert json.loads(Path("rep/report.json").read_text())["files"] == ["rep/x.pt"]
    write_report(build_document("m", []), "rep", files=[])
    assert Path("rep/x.pt").exists() and not Path("rep/rep/x.pt").exists()
    with pytest.raises(ValueError, match="not inside the report folder rep"):
        write_report(build_document("m", []), "rep", files=["x.pt"])  # the cwd's, not rep's


def test_write_report_json_and_write_report_both_say_where_a_value_was_not_finite(
    tmp_path: Path,
) -> None:
    """write_report_json dropped write_report's ``non_finite``: a NaN became null unnamed."""
    from neuroedge.bench.report import write_report_json

    write_report_json({"rows": {"one": {"acc": float("nan")}}}, tmp_path / "a")
    doc = json.loads((tmp_path / "a" / "report.json").read_text())
    assert doc == {"rows": {"one": {"acc": None}}, "non_finite": ["rows.one.acc (nan)"]}
    write_report(build_document("m", [], bad=float("inf")), tmp_path / "b")
    assert json.loads((tmp_path / "b" / "report.json").read_text())["non_finite"] == ["bad (inf)"]
