"""Read a user's edge list: ``u v [p]`` per line (comma, tab or space separated).

Node ids are integers 0..n-1 and every id in that range must appear in some edge (a gap usually
means a typo or a file relabelled by hand; an unused id would be a node that nothing can reach or
be reached from). Each directed edge appears once (a repeat would get two coin flips and count
twice in the in-degree) and no edge is a self-loop. Missing probabilities get the weighted-cascade
value 1/indeg(v). Quotes around a field are dropped (``"0","1","0.5"`` as spreadsheets write
it). At most one header line is skipped: the first non-blank, non-'#' line, and only when it
has 2 or more fields (2 not empty) of which none is a number (``u,v,p``, ``source target
weight``); any other line whose ids are not integers is an error. A header must have as many
fields as the edge lines, counting empty ones between commas (or 3, ``u v p``, over 2-field
lines: no p column), and a first field that is not empty: pandas' ``to_csv`` without
``index=False`` writes ``,source,target`` over rows ``0,1,0`` (index, u, v), which would
otherwise be read shifted (u = the index, p = the target). Lines end at ``\n``, ``\r\n`` or
``\r`` only, so line numbers are those of ``grep -n``. Ids are ASCII digits with an optional
sign and probabilities plain ASCII numbers (no ``1_0``, no other scripts' digits).
Errors name the line and the value.

Each line is one directed edge ``u -> v``. ``undirected=True`` adds ``v -> u`` for each line
(with the same p), for files that list each undirected edge once (``nx.write_edgelist`` of an
undirected graph); such a file must not list both directions of an edge. ``reads_as_one_way``
says whether no edge of a graph has its reverse (the bench notes that the file was read as
directed).

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
    """2 or more fields (empty ones counted), at least two of them not empty, and none of them
    a number: ``u,v,p`` and ``,source,target`` yes; ``O,1``, ``0;1`` or ``0;1,`` no."""
    return (
        len(fields) >= 2
        and sum(1 for f in fields if f) >= 2
        and not any(NUMBER.fullmatch(f) for f in fields)
    )


def header_fields(raw: str) -> list[str]:
    """A line's fields with the empty ones kept (``,source,target`` has 3: an unnamed first
    column), split at commas or, between fields without one, at white space."""
    return [_unquote(f) for f in re.split(r"\s*,\s*|\s+", raw.strip())]


def _width(raw: str) -> int:
    """A line's field count, empty fields counted except trailing ones (``u,v,`` has 2)."""
    fields = header_fields(raw)
    while fields and not fields[-1]:
        fields.pop()
    return len(fields)


def _check_header(file: Path, line_no: int, raw: str, first: tuple[int, str, list[str]]) -> None:
    """Refuse a header that would shift the columns: a first field that is empty (a pandas
    index column) or a field count other than the first edge line's, empty fields counted
    (but for a 3-field header over 2-field edge lines: no p column, the weighted cascade)."""
    where = f"edge list {file}: line {line_no}: header {raw.strip()!r}"
    if not header_fields(raw)[0]:
        raise ValueError(
            f"{where} has an empty first field: an unnamed index column, as pandas' to_csv "
            "writes without index=False; its rows would be read shifted (u = the index). "
            "Write the file with index=False or delete the first column"
        )
    count, width = _width(raw), _width(first[1])
    # u v p over u v edge lines is no shift (p left out: the weighted cascade); an edge line
    # of another width than 2 or 3 gets its own, clearer error
    named_p = (count, width) == (3, 2) and all(header_fields(raw)[:3])
    if count != width and not named_p and len(first[2]) in (2, 3):
        raise ValueError(
            f"{where} has {count} fields but the edge line {first[0]} has {width} "
            f"({first[1].strip()!r}); the header must name each column of the edge lines "
            "(u v or u v p), else the columns would be read shifted"
        )


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
    # lines end at \n, \r\n or \r only (str.splitlines also splits at \x0c, U+2028, ...):
    # line numbers are grep -n's
    text = read_text(file, "edge list")
    for line_no, raw in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        fields = [_unquote(f) for f in re.split(r"[,\s]+", raw.strip()) if f]
        if fields and not fields[0].startswith("#"):
            rows.append((line_no, raw, fields))
    if rows and looks_like_header(header_fields(rows[0][1])):
        line_no, raw, _ = rows.pop(0)
        if rows:
            _check_header(file, line_no, raw, rows[0])
    for line_no, raw, _ in rows:
        _check_no_empty_field(file, line_no, raw)
        if "{" in raw:  # nx.write_edgelist's default data=True writes each edge's attributes
            raise ValueError(
                f"edge list {file}: line {line_no}: {raw.strip()!r} holds an attribute dict, "
                "as networkx writes by default; write the file with "
                "nx.write_edgelist(g, path, data=False) (or give p as a third column)"
            )
    return rows


def _check_no_empty_field(file: Path, line_no: int, raw: str) -> None:
    """Refuse an empty field before the last one (``0,,1``, ``,0,1``): dropping it would read
    the next column in its place (a trailing comma, ``0,1,``, is fine)."""
    fields = header_fields(raw)
    while fields and not fields[-1]:
        fields.pop()
    if "" in fields:
        raise ValueError(
            f"edge list {file}: line {line_no}: {raw.strip()!r} has an empty field (column "
            f"{fields.index('')}, 0-based); its columns would be read shifted"
        )


def _add_reverses(
    edges: tuple[list[int], list[int], list[float], list[str]], seen: dict, file: Path
) -> None:
    """Append ``v -> u`` (same p) for each edge ``u -> v`` of ``edges`` (src, dst, prob,
    labels), refusing a file that already lists both directions of an edge."""
    src, dst, prob, labels = edges
    for u, v, label in zip(list(src), list(dst), list(labels)):
        if (v, u) in seen:
            raise ValueError(
                f"edge list {file}: {seen[(v, u)]} ({v} -> {u}) is the reverse of {label} "
                f"({u} -> {v}); with undirected=true list each edge once (a file that already "
                "lists both directions is read as it is with undirected=false)"
            )
        src.append(v)
        dst.append(u)
        labels.append(f"{label} reversed")
    prob.extend(list(prob))


def reads_as_one_way(graph: ICGraph) -> bool:
    """True when no edge of ``graph`` has its reverse (a file of one line per undirected edge
    reads so: the bench notes it, naming undirected=true)."""
    pairs = set(zip(graph.src.tolist(), graph.dst.tolist()))
    return not any((v, u) in pairs for u, v in pairs)


def load_edge_list(path: str | os.PathLike[str], undirected: bool = False) -> ICGraph:
    """An ICGraph from ``path`` (format and checks: see the module docstring); ``undirected``
    adds the reverse of every edge."""
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
    if undirected:
        _add_reverses((src, dst, prob, labels), seen, file)
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
