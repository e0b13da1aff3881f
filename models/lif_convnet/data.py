"""scikit-learn's bundled digits (1,797 real 8x8 scans, 10 classes), split reproducibly."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class DigitsSplit(NamedTuple):
    x_train: np.ndarray  # (N, 1, 8, 8) float32 in [0, 1]
    y_train: np.ndarray  # (N,) int64
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits_split(seed: int = 0, test_fraction: float = 0.2) -> DigitsSplit:
    """Stratified train/test split of the digits, pixel values scaled to [0, 1]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None]
    y = data.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    return DigitsSplit(x_tr, y_tr, x_te, y_te)


def direct_encoding(images: np.ndarray, steps: int) -> np.ndarray:
    """Present each image as a constant input current for ``steps`` steps: (T, N, ...)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    # a copy, always: at steps=1 ascontiguousarray kept the read-only broadcast view (numpy
    # counts a length-1 axis as contiguous), which torch.from_numpy warns about
    return np.broadcast_to(images[None], (steps, *images.shape)).copy()
