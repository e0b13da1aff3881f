"""Read users' numeric CSV files (feature matrices, valuations) with row-level errors.

A file is rows of comma-separated numbers; an optional first row of column names is skipped
when none of its fields parse as numbers. Every error names the file, the line and the column.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import numpy as np


def read_numeric_csv(
    path: str | os.PathLike[str], *, columns: int | None = None, what: str = "table"
) -> np.ndarray:
    """A float64 array ``[rows, columns]`` from ``path``.

    Raises ``ValueError`` naming the line and column of a row with the wrong number of fields,
    a field that is not a number, or a NaN/inf value; ``FileNotFoundError`` for a missing file.
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{what} file {file} does not exist")
    rows: list[list[float]] = []
    with file.open(newline="") as fh:
        for line_no, fields in enumerate(csv.reader(fh), start=1):
            if not fields or all(not f.strip() for f in fields):
                continue
            if not rows and line_no == 1 and not any(_is_number(f) for f in fields):
                continue  # header
            width = columns if columns is not None else (len(rows[0]) if rows else len(fields))
            if len(fields) != width:
                raise ValueError(
                    f"{what} {file}: line {line_no} has {len(fields)} fields, expected {width}"
                )
            rows.append([_parse(f, file, line_no, col, what) for col, f in enumerate(fields)])
    if not rows:
        raise ValueError(f"{what} {file}: no data rows")
    return np.asarray(rows, dtype=np.float64)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _parse(text: str, file: Path, line_no: int, col: int, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"{what} {file}: line {line_no} column {col}: {text.strip()!r} is not a number"
        ) from None
    if not math.isfinite(value):
        raise ValueError(
            f"{what} {file}: line {line_no} column {col}: value {text.strip()!r} "
            "is not finite (NaN or inf)"
        )
    return value


def load_regression_csv(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(X [n, p], y [n])`` from a CSV whose last column is the target."""
    table = read_numeric_csv(path, what="feature matrix")
    if table.shape[1] < 2:
        raise ValueError(
            f"feature matrix {path}: needs at least one feature column and a target "
            f"column, got {table.shape[1]} column(s)"
        )
    return table[:, :-1], table[:, -1]
