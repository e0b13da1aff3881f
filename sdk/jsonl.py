"""JSON Lines files that users hand in: one object per non-blank line, errors naming the line.

Used by ``caption.date`` (captions and references) and ``apr.conrad`` (fixed past issues).
Files are read as UTF-8; a leading byte-order mark (as Windows editors write) is dropped.
"""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path
from typing import Any


def read_objects(path: str | Path) -> list[tuple[int, Any]]:
    """``(line number, parsed value)`` for every non-blank line; ValueError naming the file and
    line of one that is not JSON, the file, line and byte offset of a byte that is not UTF-8,
    or the file when it is missing or a directory. Checking each value's fields is the
    caller's (its messages name what it expects)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, not a JSON Lines file")
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    out = []
    # Lines end at \n, \r\n or a lone \r only: str.splitlines() also splits at U+2028,
    # U+2029 and U+0085, which JSON allows raw inside strings (json.dumps with
    # ensure_ascii=False writes them so); a raw \r or \n cannot be inside a JSON string.
    for no, line in enumerate(re.split(r"\r\n|\r|\n", _read_text(path)), 1):
        if not line.strip():
            continue
        try:
            out.append((no, json.loads(line)))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{no}: not JSON ({err.msg} at column {err.colno})") from err
        except RecursionError:  # json's decoder recurses once per nested array or object
            raise ValueError(
                f"{path}:{no}: JSON nested too deeply to read (arrays or objects inside one "
                "another beyond Python's recursion limit)"
            ) from None
    return out


def _read_text(path: Path) -> str:
    """The file's text as UTF-8 without a leading BOM; a ValueError naming the file, the line
    and the byte offset (0-based, in the file) where it is not UTF-8."""
    raw = path.read_bytes()
    skip = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        return raw[skip:].decode("utf-8")
    except UnicodeDecodeError as err:
        at = skip + err.start  # in the file, the BOM included
        line = raw[:at].count(b"\n") + 1
        raise ValueError(
            f"{path}:{line}: byte {raw[at : at + 1]!r} at byte offset {at} is not UTF-8 text; "
            "save the file as UTF-8"
        ) from None
