"""Datasets of the UQ comparison: scikit-learn's bundled tables, a synthetic regression, CSVs.

All inputs are standardised with training statistics; regression targets are standardised too.
Column scales are floored at a tenth of the median column scale: a near-constant column (a
digits corner pixel that is 0 in almost every training image) would otherwise map a rare test
value to hundreds of standard deviations, and the full-network Jacobian (which scales with the
input) would turn that one pixel into the whole predictive variance. The OOD set is 3 N(0, I) in
that standardised space, the same
construction for every dataset so AUROCs are comparable across them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

DATASETS = ("synthetic", "diabetes", "breast_cancer", "wine", "digits")


@dataclass(frozen=True)
class Split:
    """A standardised train/test split plus an OOD set."""

    name: str
    task: str  # "regression" or "classification"
    x_train: np.ndarray  # [n, d] float64
    y_train: np.ndarray  # [n] float64 (regression) or int64 class ids
    x_test: np.ndarray
    y_test: np.ndarray
    x_ood: np.ndarray  # [n_ood, d]
    classes: int  # 1 for regression


def synthetic_regression(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """d = 8, y = sin(2 x1) + 0.5 x2^2 - x3 x4 + 0.2 eps."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 8))
    y = np.sin(2 * x[:, 0]) + 0.5 * x[:, 1] ** 2 - x[:, 2] * x[:, 3] + 0.2 * rng.standard_normal(n)
    return x, y


def _raw(name: str, seed: int, n_synthetic: int) -> tuple[np.ndarray, np.ndarray, str]:
    if name == "synthetic":
        x, y = synthetic_regression(n_synthetic, seed)
        return x, y, "regression"
    from sklearn import datasets

    loaders = {
        "diabetes": datasets.load_diabetes,
        "breast_cancer": datasets.load_breast_cancer,
        "wine": datasets.load_wine,
        "digits": datasets.load_digits,
    }
    if name not in loaders:
        raise ValueError(f"unknown dataset {name!r}; valid: {', '.join(DATASETS)}")
    x, y = loaders[name](return_X_y=True)
    return x.astype(np.float64), y, "regression" if name == "diabetes" else "classification"


def make_split(
    x: np.ndarray, y: np.ndarray, task: str, name: str, seed: int, test_fraction: float = 0.3
) -> Split:
    """Shuffle, split, standardise with train statistics and draw the OOD set."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(y))
    cut = round(len(y) * (1 - test_fraction))
    tr, te = idx[:cut], idx[cut:]
    mu, sd = x[tr].mean(0), x[tr].std(0)
    floor = 0.1 * float(np.median(sd[sd > 0])) if (sd > 0).any() else 1.0
    sd = np.maximum(sd, floor)
    xs = (x - mu) / sd
    if task == "regression":
        y = (y - y[tr].mean()) / y[tr].std()
        classes = 1
    else:
        y = y.astype(np.int64)
        classes = int(y.max()) + 1
    ood = 3.0 * rng.standard_normal((len(te), x.shape[1]))
    return Split(name, task, xs[tr], y[tr], xs[te], y[te], ood, classes)


def load_split(name: str, seed: int = 0, n_synthetic: int = 2000) -> Split:
    """One of DATASETS, split 70/30 (bundled with scikit-learn or generated; no downloads)."""
    x, y, task = _raw(name, seed, n_synthetic)
    return make_split(x, y, task, name, seed)


def load_csv_split(path: str | os.PathLike[str], task: str, seed: int = 0) -> Split:
    """A user's CSV: feature columns then the target (a class id for classification)."""
    from neuroedge.models.self_distill.data import load_regression_csv

    if task not in ("regression", "classification"):
        raise ValueError(f"task {task!r} is not one of regression, classification")
    x, y = load_regression_csv(path)
    if task == "classification":
        bad = (y != np.round(y)) | (y < 0)
        if bad.any():
            row = int(np.argmax(bad))
            raise ValueError(
                f"feature matrix {path}: data row {row} label {y[row]} is not a "
                "non-negative integer class id"
            )
    return make_split(x, y, task, os.fspath(path), seed)
