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


def read_boxes(path: str | os.PathLike[str]) -> np.ndarray:
    """A Gen1 ``*_bbox.npy`` file as a ``BOX_DTYPE`` array (``t`` renamed to ``ts``)."""
    path = Path(path)
    try:
        raw = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise EventFormatError(path, 0, f"not a readable .npy box file ({err})") from err
    names = raw.dtype.names or ()
    time_field = "ts" if "ts" in names else "t"
    missing = [f for f in (time_field, "x", "y", "w", "h", "class_id") if f not in names]
    if missing:
        raise EventFormatError(path, 0, f"box array lacks fields {missing} (has {list(names)})")
    out = np.zeros(len(raw), BOX_DTYPE)
    for name in BOX_DTYPE.names:
        source = time_field if name == "ts" else name
        if source in names:
            out[name] = raw[source]
    if (out["w"] < 0).any() or (out["h"] < 0).any():
        raise ValueError(f"{path}: boxes with negative width or height")
    return out


def write_boxes(path: str | os.PathLike[str], boxes: np.ndarray) -> Path:
    """Write ``boxes`` (``BOX_DTYPE``) atomically as a Gen1 ``*_bbox.npy``."""
    if boxes.dtype != BOX_DTYPE:
        raise TypeError(f"boxes must have dtype {BOX_DTYPE}, got {boxes.dtype}")
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, boxes, allow_pickle=False)
    return Path(path)


def ncars_files(root: str | os.PathLike[str], split: str) -> list[tuple[Path, int]]:
    """``(path, label)`` for every N-CARS recording of ``split``, sorted by path."""
    base = Path(root) / split
    if not base.is_dir():
        raise FileNotFoundError(
            f"{base}: no N-CARS split folder (expected {base}/{{cars,background}}/obj_*_td.dat)"
        )
    return [
        (f, label)
        for label, name in enumerate(NCARS_CLASSES)
        for f in sorted((base / name).glob("*.dat"))
    ]


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
