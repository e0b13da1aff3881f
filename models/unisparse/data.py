"""Data for UniSparse: scikit-learn's digits (bundled, default) and CIFAR-10 from a user folder.

CIFAR-10 is read from the standard "python version" batch folder (``data_batch_1`` ..
``data_batch_5``, ``test_batch``, each a pickled dict with ``b"data"`` (10000, 3072) uint8 and
``b"labels"``), which the user points to with ``--data PATH``. Nothing is downloaded. The
pickles are read with an unpickler that only rebuilds numpy arrays, so a hostile file cannot
run code.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import NamedTuple

import numpy as np
from neuroedge.models.lif_convnet.data import direct_encoding, load_digits_split

CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_TEST = "test_batch"
CIFAR_FILES = (*CIFAR_TRAIN, CIFAR_TEST)
CIFAR_MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)
CIFAR_STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)
_NUMPY_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
}

__all__ = ["CIFAR_FILES", "ImageSplit", "direct_encoding", "load_cifar10", "load_digits"]


class ImageSplit(NamedTuple):
    x_train: np.ndarray  # (N, C, H, W) float32
    y_train: np.ndarray  # (N,) int64
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits(seed: int = 0) -> ImageSplit:
    """The 1,797 real 8x8 digit scans, stratified 80/20 split, pixels in [0, 1]."""
    return ImageSplit(*load_digits_split(seed))


class _ArraysOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        if (module, name) in _NUMPY_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} (only numpy arrays)")


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        blob = _ArraysOnly(io.BytesIO(path.read_bytes()), encoding="bytes").load()
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        OverflowError,  # a length field past the largest size
        MemoryError,  # a length field too large to allocate
        SyntaxError,  # numpy parsing a corrupt dtype string (b"u1" -> b",1")
    ) as err:
        why = str(err) or f"{type(err).__name__} (a length field too large to allocate)"
        if isinstance(err, SyntaxError):
            why = f"an array dtype string that does not parse ({err.msg})"
        raise ValueError(
            f"{path}: not a CIFAR-10 python batch ({path.stat().st_size} bytes): {why}"
        ) from err
    if not isinstance(blob, dict) or b"data" not in blob or b"labels" not in blob:
        got = (
            f"keys [{', '.join(sorted(map(repr, blob)))}]"  # repr: keys of mixed types sort too
            if isinstance(blob, dict)
            else type(blob).__name__
        )
        raise ValueError(f"{path}: expected a dict with b'data' and b'labels', got {got}")
    data = _as_array(path, "data", blob[b"data"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise ValueError(f"{path}: b'data' must be uint8 (N, 3072), got {data.dtype} {data.shape}")
    if data.shape[0] == 0:
        raise ValueError(f"{path}: b'data' holds no images (shape {data.shape}); expected N >= 1")
    return data.reshape(-1, 3, 32, 32), _labels(path, blob[b"labels"], data.shape[0])


def _as_array(path: Path, key: str, value: object) -> np.ndarray:
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as err:  # ragged lists
        raise ValueError(
            f"{path}: b'{key}' is not an array ({type(value).__name__}): {err}"
        ) from err


def _labels(path: Path, value: object, n: int) -> np.ndarray:
    """The batch's labels as int64: N whole numbers in 0..9 (ints, or floats that are whole)."""
    labels = _as_array(path, "labels", value)
    want = f"b'labels' must be N={n} ints in 0..9"
    if labels.shape != (n,):
        what = type(value).__name__ if labels.dtype == object else f"shape {labels.shape}"
        raise ValueError(f"{path}: {want}, got {what}")
    if labels.dtype.kind not in "iuf":  # object (None, mixed), str, bool, complex
        raise ValueError(f"{path}: {want}, got {labels.dtype} values such as {labels[0]!r}")
    bad = ~np.isfinite(labels) | (labels != np.round(labels)) | (labels < 0) | (labels > 9)
    if bad.any():
        raise ValueError(f"{path}: {want}, got {labels[bad][0]!r} at index {int(bad.argmax())}")
    return labels.astype(np.int64)


def load_cifar10(root: str | os.PathLike[str]) -> ImageSplit:
    """CIFAR-10 from ``root`` (the ``cifar-10-batches-py`` folder), normalised per channel.

    Raises ``FileNotFoundError`` naming the folder and the expected files when any is missing,
    ``ValueError`` naming the file when one is malformed.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(
            f"CIFAR-10 folder {root} does not exist; expected a folder "
            f"holding {', '.join(CIFAR_FILES)} (the python version)"
        )
    missing = [name for name in CIFAR_FILES if not (root / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"CIFAR-10 folder {root} lacks {', '.join(missing)}; expected "
            f"{', '.join(CIFAR_FILES)} (the python version)"
        )
    train = [_read_batch(root / name) for name in CIFAR_TRAIN]
    x_test, y_test = _read_batch(root / CIFAR_TEST)
    x_train = np.concatenate([x for x, _ in train])
    y_train = np.concatenate([y for _, y in train])
    return ImageSplit(_normalise(x_train), y_train, _normalise(x_test), y_test)


def _normalise(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32) / 255.0
    return (x - CIFAR_MEAN.reshape(1, 3, 1, 1)) / CIFAR_STD.reshape(1, 3, 1, 1)
