"""Dataset layouts users have on disk: N-CARS folders and Gen1 ``.dat`` + ``*_bbox.npy`` pairs.

* N-CARS: ``<root>/<split>/{cars,background}/obj_<id>_td.dat`` (100 ms DAT recordings; label
  1 = car, 0 = background).
* Gen1 (Prophesee automotive): ``<root>/<split>/<name>_td.dat`` beside ``<name>_bbox.npy``, a
  structured array with fields ts (us), x, y, w, h (pixels, top-left corner), class_id,
  confidence, track_id. Newer Prophesee files name the time field ``t``; both are read.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from neuroedge.atomic import atomic_path
from neuroedge.events.core import EventFormatError
from neuroedge.npyfile import load_npy

BOX_DTYPE = np.dtype(
    [
        ("ts", "<u8"),
        ("x", "<f4"),
        ("y", "<f4"),
        ("w", "<f4"),
        ("h", "<f4"),
        ("class_id", "u1"),
        ("confidence", "<f4"),
        ("track_id", "<u4"),
    ]
)
NCARS_CLASSES = ("background", "cars")  # label = index


def _box_problem(table: np.ndarray, fields: tuple[str, ...]) -> tuple[int, str] | None:
    """``(row, what is wrong)`` for the first box ``BOX_DTYPE`` cannot hold faithfully, or
    None. ``fields`` are the ``BOX_DTYPE`` names present (the time field is ``ts``)."""
    if table.ndim != 1:
        return 0, f"box table must be a 1-D array of records, got shape {table.shape}"
    for name in fields:
        col = table[name]
        if col.ndim != 1 or col.dtype.kind not in "biuf":
            return 0, f"box field {name!r} must be a numeric scalar, got dtype {table.dtype[name]}"
        target = BOX_DTYPE[name]
        if target.kind == "f":
            col64 = col.astype(np.float64)
            bad = ~np.isfinite(col64) | (np.abs(col64) > float(np.finfo(target).max))
            want = f"a finite number within {target}"
            if name in ("w", "h"):
                bad |= col < 0
                want = "a finite number >= 0"
        else:
            info = np.iinfo(target)
            bad = ~np.isfinite(col) | (col != np.floor(col)) if col.dtype.kind == "f" else None
            bad = np.zeros(len(col), bool) if bad is None else bad
            bad |= (col < 0) | (col.astype(np.float64) > float(info.max))
            want = f"an integer in 0..{info.max}"
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return i, f"box row {i}: {name}={col[i].item()!r} is not {want}"
    return None


def _npy_data_offset(path: Path) -> int:
    """Byte offset of the first record of a .npy file (0 when the header does not parse)."""
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                np.lib.format.read_array_header_1_0(fh)
            else:
                np.lib.format.read_array_header_2_0(fh)
            return fh.tell()
    except (ValueError, OSError, EOFError):
        return 0


def read_boxes(path: str | os.PathLike[str]) -> np.ndarray:
    """A Gen1 ``*_bbox.npy`` file as a ``BOX_DTYPE`` array (``t`` renamed to ``ts``).

    Every value must fit its ``BOX_DTYPE`` field unchanged (integers in range, finite floats,
    w and h >= 0); otherwise EventFormatError names the file, the row's byte offset and value.
    """
    path = Path(path)
    try:
        raw = load_npy(path)
    except (ValueError, OSError, EOFError) as err:
        raise EventFormatError(path, 0, f"not a readable .npy box file ({err})") from err
    names = raw.dtype.names or ()
    time_field = "ts" if "ts" in names else "t"
    missing = [f for f in (time_field, "x", "y", "w", "h", "class_id") if f not in names]
    if missing:
        raise EventFormatError(path, 0, f"box array lacks fields {missing} (has {list(names)})")
    if time_field == "t":
        names = tuple("ts" if n == "t" else n for n in names)
        raw = raw.copy()
        raw.dtype.names = names
    present = tuple(n for n in BOX_DTYPE.names if n in names)
    problem = _box_problem(raw, present)
    if problem is not None:
        offset = _npy_data_offset(path)
        offset += problem[0] * raw.dtype.itemsize if raw.ndim == 1 else 0
        raise EventFormatError(path, offset, problem[1])
    out = np.zeros(len(raw), BOX_DTYPE)
    for name in present:
        out[name] = raw[name]
    return out


def write_boxes(path: str | os.PathLike[str], boxes: np.ndarray) -> Path:
    """Write ``boxes`` (1-D ``BOX_DTYPE``) atomically as a Gen1 ``*_bbox.npy``; boxes that
    ``read_boxes`` would refuse (non-finite floats, w or h < 0) raise ValueError first."""
    if not isinstance(boxes, np.ndarray) or boxes.dtype != BOX_DTYPE:
        got = boxes.dtype if isinstance(boxes, np.ndarray) else type(boxes).__name__
        raise TypeError(f"boxes must be a numpy array of dtype {BOX_DTYPE}, got {got}")
    problem = _box_problem(boxes, BOX_DTYPE.names)
    if problem is not None:
        raise ValueError(f"{path}: {problem[1]}")
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, boxes, allow_pickle=False)
    return Path(path)


def _recordings(folder: Path) -> list[Path]:
    """The ``.dat`` files (any case of the suffix) directly in ``folder``, sorted."""
    return sorted(f for f in folder.iterdir() if f.suffix.lower() == ".dat" and f.is_file())


def ncars_files(root: str | os.PathLike[str], split: str) -> list[tuple[Path, int]]:
    """``(path, label)`` for every N-CARS recording of ``split``, sorted by path.

    Both class folders must exist and hold at least one ``.dat`` file: a split with one class
    missing would otherwise train and score on a single class.
    """
    base = Path(root) / split
    layout = f"expected {base}/{{cars,background}}/obj_*_td.dat"
    if not base.is_dir():
        raise FileNotFoundError(f"{base}: no N-CARS split folder ({layout})")
    found = sorted(p.name for p in base.iterdir())
    out = []
    for label, name in enumerate(NCARS_CLASSES):
        folder = base / name
        if not folder.is_dir():
            raise FileNotFoundError(
                f"{folder}: missing N-CARS class folder {name!r} ({layout}; {base} has {found})"
            )
        files = _recordings(folder)
        if not files:
            raise FileNotFoundError(f"{folder}: N-CARS class folder has no .dat recordings")
        out += [(f, label) for f in files]
    return out


def gen1_files(root: str | os.PathLike[str], split: str) -> list[tuple[Path, Path]]:
    """``(events .dat, boxes .npy)`` pairs of a Gen1 split; a .dat without boxes is an error."""
    base = Path(root) / split
    pairs = []
    for dat in sorted(base.glob("*_td.dat")):
        boxes = dat.with_name(dat.name.removesuffix("_td.dat") + "_bbox.npy")
        if not boxes.is_file():
            raise FileNotFoundError(f"{dat}: no matching box file {boxes.name}")
        pairs.append((dat, boxes))
    if not pairs:
        raise FileNotFoundError(f"{base}: no Gen1 *_td.dat recordings")
    return pairs
