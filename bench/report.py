"""Bench reports: report.json (the schema other tools read), report.md and PNG plots.

report.json::

    {"model": str, "created": ISO time, "machine": str,
     "rows": [{"variant": str, "backend": str,
               "metrics": {NAME: {"value": float, "unit": str, "how": "measured"|"counted"|
                                  "estimated"}}, "fallbacks": [...], "rejections": [...]}],
     "provenance": {"versions": {PACKAGE: str}, "python": str,
                    "git": {"commit": str|null, "dirty": bool|null},
                    "threads": {"torch_intra_op": int|null, "OMP_NUM_THREADS": str|null}}}

The generic bench adds ``config`` (what the program was built with) and ``weights`` (the
checkpoint file: path, sha256, bytes, and what it saved of its training).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neuroedge.atomic import atomic_path, draft_prefix, remove_dead_drafts, write_text
from neuroedge.bench.latency import peak_rss_mb
from neuroedge.types import Report

DEFAULT_COLUMNS = (
    "accuracy",
    "latency_p50_ms",
    "throughput_per_s",
    "sops_per_sample",
    "energy_uj",
    "spike_agreement",
    "spike_kappa",  # agreement beyond chance: agreement alone rewards a silent layer
    "max_abs_err",
)
STANDARD_METRICS = (
    "accuracy",
    "map50",
    "success_rate",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "throughput_per_s",
    "sops_per_sample",
    "macs_per_sample",
    "energy_uj",
    "firing_rate",
    "spike_agreement",
    "max_abs_err",
)


def machine_description() -> str:
    cpus = os.cpu_count() or 0
    return (
        f"{platform.node()} {platform.machine()} {cpus} cpu {platform.system()} "
        f"python {platform.python_version()}"
    )


def build_document(model: str, rows: Sequence[Report], **extra: Any) -> dict[str, Any]:
    """The report.json document for ``rows``; ``extra`` keys (config, notes) are added; its
    ``provenance`` records the versions, git commit and thread counts (bench.provenance)."""
    from neuroedge.bench.provenance import provenance

    doc = {
        "model": model,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "rows": [r.to_json() for r in rows],
        # ru_maxrss is the whole process's peak (every backend of the run and the training
        # before it): the run's figure, not a row's; None where not measured (Windows)
        "process_peak_rss_mb": None if (peak := peak_rss_mb()) is None else round(peak, 1),
        "provenance": provenance(),
    }
    doc.update(extra)
    return doc


def finite_json(obj: Any, where: str = "", found: list[str] | None = None) -> Any:
    """``obj`` with every NaN or infinite float replaced by None (JSON has no NaN: Python's
    ``json`` would write a bare ``NaN`` that other readers refuse), and numpy scalars and
    arrays as Python numbers and lists (a config's ``np.int64`` seed must not fail the report
    after the run); ``found`` collects where."""
    if isinstance(obj, (np.generic, np.ndarray)):
        obj = obj.tolist()  # np.int64 -> int, np.float32 -> float, np.bool_ -> bool, arrays
    if isinstance(obj, float) and not math.isfinite(obj):
        if found is not None:
            found.append(f"{where} ({obj})")
        return None
    if isinstance(obj, dict):
        return {k: finite_json(v, f"{where}.{k}".lstrip("."), found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v, f"{where}[{i}]", found) for i, v in enumerate(obj)]
    return obj


def plain_json(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as finite_json makes it, ``non_finite`` listing where a value was not finite."""
    found: list[str] = []
    plain = finite_json(doc, found=found)
    return {**plain, "non_finite": found} if found else plain


def format_value(metric: dict[str, Any] | None) -> str:
    if metric is None:
        return "-"
    if metric["value"] is None:  # not finite when measured (see the report's notes)
        return "n/a"
    v = float(metric["value"])
    text = f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3e}"
    return text + ("*" if metric["how"] == "estimated" else "")


def markdown_table(doc: dict[str, Any], columns: Sequence[str] = DEFAULT_COLUMNS) -> str:
    """A Markdown table, one row per (variant, backend); '*' marks estimates."""
    header = ["variant", "backend", *columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in doc["rows"]:
        cells = [row["variant"], row["backend"]]
        cells += [format_value(row["metrics"].get(c)) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def units_line(doc: dict[str, Any], columns: Sequence[str] = DEFAULT_COLUMNS) -> str:
    """Each column's unit, naming the rows of each where a column mixes units (a lava run's
    throughput counts simulated time steps per second on every measured row, the null row's
    stays 1/s)."""
    parts = []
    for c in columns:
        rows: dict[str, list[str]] = {}
        for r in doc["rows"]:
            if r["metrics"].get(c) is not None:
                where = f"{r['variant']}/{r['backend']}"
                rows.setdefault(str(r["metrics"][c]["unit"]), []).append(where)
        if len(rows) == 1:
            parts.append(f"{c} {next(iter(rows))}")
        elif rows:
            parts.append(f"{c} " + "; ".join(f"{u} ({', '.join(w)})" for u, w in rows.items()))
    return "units: " + ", ".join(parts) if parts else ""


def speedup_lines(doc: dict[str, Any]) -> list[str]:
    """One line per row's p50 speedup over host (``speedup_vs_host``, the generic bench's):
    what the console prints, and report.md lists under the table."""
    ratios = doc.get("speedup_vs_host") or {}
    return [
        f"speedup {label} vs host (p50, same run): " + ("n/a" if ratio is None else f"{ratio:.2f}x")
        for label, ratio in ratios.items()
        if not label.endswith("/host")
    ]


def text_table(doc: dict[str, Any], columns: Sequence[str] = DEFAULT_COLUMNS) -> str:
    """The same table aligned for a terminal."""
    header = ["variant", "backend", *columns]
    body = [
        [r["variant"], r["backend"], *(format_value(r["metrics"].get(c)) for c in columns)]
        for r in doc["rows"]
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*line) for line in [header, *body])


def write_markdown(
    doc: dict[str, Any], path: Path, columns: Sequence[str], sections: Sequence[str] = ()
) -> None:
    lines = [
        f"# {doc['model']} benchmark",
        "",
        f"- created: {doc['created']}",
        f"- machine: {doc['machine']}",
        "",
        markdown_table(doc, columns),
        "",
        units_line(doc, columns),
        "",
        "`*` = estimated (energy model or fake timing), never measured.",
        "",
    ]
    if speedup_lines(doc):
        lines += [*(f"- {line}" for line in speedup_lines(doc)), ""]
    if doc.get("process_peak_rss_mb") is not None:
        lines += [
            f"- peak resident memory of the bench process: {doc['process_peak_rss_mb']} MB "
            "(every backend of the run together, not per row)",
            "",
        ]
    for row in doc["rows"]:
        for label in ("fallbacks", "rejections", "notes"):
            for item in row.get(label, []):
                lines.append(f"- {row['variant']}/{row['backend']} {label[:-1]}: {item}")
    for where in doc.get("non_finite", []):
        lines.append(f"- not finite, written as null (n/a): {where}")
    lines += ["", *sections]
    write_text(path, "\n".join(lines) + "\n")


class _FilePlots:
    """The two pyplot calls the plots make, ``subplots`` and ``close``, on figures of their
    own with an Agg canvas: no display needed, and the caller's pyplot (its backend, its open
    figures) is left alone, as a library in a notebook must (``matplotlib.use("Agg")``
    switched the caller's backend)."""

    @staticmethod
    def subplots(nrows: int = 1, ncols: int = 1, *, figsize: Any = None, **kw: Any) -> Any:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        return fig, fig.subplots(nrows, ncols, **kw)

    @staticmethod
    def close(fig: Any) -> None:
        """Nothing to do: the figure is in no registry, it goes with its last reference."""


def pyplot() -> _FilePlots:
    """What the plots use of matplotlib.pyplot (``subplots``, ``close``), file-only."""
    return _FilePlots()


def save_figure(fig: Any, path: Path) -> Path:
    """Save a matplotlib figure atomically as PNG."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    return path


def finish_figure(fig: Any, path: Path) -> Path:
    """Save ``fig`` atomically as PNG and free it."""
    save_figure(fig, path)
    pyplot().close(fig)
    return path


def latency_plot(doc: dict[str, Any], path: Path) -> Path | None:
    """Bar chart of p50 latency (with p90/p99 whiskers) for every row that has it."""
    plt = pyplot()
    rows = [r for r in doc["rows"] if "latency_p50_ms" in r["metrics"]]
    if not rows:
        return None
    fake = [r["metrics"]["latency_p50_ms"]["how"] == "estimated" for r in rows]  # null's
    labels = [
        f"{r['variant']}\n{r['backend']}" + ("\n(fake)" if f else "") for r, f in zip(rows, fake)
    ]
    p50 = [r["metrics"]["latency_p50_ms"]["value"] for r in rows]
    p99 = [r["metrics"].get("latency_p99_ms", {"value": v})["value"] for r, v in zip(rows, p50)]
    fig, ax = plt.subplots(figsize=(max(4, 1.3 * len(rows)), 3.5))
    bars = ax.bar(labels, p50, yerr=[[0] * len(p50), [b - a for a, b in zip(p50, p99)]], capsize=4)
    for bar, f in zip(bars, fake):  # an estimate is no measurement: hatched, unfilled
        if f:
            bar.set_hatch("//")
            bar.set_fill(False)
    ax.set_yscale("log")  # p99 outliers on a shared machine would flatten a linear axis
    ax.set_ylabel("latency per call (ms, log): p50, whisker to p99")
    ax.set_title(f"{doc['model']}: latency by backend")
    return finish_figure(fig, path)


def write_report(
    doc: dict[str, Any],
    out_dir: str | os.PathLike[str],
    *,
    columns: Sequence[str] = DEFAULT_COLUMNS,
    sections: Sequence[str] = (),
    plots: Sequence[Callable[[dict[str, Any], Path], Path | None]] = (),
    history: str | os.PathLike[str] | None = None,
    files: Sequence[str | os.PathLike[str]] = (),
) -> dict[str, Path]:
    """Write the plots, report.md, then report.json into ``out_dir``; add a row to the
    history. ``doc`` keeps the table's ``columns`` (set if it names none), so report.json and
    the console table show what report.md shows.

    report.json is written last: it commits the folder. The plots are drawn first, aside (one
    that fails leaves an earlier report as it was); then an earlier report is taken out (plots,
    report.json, report.md): a run stopped anywhere leaves no report.json or its own.

    ``files``: the other files the run wrote in ``out`` (checkpoints, exported graphs: paths
    as the run opened them, e.g. ``out / "checkpoints" / "a.pt"``), listed in report.json;
    those an earlier report listed and this run did not write again are removed with its
    plots, so a reused folder never shows an earlier run's file as this one's."""
    from neuroedge.bench.history import record

    doc.setdefault("columns", list(columns))
    plain = plain_json(doc)
    json.dumps(plain, allow_nan=False)  # a document JSON cannot hold fails before any removal
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    own = sorted({_inside(out, f) for f in files})
    written = _draw_then_replace(doc, out, (latency_plot, *plots), keep=own)
    plain["plots"] = [p.name for p in written.values()]  # what the next run may replace
    if own:
        plain["files"] = own
    write_markdown(plain, out / "report.md", columns, sections)
    text = json.dumps(plain, indent=2, allow_nan=False) + "\n"
    written = {"json": write_text(out / "report.json", text), **written, "md": out / "report.md"}
    record(plain, history, out_dir=str(out.resolve()))
    return written


def write_report_json(doc: dict[str, Any], out_dir: str | os.PathLike[str]) -> Path:
    """report.json alone (the caller's schema, no table or plots); an earlier report goes first."""
    text = json.dumps(plain_json(doc), indent=2, allow_nan=False) + "\n"
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    _remove_earlier_report(Path(out_dir))
    return write_text(Path(out_dir) / "report.json", text)


def _inside(out: Path, file: str | os.PathLike[str]) -> str:
    """``file``'s path relative to ``out`` (POSIX), symlinks not followed (a checkpoints/
    folder linked to a scratch disk is still the report's); ValueError for one outside it.
    A relative ``file`` is read from the working directory, as Python's file functions read
    it (``out / name``; it was read from ``out``, so ``--out rep`` listed ``rep/...``)."""
    full = Path(file)
    try:
        folder = Path(os.path.normpath(out.absolute()))
        return Path(os.path.normpath(full.absolute())).relative_to(folder).as_posix()
    except ValueError:
        raise ValueError(f"{file}: not inside the report folder {out}") from None


def _draw_then_replace(
    doc: dict[str, Any],
    out: Path,
    plots: Sequence[Callable[[dict[str, Any], Path], Path | None]],
    keep: Sequence[str] = (),
) -> dict[str, Path]:
    """Draw every plot in a private folder in ``out`` first (a plot that fails leaves the
    earlier report as it was), then take the earlier report out and move the plots in."""
    import shutil
    import tempfile

    draft = Path(tempfile.mkdtemp(prefix=draft_prefix("plots"), suffix=".part", dir=out))
    try:
        drawn: dict[str, Path] = {}
        for plot in plots:
            name = getattr(plot, "__name__", "plot").removesuffix("_plot")
            made = plot(doc, draft / f"{name}.png")
            if made is not None and not (Path(made).parent == draft and Path(made).is_file()):
                raise ValueError(  # before anything of an earlier report is touched
                    f"plot {name!r} returned {made}: not a file it wrote at the path it was given"
                )
            if made is not None:
                drawn[name] = Path(made)
        _remove_earlier_report(out, keep)
        for name, made in drawn.items():
            os.replace(made, out / made.name)
            drawn[name] = out / made.name
        return drawn
    finally:
        shutil.rmtree(draft, ignore_errors=True)
        remove_dead_drafts(out, "plots")


def _remove_earlier_report(out: Path, keep: Sequence[str] = ()) -> None:
    """Take an earlier report in ``out`` away before this one writes anything. Its plots go
    first (a reused folder keeps none: the new run writes its own again): a stop there
    leaves the earlier report.json naming missing plots, never the new run's, and the next
    run still reads from it which to remove. Its report.md goes with its report.json, so a
    folder never shows an earlier run's report.md beside the new run's plots."""
    plots, files = _written_before(out / "report.json")
    for stale in plots:
        (out / stale).unlink(missing_ok=True)
    for stale in set(files) - set(keep):
        (out / stale).unlink(missing_ok=True)  # this run's own files stay
    (out / "report.json").unlink(missing_ok=True)
    (out / "report.md").unlink(missing_ok=True)


def _written_before(path: Path) -> tuple[list[str], list[str]]:
    """(plots, files) an earlier report in this folder listed: its PNG plots (a new report
    removes them, so a folder never mixes an old run's plot with a new run's numbers) and the
    other files it wrote, inside the folder. Other files in the folder are left alone."""
    try:
        listed = json.loads(path.read_text(encoding="utf-8"))
        plots, names = listed.get("plots", []), listed.get("files", [])
    except (OSError, ValueError, AttributeError):
        return [], []
    plots = plots if isinstance(plots, list) else []
    folder, inside = path.parent.resolve(), []
    for n in names if isinstance(names, list) else []:
        if not isinstance(n, str) or not n or n.startswith("/") or ".." in n.split("/"):
            continue
        where = path.parent / n
        # its folder, symlinks followed, is in the report folder (a linked subfolder is not)
        if where.parent.resolve() == folder or folder in where.parent.resolve().parents:
            inside.append(n)
    return [n for n in plots if isinstance(n, str) and n.endswith(".png") and "/" not in n], inside
