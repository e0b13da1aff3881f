"""JSON Lines files that users hand in: one object per non-blank line, errors naming the line.

Used by ``caption.date`` (captions and references) and ``apr.conrad`` (fixed past issues).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_objects(path: str | Path) -> list[tuple[int, Any]]:
    """``(line number, parsed value)`` for every non-blank line; ValueError naming the file and
    line of one that is not JSON, or the file when it is missing. Checking each value's fields
    is the caller's (its messages name what it expects)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    out = []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((no, json.loads(line)))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{no}: not JSON ({err.msg} at column {err.colno})") from err
    return out
