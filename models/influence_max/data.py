"""Read a user's edge list: ``u v [p]`` per line (comma, tab or space separated).

Node ids are integers 0..n-1 and every id in that range must appear in some edge (a gap usually
means a typo or a file relabelled by hand; an unused id would be a node that nothing can reach or
be reached from). Each directed edge appears once (a repeat would get two coin flips and count
twice in the in-degree) and no edge is a self-loop. Missing probabilities get the weighted-cascade
value 1/indeg(v). Quotes around a field are dropped (``"0","1","0.5"`` as spreadsheets write
it). At most one header line is skipped: the first non-blank, non-'#' line, and only when it
has 2 or 3 fields of which none is a number (``u,v,p``, ``source target weight``); any other
line whose ids are not integers is an error. Ids are ASCII digits with an optional sign and
probabilities plain ASCII numbers (no ``1_0``, no other scripts' digits). Errors name the line
and the value.

``check_edges`` applies the same graph checks (no self-loop, no repeat, contiguous ids) to arrays,
naming edges by index; it is what the array API's oracle calls.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from neuroedge.models.influence_max.functional import ICGraph, weighted_cascade

SHOWN = 10  # missing ids listed in an error
NUMBER = re.compile(
    r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)(e[-+]?[0-9]+)?|[-+]?(nan|inf|infinity)", re.I | re.ASCII
)
INTEGER = re.compile(r"[-+]?[0-9]+", re.ASCII)


def _field_int(text: str, file: Path, line_no: int, what: str) -> int:
    """A node id: ASCII digits 0-9 with an optional sign (``int`` alone would also take
    ``1_0`` and other scripts' digits, e.g. Arabic-Indic ones)."""
    if not INTEGER.fullmatch(text):
        raise ValueError(
            f"edge list {file}: line {line_no}: {what} {text!r} is not an integer node id "
            "(ASCII digits 0-9 only)"
        )
    try:
        value = int(text)
    except ValueError:  # over Python's int-string digit limit (4300)
        raise ValueError(
            f"edge list {file}: line {line_no}: {what} of {len(text)} characters is too "
            f"large to be a node id (starts {text[:20]!r})"
        ) from None
    if value < 0:
        raise ValueError(f"edge list {file}: line {line_no}: {what} {value} is negative")
    return value


def _field_prob(text: str, file: Path, line_no: int) -> float:
    if not NUMBER.fullmatch(text):  # float alone would also take 0_5 and other scripts' digits
        raise ValueError(
            f"edge list {file}: line {line_no}: probability {text!r} is not a number "
            "(ASCII digits, '.', a sign and an exponent)"
        )
    p = float(text)
    if not (math.isfinite(p) and 0.0 <= p <= 1.0):
        raise ValueError(f"edge list {file}: line {line_no}: probability {text} is not in [0, 1]")
    return p


def looks_like_header(fields: Sequence[str]) -> bool:
    """2 or 3 fields and none of them a number: ``u,v,p`` yes; ``O,1`` or ``0;1`` no."""
    return len(fields) in (2, 3) and not any(NUMBER.fullmatch(f) for f in fields)


def edge_problem(u: int, v: int, label: str, seen: dict[tuple[int, int], str]) -> str | None:
    """Why edge ``u -> v`` (at ``label``) is refused, or None; ``seen`` maps edge -> first label."""
    if u == v:
        return f"{label}: self-loop {u} -> {v}"
    first = seen.setdefault((u, v), label)
    if first != label:
        return f"{label} repeats the edge {u} -> {v} of {first}"
    return None


def _first_missing(ids: list[int], count: int) -> tuple[list[int], int]:
    """The first ``count`` ids of 0..max(ids) absent from sorted ``ids``, and how many in all;
    walks the gaps, never the whole range (a typo like 10**12 must not allocate it)."""
    shown, total, previous = [], 0, -1
    for i in ids:
        gap = i - previous - 1
        shown += range(previous + 1, min(i, previous + 1 + count - len(shown)))
        total += gap
        previous = i
    return shown, total


def node_count(src: Sequence[int], dst: Sequence[int], labels: Sequence[str], where: str) -> int:
    """n = max id + 1, after checking that every id in 0..n-1 appears in some edge."""
    distinct = sorted(set(src) | set(dst))
    top = distinct[-1]
    if top + 1 > len(distinct):
        missing, total = _first_missing(distinct, SHOWN)
        at = next(labels[i] for i, (u, v) in enumerate(zip(src, dst)) if top in (u, v))
        more = f" and {total - len(missing)} more" if total > len(missing) else ""
        raise ValueError(
            f"{where}: node ids must be 0..n-1 with every id in some edge; the largest id {top} "
            f"({at}) needs {top + 1} nodes but only {len(distinct)} distinct ids appear; "
            f"ids {missing}{more} appear in no edge (disconnected)"
        )
    return top + 1


def _fields_error(file: Path, line_no: int, raw: str, count: int, width: int | None) -> ValueError:
    plural = "field" if count == 1 else "fields"
    if width is not None:
        expected = f"{width} as on the first edge line"
    else:
        expected = "2 (u v) or 3 (u v p) separated by commas, tabs or spaces"
    return ValueError(
        f"edge list {file}: line {line_no} has {count} {plural}, expected {expected}: "
        f"{raw.strip()!r}"
    )


def _unquote(field: str) -> str:
    """A field without the double or single quotes around it (spreadsheets quote fields:
    ``"0","1","0.5"`` is the edge 0 -> 1, not a header)."""
    if len(field) >= 2 and field[0] == field[-1] and field[0] in "\"'":
        return field[1:-1].strip()
    return field


def _data_lines(file: Path) -> list[tuple[int, str, list[str]]]:
    """(line number, text, fields) of every non-blank, non-'#' line, the header dropped."""
    from neuroedge.models.self_distill.data import read_text

    rows = []
    for line_no, raw in enumerate(read_text(file, "edge list").splitlines(), start=1):
        fields = [_unquote(f) for f in re.split(r"[,\s]+", raw.strip()) if f]
        if fields and not fields[0].startswith("#"):
            rows.append((line_no, raw, fields))
    if rows and looks_like_header(rows[0][2]):
        rows.pop(0)
    return rows


def load_edge_list(path: str | os.PathLike[str]) -> ICGraph:
    """An ICGraph from ``path`` (format and checks: see the module docstring)."""
    file = Path(path)
    if file.is_dir():
        raise IsADirectoryError(f"edge list {file} is a directory; give the edge-list file")
    if not file.is_file():
        raise FileNotFoundError(f"edge list {file} does not exist")
    src, dst, prob, labels = [], [], [], []
    seen: dict[tuple[int, int], str] = {}
    width = None
    for line_no, raw, fields in _data_lines(file):
        if len(fields) not in (2, 3) or (width is not None and len(fields) != width):
            raise _fields_error(file, line_no, raw, len(fields), width)
        width = len(fields)
        u = _field_int(fields[0], file, line_no, "source")
        v = _field_int(fields[1], file, line_no, "target")
        problem = edge_problem(u, v, f"line {line_no}", seen)
        if problem:
            raise ValueError(f"edge list {file}: {problem}")
        src.append(u)
        dst.append(v)
        labels.append(f"line {line_no}")
        if width == 3:
            prob.append(_field_prob(fields[2], file, line_no))
    if not src:
        raise ValueError(f"edge list {file}: no edges (only blank, '#' or header lines)")
    n = node_count(src, dst, labels, f"edge list {file}")
    s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    p = np.asarray(prob) if width == 3 else weighted_cascade(n, s, d)
    return ICGraph(n, s, d, p)


def check_edges(src: np.ndarray, dst: np.ndarray, prob: np.ndarray) -> int:
    """The node count of edge arrays, after the edge-list checks (errors name the edge index)."""
    arrays = {"src": np.asarray(src), "dst": np.asarray(dst), "prob": np.asarray(prob)}
    for name, a in arrays.items():
        if a.ndim != 1:
            raise ValueError(f"{name} must be 1-D (one entry per edge), got shape {a.shape}")
    sizes = [len(a) for a in arrays.values()]
    if len(set(sizes)) != 1:
        raise ValueError(f"src, dst and prob need one entry per edge; got sizes {sizes}")
    if sizes[0] == 0:
        raise ValueError("no edges: src, dst and prob are empty")
    for name in ("src", "dst"):
        if not np.issubdtype(arrays[name].dtype, np.integer):
            raise ValueError(f"{name} must hold integer node ids, got dtype {arrays[name].dtype}")
    if not np.issubdtype(arrays["prob"].dtype, np.number):
        raise ValueError(f"prob must hold numbers, got dtype {arrays['prob'].dtype}")
    us, vs = arrays["src"].tolist(), arrays["dst"].tolist()
    seen: dict[tuple[int, int], str] = {}
    for i, (u, v) in enumerate(zip(us, vs)):
        if u < 0 or v < 0:
            raise ValueError(f"edge {i}: node id {min(u, v)} is negative")
        problem = edge_problem(u, v, f"edge {i}", seen)
        if problem:
            raise ValueError(problem)
    return node_count(us, vs, [f"edge {i}" for i in range(len(us))], "edges")
