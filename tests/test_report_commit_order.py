"""report.json commits a report folder: a bench stopped at any point of writing its report
into a reused --out leaves no report.json, or one whose report.md and plots are its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from neuroedge.types import Measurement, Report


def mark_plot(doc: dict[str, Any], path: Path) -> Path:
    """A 'plot' whose content names its run."""
    path.write_text(doc["tag"])
    return path


def _doc(tag: str, latency: float) -> dict[str, Any]:
    from neuroedge.bench.report import build_document

    row = Report("m", "host", metrics={"latency_p50_ms": Measurement(latency, "ms")})
    return build_document("m", [row], tag=tag)


def _assert_consistent(out: Path) -> None:
    """Either no report.json, or one whose report.md and plots are the same run's."""
    from neuroedge.bench.report import markdown_table

    if not (out / "report.json").exists():
        return
    doc = json.loads((out / "report.json").read_text())
    assert markdown_table(doc, doc["columns"]) in (out / "report.md").read_text()
    for name in doc["plots"]:
        assert (out / name).is_file(), name
    if "mark.png" in doc["plots"]:
        assert (out / "mark.png").read_text() == doc["tag"]


def _stop_writing(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Ctrl-C the moment ``name`` is about to be written."""
    import neuroedge.bench.report as report

    real = report.write_text

    def write_text(path: Path, text: str) -> Path:
        if Path(path).name == name:
            raise KeyboardInterrupt
        return real(path, text)

    monkeypatch.setattr(report, "write_text", write_text)


def _stop_history(monkeypatch: pytest.MonkeyPatch) -> None:
    import neuroedge.bench.history as history

    def record(*args: Any, **kwargs: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(history, "record", record)


def _stop_in_a_plot(doc: dict[str, Any], path: Path) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("stop", ["plot", "report.md", "report.json", "history"])
def test_a_stopped_second_run_never_mixes_two_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: str
) -> None:
    """report.json was written first: stopped while writing report.md, the folder held run 2's
    report.json beside run 1's report.md; stopped in a plot, run 1's report.json named
    plots run 2 had already replaced."""
    from neuroedge.bench.report import write_report

    out, db = tmp_path / "R", tmp_path / "h.sqlite"
    write_report(_doc("run1", 1.0), out, plots=[mark_plot], history=db)
    _assert_consistent(out)
    plots: list[Any] = [mark_plot]
    if stop == "plot":
        plots.append(_stop_in_a_plot)
    elif stop == "history":
        _stop_history(monkeypatch)
    else:
        _stop_writing(monkeypatch, stop)
    with pytest.raises(KeyboardInterrupt):
        write_report(_doc("run2", 2.0), out, plots=plots, history=db)
    _assert_consistent(out)
    if stop == "history":  # report.json was written: the folder is run 2's
        assert json.loads((out / "report.json").read_text())["tag"] == "run2"
    monkeypatch.undo()
    write_report(_doc("run3", 3.0), out, history=db)  # the folder is usable again
    _assert_consistent(out)
    assert json.loads((out / "report.json").read_text())["plots"] == ["latency.png"]
    if stop == "history":  # run 2's committed mark plot, which run 3 does not write, is gone
        assert not (out / "mark.png").exists()


def test_a_document_json_cannot_hold_leaves_the_earlier_report(tmp_path: Path) -> None:
    """The document is checked before anything is removed or written."""
    from neuroedge.bench.report import write_report

    out, db = tmp_path / "R", tmp_path / "h.sqlite"
    write_report(_doc("run1", 1.0), out, plots=[mark_plot], history=db)
    bad = _doc("run2", 2.0)
    bad["extra"] = object()
    with pytest.raises(TypeError):
        write_report(bad, out, plots=[mark_plot], history=db)
    assert json.loads((out / "report.json").read_text())["tag"] == "run1"
    assert (out / "mark.png").read_text() == "run1"
    _assert_consistent(out)


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_plot_that_fails_leaves_the_earlier_report_and_no_draft(tmp_path: Path, error) -> None:
    """Plots are drawn aside before anything is removed: a plot's bug (or a Ctrl-C while
    drawing) deleted the earlier run's report.json and report.md."""
    from neuroedge.bench.report import write_report

    def broken_plot(doc: dict[str, Any], path: Path) -> Path:
        path.write_text("half")
        raise error("plot failed")

    out, db = tmp_path / "R", tmp_path / "h.sqlite"
    write_report(_doc("run1", 1.0), out, plots=[mark_plot], history=db)
    with pytest.raises(error):
        write_report(_doc("run2", 2.0), out, plots=[mark_plot, broken_plot], history=db)
    assert json.loads((out / "report.json").read_text())["tag"] == "run1"
    assert (out / "mark.png").read_text() == "run1"
    _assert_consistent(out)
    assert sorted(p.name for p in out.iterdir()) == [
        "latency.png",
        "mark.png",
        "report.json",
        "report.md",
    ]


def test_a_plot_returning_a_path_it_did_not_write_is_refused_before_any_removal(
    tmp_path: Path,
) -> None:
    """A plot must write the path it is given and return it (or None): one that returned
    another path made the report move a file from elsewhere, or fail after the earlier
    report was gone."""
    from neuroedge.bench.report import write_report

    elsewhere = tmp_path / "mine.png"
    elsewhere.write_text("a user's file")

    def lazy_plot(doc: dict[str, Any], path: Path) -> Path:
        return path  # never written

    def elsewhere_plot(doc: dict[str, Any], path: Path) -> Path:
        return elsewhere

    out, db = tmp_path / "R", tmp_path / "h.sqlite"
    write_report(_doc("run1", 1.0), out, plots=[mark_plot], history=db)
    for bad in (lazy_plot, elsewhere_plot):
        with pytest.raises(ValueError, match="not a file it wrote at the path it was given"):
            write_report(_doc("run2", 2.0), out, plots=[bad], history=db)
        assert json.loads((out / "report.json").read_text())["tag"] == "run1"
        _assert_consistent(out)
    assert elsewhere.read_text() == "a user's file"
