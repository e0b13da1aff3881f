"""The event record: a numpy structured array ``(t, x, y, p)`` and its validation.

Bad events are never dropped or reordered silently. ``check_events`` raises ``ValueError``
naming the first offending index and value; the explicit options ``on_unsorted="sort"`` and
``on_invalid="drop"`` repair instead, and report what they did in the returned ``EventCheck``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from neuroedge.errors import ArtifactError

# t: microseconds; x, y: pixel column and row; p: polarity 0 = OFF (darker), 1 = ON (brighter)
EVENT_DTYPE = np.dtype([("t", "<i8"), ("x", "<i2"), ("y", "<i2"), ("p", "u1")])


class EventFormatError(ArtifactError, ValueError):
    """An event file that does not decode: names the file and the byte offset of the problem."""

    def __init__(self, path: str | os.PathLike[str], offset: int, problem: str) -> None:
        self.path, self.offset, self.problem = str(path), int(offset), problem
        super().__init__(f"{path}: byte offset {offset}: {problem}")


@dataclass(frozen=True)
class SensorSize:
    """Sensor geometry in pixels (tonic's ``sensor_size`` is ``(width, height, 2)``)."""

    width: int  # pixels along x
    height: int  # pixels along y

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1:
            raise ValueError(f"sensor size must be positive, got {self.width}x{self.height}")

    def as_tonic(self) -> tuple[int, int, int]:
        return (self.width, self.height, 2)


@dataclass(frozen=True)
class EventCheck:
    """What ``check_events`` found and, when asked to, repaired."""

    events: np.ndarray  # the (possibly repaired) events
    sorted_by_repair: bool  # True when on_unsorted="sort" had to reorder
    dropped: int  # events removed by on_invalid="drop"


def make_events(t: np.ndarray, x: np.ndarray, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Pack four equal-length arrays into an ``EVENT_DTYPE`` array (values are not checked)."""
    n = len(t)
    if not (len(x) == len(y) == len(p) == n):
        raise ValueError(f"t, x, y, p lengths differ: {n}, {len(x)}, {len(y)}, {len(p)}")
    out = np.empty(n, EVENT_DTYPE)
    out["t"], out["x"], out["y"], out["p"] = t, x, y, p
    return out


def as_events(events: np.ndarray) -> np.ndarray:
    """``events`` converted to ``EVENT_DTYPE``; a TypeError names missing fields."""
    if not isinstance(events, np.ndarray) or events.dtype.names is None:
        raise TypeError(
            f"events must be a numpy structured array with fields t, x, y, p; "
            f"got {type(events).__name__}"
        )
    missing = [f for f in EVENT_DTYPE.names if f not in events.dtype.names]
    if missing:
        raise TypeError(f"events lack fields {missing} (have {list(events.dtype.names)})")
    if events.dtype == EVENT_DTYPE:
        return events
    return make_events(events["t"], events["x"], events["y"], events["p"])


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
    t, bad polarity or coordinates off the sensor. Otherwise the first problem raises ValueError,
    numbering events from ``first_index`` and prefixed with ``source`` (a file reader passes the
    events of earlier chunks and the file with the chunk's byte offset).
    """
    if on_unsorted not in ("raise", "sort") or on_invalid not in ("raise", "drop"):
        raise ValueError(
            f"on_unsorted must be 'raise'|'sort' and on_invalid 'raise'|'drop', "
            f"got {on_unsorted!r}, {on_invalid!r}"
        )
    ev = as_events(events)
    bad = (ev["t"] < 0) | (ev["p"] > 1) | (ev["x"] < 0) | (ev["y"] < 0)
    if sensor is not None:
        bad |= (ev["x"] >= sensor.width) | (ev["y"] >= sensor.height)
    dropped = 0
    if bad.any():
        if on_invalid == "raise":
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{source}event {first_index + i} {ev[i].tolist()} (t, x, y, p) "
                f"is invalid: negative timestamp, polarity not 0/1 or off the "
                f"sensor {sensor}; "
                f"{int(bad.sum())} such events (pass on_invalid='drop' to drop)"
            )
        ev, dropped = ev[~bad], int(bad.sum())
    steps = np.diff(ev["t"])
    repaired = False
    if (steps < 0).any():
        if on_unsorted == "raise":
            i = int(np.flatnonzero(steps < 0)[0]) + 1
            raise ValueError(
                f"{source}events out of time order at index {first_index + i}: "
                f"t={int(ev['t'][i])} us after t={int(ev['t'][i - 1])} us "
                f"(pass on_unsorted='sort')"
            )
        ev, repaired = ev[np.argsort(ev["t"], kind="stable")], True
    return EventCheck(ev, repaired, dropped)


def read_header(path: str | os.PathLike[str], data: bytes | None = None) -> tuple[dict, int]:
    """Prophesee ``%``-prefixed ASCII header lines: ``({key: value}, first data byte)``.

    A header line is ``%`` then a space (or ``% end``); the body starts after the last one.
    """
    raw = Path(path).read_bytes()[: 1 << 16] if data is None else data
    fields: dict[str, str] = {}
    pos = 0
    while raw.startswith((b"% ", b"%\n"), pos):
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
