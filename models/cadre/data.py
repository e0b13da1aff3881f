"""Data for causal.cadre: the synthetic nonparametric time-series generator and readers for
climate series users bring (CSV, NetCDF via xarray).

Generator (after the paper's setting; every constant is a decision recorded here):

* latents z_t in R^dz, first-order Markov (the 3-step context {x_t-1, x_t, x_t+1} assumes it):
  z_t = A leaky(W z_t-1) + sigma_c * eps_t, eps ~ Laplace(0, 1), then the instantaneous chain
  z_t,j += 0.4 z_t,j-1; A, W random orthogonal scaled so the map contracts (0.8), and the
  innovation scales sigma_c ~ U(0.3, 1.5)^dz change with the domain c (the nonstationarity
  the identifiability theory needs);
* observed x_t in R^dx on a random ER DAG B (edge probability ``edge_prob``, weights
  +-U(0.5, 1.0), strictly lower triangular under a random permutation):
  x_t = B x_t + g(z_t) + s_t with g a 2-layer LeakyReLU(0.2) mixing with orthogonal weights and
  the endogenous noise s_t,i = 0.3 (1 + 0.5 tanh(a_i . z_t)) n_t,i, n ~ N(0, 1);
* sequences start after a 20-step burn-in; each sequence has one domain.
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
from neuroedge.errors import InputError


@dataclass(frozen=True)
class CausalSeries:
    """Windows of a synthetic process with its ground truth."""

    x: np.ndarray = field(repr=False)  # [n, T, dx] observations
    z: np.ndarray = field(repr=False)  # [n, T, dz] true latents
    domain: np.ndarray = field(repr=False)  # [n] domain index
    graph: np.ndarray = field(repr=False)  # [dx, dx] B, B[i, j] != 0 means x_j -> x_i


def leaky(x: np.ndarray, slope: float = 0.2) -> np.ndarray:
    return np.where(x > 0, x, slope * x)


def random_dag(d: int, edge_prob: float, rng: np.random.Generator) -> np.ndarray:
    """Weighted ER DAG: strictly lower triangular under a random node permutation."""
    lower = np.tril(rng.uniform(size=(d, d)) < edge_prob, k=-1)
    weights = rng.uniform(0.5, 1.0, (d, d)) * rng.choice([-1.0, 1.0], (d, d))
    perm = rng.permutation(d)
    return (lower * weights)[np.ix_(perm, perm)]


def _orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    from scipy.stats import ortho_group

    return ortho_group.rvs(d, random_state=rng) if d > 1 else np.ones((1, 1))


def generate(
    n: int = 4000,
    length: int = 5,
    dx: int = 8,
    dz: int = 2,
    domains: int = 4,
    edge_prob: float = 0.3,
    seed: int = 0,
) -> CausalSeries:
    """``n`` windows of ``length`` steps of the observed-DAG + hidden-dynamics process."""
    rng = np.random.default_rng(seed)
    a_mat, w_mat = 0.8 * _orthogonal(dz, rng), _orthogonal(dz, rng)
    sigma = rng.uniform(0.3, 1.5, (domains, dz))
    graph = random_dag(dx, edge_prob, rng)
    mix1 = _orthogonal(max(dx, dz), rng)[:dx, :dz]
    mix2 = _orthogonal(dx, rng)
    noise_dir = rng.standard_normal((dx, dz))
    domain = rng.integers(domains, size=n)
    burn = 20
    z = np.zeros((n, dz))
    zs = []
    for t in range(burn + length):
        z = leaky(z @ w_mat.T) @ a_mat.T + sigma[domain] * rng.laplace(size=(n, dz))
        for j in range(1, dz):
            z[:, j] += 0.4 * z[:, j - 1]
        if t >= burn:
            zs.append(z.copy())
    z_seq = np.stack(zs, axis=1)
    g = leaky(leaky(z_seq @ mix1.T) @ mix2.T)
    s = 0.3 * (1 + 0.5 * np.tanh(z_seq @ noise_dir.T)) * rng.standard_normal(g.shape)
    x = (g + s) @ np.linalg.inv(np.eye(dx) - graph).T
    return CausalSeries(x.astype(np.float32), z_seq.astype(np.float32), domain, graph)


def windows(
    series: np.ndarray, length: int, period: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Standardised overlapping windows [n, length, d] and their domain (start index mod
    ``period``, e.g. the month for monthly data; 0 when no period)."""
    series = np.asarray(series, dtype=np.float64)
    if series.ndim != 2 or len(series) < length:
        raise ValueError(f"series: expected [T >= {length}, d], got {list(series.shape)}")
    z = series - series.mean(0)
    z /= series.std(0) + 1e-12
    z32 = z.astype(np.float32)  # float32 before the windows copy each step ``length`` times
    del z
    n = len(z32) - length + 1
    view = np.lib.stride_tricks.sliding_window_view(z32, length, axis=0)  # [n, d, length]
    domain = (np.arange(n) % period) if period else np.zeros(n, dtype=int)
    return np.ascontiguousarray(view.transpose(0, 2, 1)), domain


def read_csv_series(
    path: str | os.PathLike[str], time_column: str | None = None
) -> tuple[np.ndarray, list[str]]:
    """A numeric [T, d] series from a CSV with a header row; gaps (empty, ``nan`` or ``inf``
    cells) and ragged rows raise ``InputError`` (a ValueError) naming the file row (1-based,
    header = row 1) and column.

    The file is read as UTF-8 (a leading byte-order mark, as Excel writes, is dropped; other
    bytes are refused naming the line); blank lines are skipped. A first row of numbers only is
    refused: the file has no header (as ``np.savetxt`` writes) and its first row would become
    the column names. ``time_column`` names a column that is the time axis, not a variable: its
    values (numbers or ISO dates) must increase (oldest row first; a newest-first file is
    refused, never read backwards) by an even step. A first column that is not numeric is
    refused with a hint to name it.

    A first column with an empty name is never a variable: it is the index ``DataFrame.to_csv``
    writes unless ``index=False``. When it holds dates (an unnamed ``DatetimeIndex``) and no
    other ``time_column`` is named, it is the time column; when it holds exactly 0, 1, ..., T-1
    (a ``RangeIndex``) it is dropped; anything else is refused as a pandas index. An empty name
    in any other column is refused."""
    path = Path(path)
    _check_utf8(path)
    with closing(_csv_rows(path)) as records:
        try:
            return _read_records(path, records, time_column)
        except InputError:
            for _ in records:  # a record further on that is not CSV is named first, as ever
                pass
            raise


def _read_records(
    path: Path, records: Iterator[tuple[int, list[str]]], time_column: str | None
) -> tuple[np.ndarray, list[str]]:
    """``read_csv_series`` on the non-blank ``records``, one at a time: the values go into one
    float64 buffer, only the index and time column's cells are kept as text."""
    header_record, first = next(records, None), next(records, None)
    if header_record is None or first is None:
        raise InputError(f"{path}: needs a header row and at least one data row")
    header = [h.strip() for h in header_record[1]]
    _check_header(path, header, time_column)
    if header[0] == "" and time_column is None:
        time_column = ""  # the unnamed index is the time column, or dropped (_unnamed_index)
    keep = [i for i, h in enumerate(header) if h not in (time_column, "")]
    t = None if time_column is None else header.index(time_column)
    # the (row, cell) text of the unnamed index and the time column, for their checks
    text_columns = {c for c in (t, 0 if header[0] == "" else None) if c is not None}
    cells: dict[int, list[tuple[int, str]]] = {c: [] for c in text_columns}
    values, n_rows = array("d"), 0
    for r, row in chain([first], records):
        if len(row) != len(header):
            raise InputError(
                f"{path}: row {r} has {len(row)} fields, the header has "
                f"{len(header)} (mismatched length)"
            )
        values.extend(_row_values(path, r, header, keep, row, time_column))
        n_rows += 1
        for c, kept in cells.items():
            kept.append((r, row[c].strip()))
    if header[0] == "":
        _unnamed_index(path, cells[0], time_column == "")
    if t is not None:
        _check_regular(path, _times(path, cells[t]), cells[t])
    table = np.frombuffer(values, dtype=np.float64).reshape(n_rows, len(keep))
    return table, [header[i] for i in keep]


def _row_values(
    path: Path, r: int, header: list[str], keep: list[int], row: list[str], time: str | None
) -> list[float]:
    """The variable cells of one row (``_cell`` names the first that is not a finite number)."""
    try:
        values = [float(row[i]) for i in keep]  # float() strips white space as _cell does
    except ValueError:
        values = []
    if len(values) != len(keep) or not all(map(math.isfinite, values)):
        values = [_cell(path, r, header, i, row[i].strip(), time) for i in keep]
    return values


def _check_header(path: Path, header: list[str], time_column: str | None) -> None:
    """Refuse a header of numbers only (no header row), an empty name past the first column
    and a ``time_column`` that is not a column."""
    named = [h for h in header if h]
    if named and all(_is_number(h) for h in named):
        raise InputError(
            f"{path}: row 1 ({', '.join(header)}) is all numbers: the file has no header row "
            "(as np.savetxt writes), so its first row would become the column names; add a "
            "first row naming the columns (e.g. np.savetxt(..., header='a,b', comments=''))"
        )
    for i, h in enumerate(header[1:], start=2):
        if not h:
            raise InputError(f"{path}: row 1: column {i} has no name; name every column")
    if time_column is not None and time_column not in header:
        raise InputError(f"{path}: no time column {time_column!r} (columns {header})")


def _is_number(text: str) -> bool:
    try:
        return bool(np.isfinite(float(text)))
    except ValueError:
        return False


def _unnamed_index(path: Path, cells: list[tuple[int, str]], is_time: bool) -> None:
    """Accept the unnamed first column (pandas' index) when it holds 0, 1, ..., T-1 or, as the
    time column (``is_time``), dates; refuse it otherwise."""
    try:
        times, unit = _times(path, cells)
    except InputError:
        times, unit = None, ""
    if unit and is_time:
        return  # an unnamed DatetimeIndex: the time column, checked by the caller
    if times is not None and not unit and np.array_equal(times, np.arange(len(times))):
        return  # a RangeIndex: row numbers, dropped
    raise InputError(
        f"{path}: column 1 has no name and holds {', '.join(repr(c) for _, c in cells[:3])}"
        ", ...: it looks like a pandas index, not a variable; write the file with "
        "DataFrame.to_csv(..., index=False), or name the column (and pass time_column=NAME if "
        "it is the time axis)"
    )


def _check_utf8(path: Path) -> None:
    """Refuse a file that is not UTF-8 before any record is read (as when the whole file was
    decoded first); the shared reader's check and message (the line and the byte)."""
    from neuroedge.models.self_distill.data import check_utf8

    try:
        check_utf8(path, "series")
    except ValueError as err:
        raise InputError(str(err)) from None


def _csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(1-based file row, fields) of every non-blank row of ``path`` (UTF-8: _check_utf8),
    read one record at a time."""
    from neuroedge.models.self_distill.data import csv_records

    with path.open(encoding="utf-8-sig", newline="") as text:
        try:  # not CSV: the message names the file and the line the record starts on
            for line, row in csv_records(text, path, "series"):
                if any(f.strip() for f in row):
                    yield line, row
        except ValueError as err:
            raise InputError(str(err)) from None


def _cell(
    path: Path, r: int, header: list[str], i: int, cell: str, time_column: str | None
) -> float:
    """The value of one variable cell; ``InputError`` names row, column and cell."""
    try:
        value = float(cell)
    except ValueError:
        hint = ""
        if i == 0 and time_column is None:
            hint = (
                f"; if {header[0]!r} is the time axis (e.g. dates), pass "
                f"time_column={header[0]} so it is not read as a variable"
            )
        raise InputError(
            f"{path}: row {r}, column {header[i]!r}: {cell!r} is not a number{hint}"
        ) from None
    if not np.isfinite(value):
        raise InputError(f"{path}: row {r}, column {header[i]!r} is a gap ({cell!r})")
    return value


def _times(path: Path, cells: list[tuple[int, str]]) -> tuple[np.ndarray, str]:
    """(time values, their unit): numbers as they are; ISO dates (``2020-01-31``, optionally
    with a time of day) in months when every date falls on the same day of its month (or on
    each month's last day) at the same time of day, as monthly data does whose months differ
    in length; else in seconds."""
    try:
        return np.asarray([float(c) for _, c in cells]), ""
    except ValueError:
        pass
    stamps = []
    for r, cell in cells:
        try:
            stamps.append(np.datetime64(cell, "s"))
        except ValueError:
            raise InputError(
                f"{path}: row {r}, time column: {cell!r} is neither a number nor an ISO date "
                "(YYYY-MM-DD, optionally with THH:MM:SS)"
            ) from None
    secs = np.asarray(stamps).astype(np.int64)
    months = np.asarray(stamps).astype("datetime64[M]")
    into = secs - months.astype("datetime64[s]").astype(np.int64)  # seconds into the month
    to_end = (months + 1).astype("datetime64[s]").astype(np.int64) - secs  # and to its end
    if len(np.unique(into)) == 1 or len(np.unique(to_end)) == 1:
        return months.astype(np.int64).astype(np.float64), " months"
    return secs.astype(np.float64), " s"


def _check_regular(path: Path, times: tuple[np.ndarray, str], cells: list[tuple[int, str]]) -> None:
    """Refuse a time that does not increase (a newest-first or unsorted file: never read
    backwards) and an uneven step, naming the file row and its time cell."""
    steps, unit = np.diff(times[0]), times[1]
    back = np.flatnonzero(~(steps > 0))
    if back.size:
        (r0, t0), (r1, t1) = cells[int(back[0])], cells[int(back[0]) + 1]
        raise InputError(
            f"{path}: row {r1}: time {t1!r} is not after row {r0}'s {t0!r}; the rows must run "
            "oldest first (sort the file by its time column; a newest-first file would be "
            "read backwards)"
        )
    if len(steps) == 0:
        return
    values, counts = np.unique(steps, return_counts=True)
    usual = values[np.argmax(counts)]  # the most common step (the smallest on ties)
    odd = np.flatnonzero(~np.isclose(steps, usual, rtol=1e-6, atol=0))
    if odd.size:
        r = cells[int(odd[0]) + 1][0]
        raise InputError(
            f"{path}: row {r}: time step {steps[odd[0]]:g}{unit} differs from the usual "
            f"{usual:g}{unit} (a gap in the series)"
        )


def read_netcdf_series(
    path: str | os.PathLike[str],
    variables: list[str] | None = None,
    time_dim: str = "time",
    check_width: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, list[str]]:
    """A [T, d] series from NetCDF: each variable flattened over its non-time dimensions
    (e.g. lat x lon grid points); NaN gaps and mismatched time lengths name the element.
    ``check_width(d)`` runs on the file's metadata, before any variable's values are read (a
    fine grid holds millions of points)."""
    import xarray as xr

    path = Path(path)
    with xr.open_dataset(path) as ds:
        names = variables or [v for v in ds.data_vars if time_dim in ds[v].dims]
        if not names:
            raise ValueError(f"{path}: no variable has a {time_dim!r} dimension")
        if check_width is not None:
            present = [ds[n] for n in names if n in ds]
            check_width(sum(v.size // max(v.sizes.get(time_dim, 1), 1) for v in present))
        columns, labels, length = [], [], None
        for name in names:
            if name not in ds:
                raise ValueError(f"{path}: no variable {name!r} (has {list(ds.data_vars)})")
            arr = ds[name].transpose(time_dim, ...).values.astype(np.float64)
            arr = arr.reshape(len(arr), -1)
            if length is not None and len(arr) != length:
                raise ValueError(
                    f"{path}: variable {name!r} has {len(arr)} time steps, "
                    f"{names[0]!r} has {length} (mismatched lengths)"
                )
            length = len(arr)
            bad = np.argwhere(~np.isfinite(arr))
            if len(bad):
                raise ValueError(
                    f"{path}: variable {name!r} has a gap (NaN) at {time_dim} "
                    f"index {int(bad[0][0])}, element {int(bad[0][1])}"
                )
            columns.append(arr)
            labels += [f"{name}[{k}]" for k in range(arr.shape[1])]
    return np.concatenate(columns, axis=1), labels
