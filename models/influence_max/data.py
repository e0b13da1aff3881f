"""Read a user's edge list: ``u v [p]`` per line (comma, tab or space separated).

Node ids are integers 0..n-1 and every id in that range must appear in some edge (a gap usually
means a typo or a file relabelled by hand; an unused id would be a node that nothing can reach or
be reached from). Missing probabilities get the weighted-cascade value 1/indeg(v). Errors name
the line and the value.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np
from neuroedge.models.influence_max.functional import ICGraph, weighted_cascade


def _field_int(text: str, file: Path, line_no: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(
            f"edge list {file}: line {line_no}: {what} {text!r} is not an integer node id"
        ) from None
    if value < 0:
        raise ValueError(f"edge list {file}: line {line_no}: {what} {value} is negative")
    return value


def _field_prob(text: str, file: Path, line_no: int) -> float:
    try:
        p = float(text)
    except ValueError:
        raise ValueError(
            f"edge list {file}: line {line_no}: probability {text!r} is not a number"
        ) from None
    if not (math.isfinite(p) and 0.0 <= p <= 1.0):
        raise ValueError(f"edge list {file}: line {line_no}: probability {text} is not in [0, 1]")
    return p


def load_edge_list(path: str | os.PathLike[str]) -> ICGraph:
    """An ICGraph from ``path``; a header line (non-numeric first field) and '#' lines skip."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"edge list {file} does not exist")
    src, dst, prob = [], [], []
    width = None
    for line_no, raw in enumerate(file.read_text().splitlines(), start=1):
        fields = [f for f in re.split(r"[,\s]+", raw.strip()) if f]
        if not fields or fields[0].startswith("#"):
            continue
        if not src and not re.fullmatch(r"-?\d+", fields[0]):
            continue  # header
        if len(fields) not in (2, 3) or (width is not None and len(fields) != width):
            raise ValueError(
                f"edge list {file}: line {line_no} has {len(fields)} fields, "
                f"expected {width or '2 (u v) or 3 (u v p)'}"
            )
        width = len(fields)
        u = _field_int(fields[0], file, line_no, "source")
        v = _field_int(fields[1], file, line_no, "target")
        if u == v:
            raise ValueError(f"edge list {file}: line {line_no}: self-loop {u} -> {v}")
        src.append(u)
        dst.append(v)
        if width == 3:
            prob.append(_field_prob(fields[2], file, line_no))
    if not src:
        raise ValueError(f"edge list {file}: no edges")
    s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    n = int(max(s.max(), d.max())) + 1
    missing = np.setdiff1d(np.arange(n), np.concatenate([s, d]))
    if missing.size:
        raise ValueError(
            f"edge list {file}: node ids must be 0..{n - 1} with every id in some "
            f"edge; ids {missing[:10].tolist()} appear in no edge (disconnected)"
        )
    p = np.asarray(prob) if width == 3 else weighted_cascade(n, s, d)
    return ICGraph(n, s, d, p)
