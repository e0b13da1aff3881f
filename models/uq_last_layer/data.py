"""Datasets of the UQ comparison: scikit-learn's bundled tables, a synthetic regression, CSVs.

All inputs are standardised with training statistics; regression targets are standardised too.
Column scales are floored at a tenth of the median column scale: a near-constant column (a
digits corner pixel that is 0 in almost every training image) would otherwise map a rare test
value to hundreds of standard deviations, and the full-network Jacobian (which scales with the
input) would turn that one pixel into the whole predictive variance. The OOD set is 3 N(0, I) in
that standardised space, the same
construction for every dataset so AUROCs are comparable across them.

The bench's ``datasets`` entries are names of DATASETS or a user's CSV given as
``"path/to/file.csv:regression"`` or ``"path/to/file.csv:classification"`` (feature columns,
then the target; an optional header row). Its rows are named after the file's name
(``file.csv/evidence/full``...), so two CSVs of the same name in one run are refused. A
classification target holds the class ids 0..C-1 (C >= 2, every class with a row); a
regression target must not be constant; a CSV needs at least ``MIN_ROWS`` rows, so that the
70/30 split leaves test rows and the MAP's held-out validation fifth of the training rows is
not empty. ``check_datasets`` checks every entry (and reads every CSV) before anything is
trained.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DATASETS = ("synthetic", "diabetes", "breast_cancer", "wine", "digits")
TASKS = ("regression", "classification")
MIN_ROWS = 10  # 7 training rows (1 of them validation), 3 test rows


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
    """Shuffle, split, standardise with train statistics and draw the OOD set.

    Refuses a split with no training or no test rows and a regression target that is constant
    on the training rows (its standardisation would divide by 0)."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(y))
    cut = round(len(y) * (1 - test_fraction))
    tr, te = idx[:cut], idx[cut:]
    if len(tr) == 0 or len(te) == 0:
        raise ValueError(
            f"dataset {name}: {len(y)} rows split {len(tr)} train / {len(te)} test "
            f"(test fraction {test_fraction}); both need rows, give at least {MIN_ROWS}"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        mu, sd = x[tr].mean(0), x[tr].std(0)
        _check_scale(name, np.isfinite(mu) & np.isfinite(sd))
        floor = 0.1 * float(np.median(sd[sd > 0])) if (sd > 0).any() else 1.0
        sd = np.maximum(sd, floor)
        xs = (x - mu) / sd
        _check_scale(name, np.isfinite(xs).all(0))
        y_sd = float(y[tr].std()) if task == "regression" else 1.0
    if not np.isfinite(y_sd):
        raise ValueError(
            f"dataset {name}: the regression target (last column) is too large to standardise "
            "(its std overflows float64); rescale it"
        )
    if task == "regression":
        if not y_sd > 0:
            raise ValueError(
                f"dataset {name}: the regression target is {y[tr][0]:g} on all {len(tr)} "
                f"training rows (seed {seed}); a constant target cannot be standardised"
            )
        y = (y - y[tr].mean()) / y_sd
        classes = 1
    else:
        y = y.astype(np.int64)
        classes = int(y.max()) + 1
    ood = 3.0 * rng.standard_normal((len(te), x.shape[1]))
    return Split(name, task, xs[tr], y[tr], xs[te], y[te], ood, classes)


def _check_scale(name: str, finite: np.ndarray) -> None:
    """ValueError naming the first feature column (0-based, as in the CSV) that is not
    ``finite``: its mean, std or standardised values overflow float64 (finite values near
    1e308 gave NaN metrics)."""
    if not finite.all():
        col = int(np.argmin(finite))
        raise ValueError(
            f"dataset {name}: feature column {col}: values too large to standardise (the mean, "
            "std or a standardised value overflows float64); rescale the column"
        )


def load_split(name: str, seed: int = 0, n_synthetic: int = 2000) -> Split:
    """One of DATASETS, split 70/30 (bundled with scikit-learn or generated; no downloads)."""
    x, y, task = _raw(name, seed, n_synthetic)
    return make_split(x, y, task, name, seed)


def read_csv_dataset(path: str | os.PathLike[str], task: str) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of a user's CSV (feature columns, then the target), checked for ``task``.

    Refused, naming the file, its 1-based line and the value: fewer than MIN_ROWS rows, a
    constant regression target, a class id that is not a non-negative integer, a single class,
    and class ids that are not 0..C-1 with every class present (sparse ids such as
    {0, 1000, 2000} would otherwise become 2001 output classes)."""
    from neuroedge.models.self_distill.data import load_xy_csv

    if task not in TASKS:
        raise ValueError(f"task {task!r} is not one of {', '.join(TASKS)}")
    x, y, lines = load_xy_csv(path)
    if len(y) < MIN_ROWS:
        raise ValueError(
            f"feature matrix {path}: {len(y)} data row(s); need at least {MIN_ROWS} so the "
            "70/30 split leaves test rows and the training rows leave validation rows"
        )
    if task == "classification":
        _check_labels(y, lines, path)
    elif np.ptp(y) == 0:
        raise ValueError(
            f"feature matrix {path}: the regression target (last column) is {y[0]:g} on every "
            f"row (lines {lines[0]}-{lines[-1]}); a constant target cannot be fitted"
        )
    return x, y


def _check_labels(y: np.ndarray, lines: np.ndarray, path: str | os.PathLike[str]) -> None:
    bad = (y != np.round(y)) | (y < 0)
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(
            f"feature matrix {path}: line {lines[row]} label {y[row]:g} is not a "
            "non-negative integer class id"
        )
    classes = np.unique(y)
    if len(classes) < 2:
        raise ValueError(
            f"feature matrix {path}: every row has the label {classes[0]:g}; classification "
            "needs at least 2 classes"
        )
    if classes[-1] != len(classes) - 1:
        missing = int(np.argmax(classes != np.arange(len(classes))))
        row = int(np.argmax(y > len(classes) - 1))
        raise ValueError(
            f"feature matrix {path}: line {lines[row]} label {y[row]:g}: class ids must be "
            f"0..C-1 with every class present; {len(classes)} distinct labels, but class "
            f"{missing} has no rows"
        )


def load_csv_split(path: str | os.PathLike[str], task: str, seed: int = 0) -> Split:
    """A user's CSV: feature columns then the target (a class id 0..C-1 for classification),
    checked as ``read_csv_dataset`` says, split 70/30 like DATASETS."""
    x, y = read_csv_dataset(path, task)
    return make_split(x, y, task, os.fspath(path), seed)


_VALID = (
    f"valid: {', '.join(DATASETS)}, or a CSV as 'path/to/file.csv:regression' or "
    "'path/to/file.csv:classification'"
)


@dataclass(frozen=True)
class DatasetEntry:
    """One ``datasets`` entry of the bench: a DATASETS name, or a CSV file and its task."""

    entry: str  # as written in the config
    label: str  # the first part of its report rows: the name, or the CSV's file name
    path: Path | None = None  # the CSV; None for DATASETS
    task: str | None = None  # the CSV's task

    def load(self, seed: int, n_synthetic: int) -> Split:
        if self.path is None or self.task is None:
            return load_split(self.entry, seed, n_synthetic)
        return load_csv_split(self.path, self.task, seed)


def parse_dataset(entry: Any) -> DatasetEntry:
    """The DatasetEntry of one ``datasets`` entry (its syntax, and a path that is a directory;
    files are read by ``check_datasets``); ConfigError naming the entry and the valid forms."""
    from neuroedge.errors import ConfigError

    if not isinstance(entry, str):
        raise ConfigError(
            f"datasets entry {entry!r} is a {type(entry).__name__}, not a string; {_VALID}"
        )
    if entry in DATASETS:
        return DatasetEntry(entry, entry)
    head, sep, tail = entry.rpartition(":")
    path, task = (head, tail) if sep and tail in TASKS else (entry, None)
    if path and Path(path).expanduser().is_dir():
        raise ConfigError(
            f"datasets entry {entry!r}: {path} is a directory, not a CSV file; {_VALID}"
        )
    if not path.lower().endswith(".csv"):
        if sep and head.lower().endswith(".csv"):
            raise ConfigError(
                f"datasets entry {entry!r}: task {tail!r} is not one of {', '.join(TASKS)}"
            )
        raise ConfigError(f"unknown dataset {entry!r}; {_VALID}")
    if task is None:
        raise ConfigError(
            f"datasets entry {entry!r}: give the CSV's task, as '{path}:regression' or "
            f"'{path}:classification'"
        )
    file = Path(path).expanduser()
    return DatasetEntry(entry, file.name, file, task)


def check_datasets(
    datasets: Any,
    seeds: Iterable[int] = (0,),
    n_synthetic: int = 2000,
    hidden: Mapping[str, int] | None = None,
) -> list[DatasetEntry]:
    """Every ``datasets`` entry parsed and checked before anything is trained: the list type
    (not empty), the names, distinct report rows, ``n_synthetic`` and every CSV's content and
    its split for each seed; given the hidden widths by task, also the memory of each full
    GLM (memory.py). ConfigError for the config, ValueError naming file and line for a CSV."""
    from neuroedge.errors import ConfigError
    from neuroedge.models.uq_last_layer.memory import SHAPES, check_full_glm_memory

    if isinstance(datasets, (str, bytes)) or not isinstance(datasets, (list, tuple)):
        raise ConfigError(
            f"datasets must be a list of entries, got the {type(datasets).__name__} "
            f'{datasets!r} (write datasets=["synthetic"] for one); {_VALID}'
        )
    if not datasets:
        raise ConfigError(f"datasets=[]: expected at least one entry; {_VALID}")
    entries = [parse_dataset(entry) for entry in datasets]
    seen: dict[str, str] = {}
    for item in entries:
        if item.label in seen:
            raise ConfigError(
                f"datasets entries {seen[item.label]!r} and {item.entry!r} would both be "
                f"reported as {item.label!r}; give each dataset once (rename a CSV file)"
            )
        seen[item.label] = item.entry
    if "synthetic" in seen and not int(n_synthetic) >= MIN_ROWS:
        raise ConfigError(f"n_synthetic={n_synthetic} is below the {MIN_ROWS} rows a split needs")
    for item in entries:
        if item.path is None or item.task is None:
            rows, d, outputs = SHAPES[item.entry]
            task = "regression" if outputs == 1 else "classification"
            if hidden is not None:
                check_full_glm_memory(item.entry, task, rows or n_synthetic, d, outputs, hidden)
            continue
        if not item.path.is_file():
            raise ConfigError(f"datasets entry {item.entry!r}: CSV file {item.path} does not exist")
        x, y = read_csv_dataset(item.path, item.task)
        outputs = 1 if item.task == "regression" else int(y.max()) + 1
        if hidden is not None:
            check_full_glm_memory(item.entry, item.task, len(y), x.shape[1], outputs, hidden)
        for seed in seeds:
            make_split(x, y, item.task, os.fspath(item.path), seed)
    return entries
