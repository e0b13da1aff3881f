"""Read users' numeric CSV files (feature matrices, valuations) with line-level errors.

A file is rows of comma-separated numbers; an optional first row of column names is skipped
when none of its fields parse as numbers (a row of numbers separated by ';', tabs or spaces is
refused, not taken for a header). Two first rows pandas writes are refused with what to do:
one whose first field is empty (``DataFrame.to_csv`` without ``index=False``: the row index
would be read as a feature) and one that is exactly ``0,1,...,p-1`` (the column numbers of a
DataFrame without column names, or a data row: refused rather than guessed). Files are read as
UTF-8; a leading byte-order mark (as Excel writes) is dropped. Every error names the file, the
1-based line of the file and the column (0-based, as the fields of a row) and the offending
value.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
import os
import re
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

import numpy as np


def read_numeric_csv(
    path: str | os.PathLike[str], *, columns: int | None = None, what: str = "table"
) -> np.ndarray:
    """A float64 array ``[rows, columns]`` from ``path``.

    Raises ``ValueError`` naming the line and column of a row with the wrong number of fields,
    a field that is not a number, or a NaN/inf value, or the line of a byte that is not UTF-8;
    ``FileNotFoundError`` for a missing file. ``read_numeric_csv_lines`` also returns the line
    of every row.
    """
    return read_numeric_csv_lines(path, columns=columns, what=what)[0]


def read_numeric_csv_lines(
    path: str | os.PathLike[str], *, columns: int | None = None, what: str = "table"
) -> tuple[np.ndarray, np.ndarray]:
    """``(table [rows, columns], lines [rows])``: the table and the 1-based file line of each
    row (blank lines and the header are skipped, so row k is rarely line k + 1).

    The file is read as a stream into one float64 buffer (peak memory about the table's size,
    not the file's text held several times over); a byte that is not UTF-8 anywhere in the file
    is reported before any other error, as when the whole file was decoded first."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{what} file {file} does not exist")
    out = (array("d"), array("q"))  # the values row after row, the line of each row
    try:
        with open(file, encoding="utf-8-sig", newline="") as text:
            width = _read_table(text, file, columns, what, out)
    except UnicodeDecodeError:
        read_text(file, what)  # raises the ValueError naming the line and the byte
        raise
    except ValueError:
        check_utf8(file, what)  # a byte that is not UTF-8, even after the bad row, comes first
        raise
    values, lines = out
    if not lines:
        raise ValueError(f"{what} {file}: no data rows")
    table = np.frombuffer(values, dtype=np.float64).reshape(len(lines), width)
    return table, np.frombuffer(lines, dtype=np.int64)


def _read_table(
    text: TextIO, file: Path, columns: int | None, what: str, out: tuple[array, array]
) -> int | None:
    """Read the rows of the open file into ``out``, one CSV record at a time; the width of a
    row."""
    return _read_rows(csv_records(text, file, what), file, columns, what, out)


def _read_rows(
    records: Iterable[tuple[int, list[str]]],
    file: Path,
    width: int | None,
    what: str,
    out: tuple[array, array],
) -> int | None:
    """Read the data rows of ``records`` into ``out``; the width of a row (``width``, or the
    first data row's). Plain finite numbers of the width take a fast path; any other row gets
    the checks that name its problem."""
    for line_no, fields in records:
        row = _plain_row(fields, width) if line_no > 1 else None
        if row is None:
            if not fields or all(not f.strip() for f in fields):
                continue
            if line_no == 1:
                _check_pandas_header(fields, file, what)
                if not any(_is_number(f) for f in fields):
                    _check_header(fields, file, what)
                    continue  # header
            expected = width if width is not None else len(fields)
            if len(fields) != expected:
                raise ValueError(
                    f"{what} {file}: line {line_no} has {len(fields)} fields, expected {expected}"
                )
            row = [_parse(f, file, line_no, col, what) for col, f in enumerate(fields)]
        out[0].extend(row)
        out[1].append(line_no)
        if width is None:
            width = len(row)
    return width


def _plain_row(fields: list[str], width: int | None) -> list[float] | None:
    """The values of a row of ``width`` plain (ASCII, no '_'), finite numbers; None for any
    other row, which ``_parse`` then reads or refuses by name (a sum that overflows only sends
    a good row that way)."""
    if not fields or (width is not None and len(fields) != width):
        return None
    try:
        row = list(map(float, fields))
    except ValueError:
        return None
    joined = "".join(fields)
    if "_" in joined or not joined.isascii() or not math.isfinite(sum(row)):
        return None
    return row


def csv_records(
    text: str | Iterable[str], file: Path, what: str, *, offset: int = 0
) -> Iterator[tuple[int, list[str]]]:
    """``(line the record ends on, its fields)`` of each CSV record of ``text`` (a string, or
    its lines as a file opened with ``newline=""`` yields them; ``offset`` lines before them);
    a ValueError naming the file and the line where a record that does not read as CSV starts
    (one stray quote runs a field on to the end of the file, past csv's field size limit)."""
    reader = csv.reader(io.StringIO(text, newline="") if isinstance(text, str) else text)
    start = offset + 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise ValueError(
                f"{what} {file}: line {start}: the record starting there is not CSV ({err}; "
                "an unclosed '\"' quote?)"
            ) from None
        yield offset + reader.line_num, fields
        start = offset + reader.line_num + 1


def read_text(file: Path, what: str) -> str:
    """The file's text as UTF-8 without a leading BOM; a ValueError naming the file, the line
    and the byte where it is not UTF-8."""
    raw = file.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:  # its offset counts from after a BOM
        at = err.start + len(codecs.BOM_UTF8) * raw.startswith(codecs.BOM_UTF8)
        before = raw[:at]  # lines end at \n, \r\n and a bare \r, as the reader splits them
        line = before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n") + 1
        raise ValueError(
            f"{what} {file}: line {line}: byte {raw[at : at + 1]!r} is not "
            "UTF-8 text; save the file as UTF-8 (CSV UTF-8)"
        ) from None


def check_utf8(file: Path, what: str) -> None:
    """``read_text``'s ValueError if ``file`` is not UTF-8, checked in blocks (a valid file's
    text is never held whole)."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    with open(file, "rb") as raw:
        try:
            while block := raw.read(1 << 18):
                decoder.decode(block)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            read_text(file, what)  # raises the ValueError naming the line and the byte
            raise


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_SEPARATORS = {";": "';'", "\t": "a tab", " ": "spaces", "|": "'|'"}


def _other_separator(text: str) -> str | None:
    """The name of the separator (not a comma) that ``text`` is numbers joined by, if any."""
    for sep, name in _SEPARATORS.items():
        parts = text.split() if sep == " " else text.split(sep)
        if len(parts) > 1 and all(_is_number(p) for p in parts):
            return name
    return None


def _check_header(fields: list[str], file: Path, what: str) -> None:
    """A first row without numbers is a header, unless it is numbers joined by ';', a tab..."""
    for col, text in enumerate(fields):
        sep = _other_separator(text)
        if sep is not None:
            raise ValueError(
                f"{what} {file}: line 1 column {col} (0-based): {text.strip()!r} is numbers "
                f"separated by {sep}; separate the fields of a row with commas"
            )


def _column_numbers(fields: list[str]) -> bool:
    """Whether ``fields`` are exactly 0, 1, ..., as pandas names the columns of a DataFrame
    built without column names."""
    return all(f.strip() == str(k) for k, f in enumerate(fields))


def _check_pandas_header(fields: list[str], file: Path, what: str) -> None:
    """Refuse a first row as pandas writes it for a row index or for unnamed columns."""
    first, rest = fields[0].strip(), fields[1:]
    named = all(f.strip() and not _is_number(f) for f in rest)
    reread = re.fullmatch(r"Unnamed: \d+", first) is not None  # an index read back and rewritten
    if len(fields) > 1 and (not first or reread) and (named or _column_numbers(rest)):
        raise ValueError(
            f"{what} {file}: line 1: the first column is named {first!r}, as pandas writes the "
            "row index (DataFrame.to_csv without index=False); the index would be read as a "
            "feature. Write the file with to_csv(path, index=False)"
        )
    if _column_numbers(fields):
        row = ",".join(f.strip() for f in fields)
        raise ValueError(
            f"{what} {file}: line 1 is {row!r}: either the header pandas writes for a "
            "DataFrame without column names (its column numbers) or a data row; refused rather "
            "than guessed: if it is a header, write the file with named columns or with "
            "to_csv(path, index=False, header=False); if it is data, put a row of column "
            "names above it"
        )


def _parse(text: str, file: Path, line_no: int, col: int, what: str) -> float:
    where = f"{what} {file}: line {line_no} column {col} (0-based): {text.strip()!r}"
    try:
        value = float(text)
    except ValueError:
        sep = _other_separator(text)
        hint = "" if sep is None else f" (numbers separated by {sep}; use commas)"
        raise ValueError(f"{where} is not a number{hint}") from None
    if "_" in text or not text.strip().isascii():
        raise ValueError(
            f"{where} is not a plain number (digits 0-9, '.', a sign and an exponent; "
            "no underscores or other digits)"
        )
    if not math.isfinite(value):
        raise ValueError(
            f"{what} {file}: line {line_no} column {col} (0-based): value {text.strip()!r} "
            "is not finite (NaN or inf)"
        )
    return value


def load_xy_csv(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X [n, p], y [n], lines [n])`` from a CSV whose last column is the target; ``lines``
    holds the 1-based file line of each row, for errors about single values."""
    table, lines = read_numeric_csv_lines(path, what="feature matrix")
    if table.shape[1] < 2:
        raise ValueError(
            f"feature matrix {path}: needs at least one feature column and a target "
            f"column, got {table.shape[1]} column(s)"
        )
    return table[:, :-1], table[:, -1], lines


def load_regression_csv(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(X [n, p], y [n])`` from a CSV whose last column is the target."""
    x, y, _ = load_xy_csv(path)
    return x, y
