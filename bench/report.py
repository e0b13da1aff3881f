"""Bench reports: report.json (the schema other tools read), report.md and PNG plots.

report.json::

    {"model": str, "created": ISO time, "machine": str,
     "rows": [{"variant": str, "backend": str,
               "metrics": {NAME: {"value": float, "unit": str, "how": "measured"|"counted"|
                                  "estimated"}}, "fallbacks": [...], "rejections": [...]}],
     "manifest": [{"path": str, "bytes": int, "mtime_ns": int}], "stale_removed": [str]}

``manifest`` lists every file under the report folder that this run wrote (modified since the
run began), report.json aside. A later report into the same folder removes the files of that
list it did not write again (unchanged since), so a folder never mixes two runs; files no
report listed (the user's own) are never touched.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from neuroedge.atomic import atomic_path, write_text
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


# A file's mtime may lag the clock that marks a run's start (the kernel's coarse clock; FAT's
# 2-second steps): files modified up to this long before the start count as the run's.
CLOCK_SLACK_S = 2.0
# Before a CLI bench (one process, one run) writes anything: it imports this module first.
_RUN_START = {"time": time.time()}


def begin_run() -> float:
    """Mark now as the start of a bench run, for a process that runs several (the CLI's
    ``main`` called again, a notebook): ``write_report`` takes the files under its folder
    modified since as this run's. Without it, the run began when this module was imported."""
    _RUN_START["time"] = time.time()
    return _RUN_START["time"]


def machine_description() -> str:
    cpus = os.cpu_count() or 0
    return (
        f"{platform.node()} {platform.machine()} {cpus} cpu {platform.system()} "
        f"python {platform.python_version()}"
    )


def build_document(model: str, rows: Sequence[Report], **extra: Any) -> dict[str, Any]:
    """The report.json document for ``rows``; ``extra`` keys (config, notes) are added."""
    doc = {
        "model": model,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "rows": [r.to_json() for r in rows],
        # ru_maxrss is the whole process's peak: every backend of the run (and the training
        # before it) together, so it is the run's figure, not a row's
        "process_peak_rss_mb": round(peak_rss_mb(), 1),
    }
    doc.update(extra)
    return doc


def finite_json(obj: Any, where: str = "", found: list[str] | None = None) -> Any:
    """``obj`` with every NaN or infinite float replaced by None (JSON has no NaN: Python's
    ``json`` would write a bare ``NaN`` that other readers refuse); ``found`` collects where."""
    if isinstance(obj, float) and not math.isfinite(obj):
        if found is not None:
            found.append(f"{where} ({obj})")
        return None
    if isinstance(obj, dict):
        return {k: finite_json(v, f"{where}.{k}".lstrip("."), found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v, f"{where}[{i}]", found) for i, v in enumerate(obj)]
    return obj


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
        "`*` = estimated (energy model or fake timing), never measured.",
        "",
    ]
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
    if doc.get("stale_removed"):
        lines.append(
            f"- removed {len(doc['stale_removed'])} file(s) an earlier report in this folder "
            f"listed and this run did not write: {', '.join(doc['stale_removed'])}"
        )
    lines += ["", *sections]
    write_text(path, "\n".join(lines) + "\n")


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    labels = [f"{r['variant']}\n{r['backend']}" for r in rows]
    p50 = [r["metrics"]["latency_p50_ms"]["value"] for r in rows]
    p99 = [r["metrics"].get("latency_p99_ms", {"value": v})["value"] for r, v in zip(rows, p50)]
    fig, ax = plt.subplots(figsize=(max(4, 1.3 * len(rows)), 3.5))
    ax.bar(labels, p50, yerr=[[0] * len(p50), [b - a for a, b in zip(p50, p99)]], capsize=4)
    ax.set_yscale("log")  # p99 outliers on a shared machine would flatten a linear axis
    ax.set_ylabel("latency per call (ms, log): p50, whisker to p99")
    ax.set_title(f"{doc['model']}: latency by backend")
    path = save_figure(fig, path)
    plt.close(fig)
    return path


def write_report(
    doc: dict[str, Any],
    out_dir: str | os.PathLike[str],
    *,
    columns: Sequence[str] = DEFAULT_COLUMNS,
    sections: Sequence[str] = (),
    plots: Sequence[Callable[[dict[str, Any], Path], Path | None]] = (),
    history: str | os.PathLike[str] | None = None,
    started: float | None = None,
) -> dict[str, Path]:
    """Write report.json, report.md and plots into ``out_dir``; add a row to the history.
    ``doc`` keeps the table's ``columns`` (set if it names none), so report.json and the
    console table show what report.md shows. report.json's ``manifest`` lists the files under
    ``out_dir`` modified since the run ``started`` (epoch seconds; default: ``begin_run``);
    the files an earlier report's manifest listed that this run did not write are removed."""
    from neuroedge.bench.history import record

    doc.setdefault("columns", list(columns))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = out.resolve()
    since_ns = int(((_RUN_START["time"] if started is None else started) - CLOCK_SLACK_S) * 1e9)
    earlier = _earlier_manifest(out / "report.json")  # read before anything is replaced
    written: dict[str, Path] = {}
    for plot in (latency_plot, *plots):
        name = getattr(plot, "__name__", "plot").removesuffix("_plot")
        made = plot(doc, out / f"{name}.png")
        if made is not None:
            written[name] = Path(made)
    found: list[str] = []
    plain = finite_json(doc, found=found)
    if found:
        plain["non_finite"] = found  # where a value was NaN or infinite (null in the rows)
    plain["plots"] = [p.name for p in written.values()]  # (all a pre-manifest report cleaned)
    json.dumps(plain, allow_nan=False)  # a document that cannot be written removes nothing
    removed = _remove_stale(base, earlier, since_ns)  # the run succeeded: its report follows
    if removed:
        plain["stale_removed"] = removed
    write_markdown(plain, out / "report.md", columns, sections)
    plain["manifest"] = _run_files(base, since_ns)
    text = json.dumps(plain, indent=2, allow_nan=False) + "\n"
    written = {"json": write_text(out / "report.json", text), **written, "md": out / "report.md"}
    record(plain, history, out_dir=str(base))
    return written


def _earlier_manifest(path: Path) -> dict[str, tuple[int, int] | None]:
    """The files the report already at ``path`` says its run wrote: relative path -> (bytes,
    mtime_ns) as they were then; a report older than manifests gives its ``plots`` (None: no
    stat). Read defensively: a missing or unreadable report, or a malformed entry, gives
    nothing to remove."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):  # missing, unreadable, not UTF-8, not JSON
        return {}
    if not isinstance(doc, dict):
        return {}
    entries = doc.get("manifest")
    if isinstance(entries, list):
        return {
            e["path"]: (e["bytes"], e["mtime_ns"])
            for e in entries
            if isinstance(e, dict)
            and isinstance(e.get("path"), str)
            and all(type(e.get(k)) is int for k in ("bytes", "mtime_ns"))
        }
    plots = doc.get("plots")
    return {
        n: None
        for n in (plots if isinstance(plots, list) else [])
        if isinstance(n, str) and n.endswith(".png")
    }


def _inside(base: Path, rel: str) -> Path | None:
    """``base / rel`` when ``rel`` is a relative path inside ``base`` (the resolved folder)
    through no symlink, not absolute, with no '..'; else None (never a path outside)."""
    parts = PurePosixPath(rel).parts
    if not parts or os.path.isabs(rel) or PurePosixPath(rel).is_absolute() or ".." in parts:
        return None
    path = base
    for part in parts:
        path = path / part
        if path.is_symlink():
            return None
    return path if path.resolve().is_relative_to(base) and path != base else None


def _remove_stale(
    base: Path, earlier: dict[str, tuple[int, int] | None], since_ns: int
) -> list[str]:
    """Remove the files of an earlier manifest this run did not write: a regular file, not
    modified since this run began and, where the manifest kept its size and mtime, unchanged
    since that report (else someone else's now); then the folders they leave empty."""
    removed = []
    for rel, then in sorted(earlier.items()):
        path = _inside(base, rel)
        if path is None or PurePosixPath(rel).as_posix() in ("report.json", "report.md"):
            continue  # outside the folder, or the report this call writes again
        try:
            now = path.lstat()
        except OSError:  # gone already
            continue
        if not stat.S_ISREG(now.st_mode) or now.st_mtime_ns >= since_ns:
            continue  # not a file, or this run's
        if then is not None and (now.st_size, now.st_mtime_ns) != then:
            continue  # changed after that report: not that run's file any more
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(rel)
        folder = path.parent
        while folder != base:  # the folders it leaves empty (rmdir refuses any other)
            try:
                folder.rmdir()
            except OSError:
                break
            folder = folder.parent
    return removed


def _run_files(base: Path, since_ns: int) -> list[dict[str, Any]]:
    """Every regular file under ``base`` (symlinks neither listed nor followed) modified since
    this run began, report.json aside: the manifest a later report may clean."""
    files = []
    for root, _, names in os.walk(base):
        for name in names:
            path = Path(root, name)
            try:
                st = path.lstat()
            except OSError:
                continue
            rel = path.relative_to(base).as_posix()
            if stat.S_ISREG(st.st_mode) and st.st_mtime_ns >= since_ns and rel != "report.json":
                files.append({"path": rel, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns})
    return sorted(files, key=lambda f: f["path"])
