"""Text through numeric IO: strings as uint8 arrays of their UTF-8 bytes, 0-padded to a width.

Models whose inputs or outputs are text (``caption.date``, ``ltu.scout``) declare them as
uint8 ``IOSpec``s of this form; ``neuroedge run`` prints such an output back as text. Errors
are ValueErrors naming the array, the entry's index and the byte offset.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def encode(texts: Any, width: int, name: str = "text") -> np.ndarray:
    """uint8 ``[*shape, width]``: each string's UTF-8 bytes, 0-padded; ValueError naming the
    string that does not fit."""
    arr = np.asarray(texts, dtype=object)
    out = np.zeros((*arr.shape, width), np.uint8)
    for index, text in np.ndenumerate(arr):
        raw = str(text).encode("utf-8")
        if len(raw) > width:
            where = f" {list(index)}" if arr.ndim else ""
            raise ValueError(f"{name}{where} has {len(raw)} UTF-8 bytes > {width}")
        out[index][: len(raw)] = np.frombuffer(raw, np.uint8)
    return out


def decode_bytes(raw: bytes, where: str, padded: bool = True) -> str:
    """One entry's bytes as text (``padded``: up to the first 0, which only 0s may follow)."""
    if padded:
        text = raw.split(b"\0", 1)[0]
        if any(raw[len(text) :]):
            raise ValueError(f"{where}: bytes after the 0 padding at {len(text)}")
        raw = text
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{where}: not UTF-8 at byte {err.start}") from err


def decode(a: np.ndarray, name: str, padded: bool = True) -> np.ndarray:
    """uint8 ``[*shape, width]`` back to an object array of strings of ``shape`` (a str for a
    1-D array)."""
    if a.dtype != np.uint8 or a.ndim < 1:
        raise ValueError(f"{name}: expected uint8 UTF-8 codes, got dtype {a.dtype} {list(a.shape)}")
    if a.ndim == 1:
        return decode_bytes(a.tobytes(), name, padded)
    out = np.empty(a.shape[:-1], dtype=object)
    for index in np.ndindex(*a.shape[:-1]):
        out[index] = decode_bytes(a[index].tobytes(), f"{name} {list(index)}", padded)
    return out
