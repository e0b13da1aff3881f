"""The event record: a numpy structured array ``(t, x, y, p)`` and its validation.

Bad events are never dropped or reordered silently. ``check_events`` raises ``ValueError``
naming the first offending index and value; the explicit options ``on_unsorted="sort"`` and
``on_invalid="drop"`` repair instead, and report what they did in the returned ``EventCheck``.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Literal

import numpy as np
from neuroedge.errors import ArtifactError

# t: microseconds; x, y: pixel column and row; p: polarity 0 = OFF (darker), 1 = ON (brighter)
EVENT_DTYPE = np.dtype([("t", "<i8"), ("x", "<i2"), ("y", "<i2"), ("p", "u1")])
MAX_COORD = int(np.iinfo(np.int16).max)  # largest x or y an event can hold


class EventFormatError(ArtifactError, ValueError):
    """An event file that does not decode: names the file and the byte offset of the problem."""

    def __init__(self, path: str | os.PathLike[str], offset: int, problem: str) -> None:
        self.path, self.offset, self.problem = str(path), int(offset), problem
        super().__init__(f"{path}: byte offset {offset}: {problem}")


class UnsortedEventsError(ValueError):
    """``check_events``' error for events out of time order: ``index`` is the first event
    earlier than its predecessor (numbered as in the message, from ``first_index``, counting
    dropped events), ``t`` and ``t_before`` the two times in microseconds. File readers turn it
    into an ``EventFormatError`` naming the byte offset."""

    def __init__(self, message: str, index: int, t: int, t_before: int) -> None:
        self.index, self.t, self.t_before = int(index), int(t), int(t_before)
        super().__init__(message)


# how to repair, worded for Python callers and for CLI users (who cannot pass these options)
SORT_HINT = (
    "pass on_unsorted='sort' to read_events / stream_events / check_events to sort them "
    "(Python only: the CLI has no such option)"
)
DROP_HINT = (
    "pass on_invalid='drop' to read_events / stream_events / check_events to drop them "
    "(Python only: the CLI has no such option)"
)


@dataclass(frozen=True)
class SensorSize:
    """Sensor geometry in pixels (tonic's ``sensor_size`` is ``(width, height, 2)``)."""

    width: int  # pixels along x
    height: int  # pixels along y

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or isinstance(value, bool):
                raise ValueError(
                    f"sensor {name} must be an integer number of pixels, got {value!r}"
                )
            if not 1 <= value <= MAX_COORD:
                raise ValueError(
                    f"sensor {name} must be in 1..{MAX_COORD} pixels (x, y are int16), got {value}"
                )
            object.__setattr__(self, name, int(value))

    def as_tonic(self) -> tuple[int, int, int]:
        return (self.width, self.height, 2)


@dataclass(frozen=True)
class EventCheck:
    """What ``check_events`` found and, when asked to, repaired."""

    events: np.ndarray  # the (possibly repaired) events
    sorted_by_repair: bool  # True when on_unsorted="sort" had to reorder
    dropped: int  # events removed by on_invalid="drop"


def _field(
    name: str, values: object, n: int | None = None, source: str = "", first: int = 0
) -> np.ndarray:
    """``values`` as a numeric array; ValueError when not numeric, not 1-D or not integer."""
    arr = np.asarray(values)
    if arr.ndim != 1 or (n is not None and len(arr) != n):
        raise ValueError(
            f"{source}event field {name} must be a 1-D array of {n} values, got shape {arr.shape}"
        )
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{source}event field {name} must be numeric, got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        frac = ~np.isfinite(arr) | (arr != np.floor(arr))
        if frac.any():
            i = int(np.flatnonzero(frac)[0])
            raise ValueError(
                f"{source}event {first + i}: {name}={arr[i].item()!r} is not an integer "
                f"(event fields must be whole numbers; {int(frac.sum())} such values)"
            )
    return arr


def _outside(arr: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Mask of the values of an integer-valued array outside ``lo..hi`` (exact for uint64)."""
    if arr.dtype.kind == "f":  # float(2**63 - 1) is 2**63: compare with hi + 1 as a float
        return (arr < lo) | (arr >= float(hi) + 1.0)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int8)
    info = np.iinfo(arr.dtype)
    mask = np.zeros(arr.shape, bool)
    if lo > info.min:
        mask |= arr < arr.dtype.type(lo)
    if hi < info.max:
        mask |= arr > arr.dtype.type(hi)
    return mask


def _dtype_range(name: str) -> tuple[int, int]:
    info = np.iinfo(EVENT_DTYPE[name])
    return int(info.min), int(info.max)


def make_events(t: np.ndarray, x: np.ndarray, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Pack four equal-length arrays into an ``EVENT_DTYPE`` array.

    Values must be whole numbers within the field's dtype (t int64, x and y int16, p uint8);
    anything else raises ValueError naming the field, index and value (nothing wraps or is
    truncated). Polarity and sensor bounds are ``check_events``'s business.
    """
    n = len(t)
    if not (len(x) == len(y) == len(p) == n):
        raise ValueError(f"t, x, y, p lengths differ: {n}, {len(x)}, {len(y)}, {len(p)}")
    out = np.empty(n, EVENT_DTYPE)
    for name, values in zip(EVENT_DTYPE.names, (t, x, y, p)):
        arr = _field(name, values, n)
        lo, hi = _dtype_range(name)
        bad = _outside(arr, lo, hi)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"event {i}: {name}={arr[i].item()!r} does not fit the event field "
                f"({EVENT_DTYPE[name]}, expected {lo}..{hi}); {int(bad.sum())} such values"
            )
        out[name] = arr
    return out


def _event_fields(events: np.ndarray) -> list[np.ndarray]:
    """The t, x, y, p columns of a structured array; a TypeError names missing fields."""
    if not isinstance(events, np.ndarray) or events.dtype.names is None:
        raise TypeError(
            f"events must be a numpy structured array with fields t, x, y, p; "
            f"got {type(events).__name__}"
        )
    missing = [f for f in EVENT_DTYPE.names if f not in events.dtype.names]
    if missing:
        raise TypeError(f"events lack fields {missing} (have {list(events.dtype.names)})")
    return [events[f] for f in EVENT_DTYPE.names]


def as_events(events: np.ndarray) -> np.ndarray:
    """``events`` converted to ``EVENT_DTYPE``; a TypeError names missing fields, a ValueError
    values that do not fit (see ``make_events``)."""
    fields = _event_fields(events)
    if events.dtype == EVENT_DTYPE:
        return events
    return make_events(*fields)


def _invalid(fields: list[np.ndarray], sensor: SensorSize | None) -> list[tuple[np.ndarray, str]]:
    """``(mask, expectation)`` per rule an event must meet, on the uncast values."""
    t, x, y, p = fields
    width = sensor.width if sensor is not None else MAX_COORD + 1
    height = sensor.height if sensor is not None else MAX_COORD + 1
    where = f"off the sensor {sensor}" if sensor is not None else "beyond the int16 range"
    return [
        (_outside(t, 0, _dtype_range("t")[1]), "timestamp negative (expected t >= 0)"),
        (_outside(p, 0, 1), "polarity not 0/1 (expected p in {0, 1})"),
        (_outside(x, 0, width - 1), f"x {where} (expected 0 <= x < {width})"),
        (_outside(y, 0, height - 1), f"y {where} (expected 0 <= y < {height})"),
    ]


def check_events(
    events: np.ndarray,
    sensor: SensorSize | None = None,
    *,
    on_unsorted: Literal["raise", "sort"] = "raise",
    on_invalid: Literal["raise", "drop"] = "raise",
    first_index: int = 0,
    source: str = "",
) -> EventCheck:
    """Validate time order, timestamps >= 0, polarity in {0, 1} and coordinates on the sensor.

    ``on_unsorted="sort"`` sorts stably by t; ``on_invalid="drop"`` removes events with negative
    t, bad polarity or coordinates off the sensor. Otherwise the first problem raises ValueError
    (``UnsortedEventsError`` for time order), numbering events from ``first_index`` and prefixed
    with ``source`` (a file reader passes the events of earlier chunks and the file with the
    chunk's byte offset).
    """
    if on_unsorted not in ("raise", "sort") or on_invalid not in ("raise", "drop"):
        raise ValueError(
            f"on_unsorted must be 'raise'|'sort' and on_invalid 'raise'|'drop', "
            f"got {on_unsorted!r}, {on_invalid!r}"
        )
    fields = _event_fields(events)
    if events.dtype != EVENT_DTYPE:
        fields = [
            _field(name, f, None, source, first_index) for name, f in zip(EVENT_DTYPE.names, fields)
        ]
    rules = _invalid(fields, sensor)
    bad = np.logical_or.reduce([mask for mask, _ in rules])
    dropped = 0
    if bad.any():
        if on_invalid == "raise":
            i = int(np.flatnonzero(bad)[0])
            why = "; ".join(text for mask, text in rules if mask[i])
            raise ValueError(
                f"{source}event {first_index + i} {tuple(f[i].item() for f in fields)} "
                f"(t, x, y, p) is invalid: {why}; "
                f"{int(bad.sum())} invalid events ({DROP_HINT})"
            )
        fields, dropped = [f[~bad] for f in fields], int(bad.sum())
    if events.dtype == EVENT_DTYPE:
        ev = events[~bad] if dropped else events
    else:
        ev = make_events(*fields)
    steps = np.diff(ev["t"])
    repaired = False
    if (steps < 0).any():
        if on_unsorted == "raise":
            i = int(np.flatnonzero(steps < 0)[0]) + 1
            index = first_index + (int(np.flatnonzero(~bad)[i]) if dropped else i)
            t, before = int(ev["t"][i]), int(ev["t"][i - 1])
            raise UnsortedEventsError(
                f"{source}events out of time order at index {index}: "
                f"t={t} us after t={before} us ({SORT_HINT})",
                index,
                t,
                before,
            )
        ev, repaired = ev[np.argsort(ev["t"], kind="stable")], True
    return EventCheck(ev, repaired, dropped)


def _text_line(raw: bytes, pos: int) -> bool:
    """Whether the bytes from ``pos`` to the next newline (or the end of ``raw``, a header cut
    short) are text: no control byte but a tab (a CR before the newline allowed); bytes of
    0x80 and up are taken as text (a UTF-8 or latin-1 comment, as Prophesee's tools read
    lines), so only binary words with control bytes end the header."""
    end = raw.find(b"\n", pos)
    line = raw[pos : end if end >= 0 else len(raw)].rstrip(b"\r")
    return all(c >= 32 and c != 127 or c == 9 for c in line)


def read_header(path: str | os.PathLike[str], data: bytes | None = None) -> tuple[dict, int]:
    """Prophesee ``%``-prefixed ASCII header lines: ``({key: value}, first data byte)``.

    A header line is ``%`` and printable ASCII up to a newline (LF or CRLF; ``%``, ``% key
    value``, ``%Created ...``), as Prophesee's and OpenEB's readers take it; the body starts
    after the last one (or after ``% end``). A ``%`` byte that starts binary data (no text up
    to a newline) is the body's.
    """
    raw = data
    if raw is None:  # the header's bytes only: the file may be gigabytes of events
        with open(path, "rb") as fh:
            raw = fh.read(1 << 16)
    fields: dict[str, str] = {}
    pos = 0
    while raw.startswith(b"%", pos) and _text_line(raw, pos):
        end = raw.find(b"\n", pos)
        if end < 0:
            raise EventFormatError(path, pos, "header line without a newline (truncated header)")
        line = raw[pos + 1 : end].decode("ascii", errors="replace").strip()
        key, _, value = line.partition(" ")
        fields[key] = value.strip()
        pos = end + 1
        if key == "end":
            break
    return fields, pos
