"""Binary event codecs: Prophesee DAT, EVT 2.0, EVT 3.0 and the ATIS ``.bin`` of N-MNIST.

Each codec decodes a whole number of fixed-size words with a carried state, so a file can be
read in bounded-memory chunks (``neuroedge.events.io.stream_events``) with the same result as
one read. Layouts, from the published format descriptions:

* **DAT** (Gen1, N-CARS): ``%`` header lines, then 2 bytes (event type 0x00 = CD, event size
  8), then 8-byte little-endian events: uint32 t (us), uint32 with x bits 0-13, y bits 14-27,
  polarity bits 28-31. Timestamps are 32-bit: t >= 2**32 us cannot be written.
* **EVT 2.0**: 32-bit words, type in bits 28-31: CD_OFF 0x0 / CD_ON 0x1 (t low 6 bits in
  22-27, x in 11-21, y in 0-10), EVT_TIME_HIGH 0x8 (t >> 6 in bits 0-27), EXT_TRIGGER 0xA,
  OTHERS 0xE, CONTINUED 0xF. CD words before the first TIME_HIGH have no time base: dropped.
  The 28-bit TIME_HIGH loops every 2**34 us (4.77 h); loops are counted by OpenEB's rule
  (``_evt2_decode``) and the writer marks each one, so any t >= 0 round-trips.
* **EVT 3.0**: see ``neuroedge.events.evt3``.
* **ATIS .bin** (N-MNIST, N-Caltech101; Orchard et al. 2015): 5 bytes per event: x, y,
  polarity in bit 7 of byte 2, 23-bit timestamp in the rest of bytes 2-4 (big-endian). An event
  with y == 240 is a timestamp-overflow marker: it adds 2**13 us to later events (the dataset's
  own MATLAB reader does this) and is not an event.

Corrupt words (unknown types, polarity > 1, a DAT event size other than 8) and truncated files
raise ``EventFormatError`` with the byte offset. ``Codec.locate`` gives the byte offset of a
decoded event (DAT, EVT 2.0, ATIS; an EVT 3.0 vector word holds several events), so a reader
can name where an event out of time order sits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from neuroedge.events import evt3
from neuroedge.events.core import EventFormatError, SensorSize, make_events


@dataclass(frozen=True)
class Codec:
    """One binary event format: word size, state, decode and encode."""

    name: str  # "dat", "evt2", "evt3", "atis"
    word_bytes: int  # size of the unit the stream is made of
    new_state: Callable[[], Any]
    decode: Callable[[bytes, Any, int, str], np.ndarray]  # (body, state, offset, path)
    check: Callable[[np.ndarray], None]  # the refusals of a whole array, before any word
    # the words of events given the one before them (None: the file's first event)
    words: Callable[[np.ndarray, np.ndarray | None], bytes]
    header: Callable[[SensorSize | None], bytes]
    # byte offset in ``body`` of decoded event i of n (None: events have no word of their own)
    locate: Callable[[bytes, int, int], int] | None = None

    def encode(self, events: np.ndarray) -> bytes:
        """The body of a file of ``events``: ``check``, then ``words``."""
        self.check(events)
        return self.words(events, None)


def encode_pieces(codec: Codec, events: np.ndarray, size: int) -> Iterator[bytes]:
    """``codec.encode(events)`` byte for byte, in pieces of ``size`` events (the encoders'
    temporaries stay a piece's, not 5-9x the array's): an event's words depend on it and the
    event before it only. ``codec.check(events)`` is the caller's, first."""
    for at in range(0, len(events), size):
        yield codec.words(events[at : at + size], events[at - 1 : at] if at else None)


def _words(body: bytes, dtype: str) -> np.ndarray:
    return np.frombuffer(body, dtype=dtype)


# ---- DAT --------------------------------------------------------------------------------


def _dat_decode(body: bytes, state: Any, offset: int, path: str) -> np.ndarray:
    raw = _words(body, "<u4").reshape(-1, 2)
    data = raw[:, 1]
    p = data >> 28
    if (p > 1).any():
        i = int(np.flatnonzero(p > 1)[0])
        raise EventFormatError(
            path,
            offset + 8 * i,
            f"DAT event with polarity {int(p[i])} "
            "(expected 0 or 1): corrupt data or not a CD event file",
        )
    return make_events(raw[:, 0], data & 0x3FFF, (data >> 14) & 0x3FFF, p)


def _dat_check(events: np.ndarray) -> None:
    if len(events) and (events["t"].max() >= 1 << 32 or events["t"].min() < 0):
        raise ValueError(
            "DAT stores 32-bit unsigned microsecond timestamps; got t outside [0, 2**32)"
        )
    _check_coordinates(events, 1 << 14, "DAT")


def _dat_words(events: np.ndarray, before: np.ndarray | None) -> bytes:
    out = np.empty((len(events), 2), "<u4")
    out[:, 0] = events["t"]
    out[:, 1] = (
        events["x"].astype(np.uint32)
        | (events["y"].astype(np.uint32) << 14)
        | (events["p"].astype(np.uint32) << 28)
    )
    return out.tobytes()


def _dat_header(sensor: SensorSize | None) -> bytes:
    lines = ["% Data file containing Event2d events.", "% Version 2"]
    if sensor is not None:
        lines += [f"% Width {sensor.width}", f"% Height {sensor.height}"]
    return ("\n".join(lines) + "\n").encode("ascii") + bytes([0x00, 0x08])


# ---- EVT 2.0 ----------------------------------------------------------------------------


EVT2_HIGH_BITS = 28  # TIME_HIGH holds t >> 6 in 28 bits: the time base loops every 2**34 us
EVT2_HIGH_MAX = (1 << EVT2_HIGH_BITS) - 1
EVT2_LOOP_DROP = EVT2_HIGH_MAX - 10  # a TIME_HIGH drop of at least this much is a loop


def _evt2_decode(body: bytes, state: list[int], offset: int, path: str) -> np.ndarray:
    """CD events of whole EVT 2.0 words; ``state`` = [last TIME_HIGH (-1: none yet), loops].

    TIME_HIGH is 28 bits (t >> 6), so the time base loops every 2**34 us (4.77 h). Loop rule,
    Prophesee OpenEB's EVT 2.0 decoder's: a TIME_HIGH at least ``EVT2_LOOP_DROP`` = 2**28 - 11
    (in 64 us units, i.e. MaxTimestampBase - (10 << 6) in us) below the previous one starts a
    new loop (+2**34 us); a smaller drop (a re-sent, slightly older base) does not. Then
    t = (((loops << 28) + TIME_HIGH) << 6) | t_low. Loops are counted over the TIME_HIGH words
    in order and carried in ``state``, so a chunked read equals one read.
    """
    w = _words(body, "<u4").astype(np.int64)
    kind = w >> 28
    bad = ~np.isin(kind, (0x0, 0x1, 0x8, 0xA, 0xE, 0xF))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise EventFormatError(
            path,
            offset + 4 * i,
            f"EVT 2.0 word 0x{int(w[i]):08x} has unknown type 0x{int(kind[i]):x}: corrupt data",
        )
    is_high = kind == 0x8
    known = state[0] >= 0  # a time base carried from an earlier chunk
    carried = (state[1] << EVT2_HIGH_BITS) + state[0]
    bases = np.concatenate([[carried], _evt2_time_bases(w[is_high] & EVT2_HIGH_MAX, state)])
    seen = np.cumsum(is_high)  # TIME_HIGH words up to each word: index into ``bases``
    cd = (kind <= 1) & ((seen > 0) | known)
    wc = w[cd]
    return make_events(
        (bases[seen[cd]] << 6) | ((wc >> 22) & 0x3F), (wc >> 11) & 0x7FF, wc & 0x7FF, kind[cd]
    )


def _evt2_time_bases(highs: np.ndarray, state: list[int]) -> np.ndarray:
    """Loop-corrected time bases (64 us units) of a chunk's TIME_HIGH values; updates
    ``state`` to the last value and the loop count (``_evt2_decode``)."""
    prev = np.concatenate([[state[0]], highs[:-1]])
    loops = state[1] + np.cumsum((prev >= 0) & (prev - highs >= EVT2_LOOP_DROP))
    if len(highs):
        state[0], state[1] = int(highs[-1]), int(loops[-1])
    return (loops << EVT2_HIGH_BITS) + highs


def _evt2_locate(body: bytes, i: int, n: int) -> int:
    """CD words decode one event each; the chunk's first ``#CD - n`` (before any time base)
    were dropped."""
    cd = np.flatnonzero((_words(body, "<u4") >> 28) <= 1)
    return 4 * int(cd[len(cd) - n + i])


def _evt2_check(events: np.ndarray) -> None:
    if len(events) and events["t"].min() < 0:
        raise ValueError("EVT 2.0 cannot store negative timestamps")
    _check_coordinates(events, 1 << 11, "EVT 2.0")


def _evt2_words(events: np.ndarray, before: np.ndarray | None) -> bytes:
    """A TIME_HIGH (t >> 6, modulo 2**28) whenever it changes (and for the first event: when
    ``before``, the event before these, is None), then one CD word per event; for each 2**34
    us loop crossed since the last event, first the pair 2**28 - 1, 0 (a drop the loop rule of
    ``_evt2_decode`` and OpenEB count), so any time from 0 on reads back."""
    t = events["t"].astype(np.int64)
    high = t >> 6
    first = 0 if before is None else int(before["t"][0]) >> 6
    prev = np.concatenate([[first], high[:-1]])
    loops = (high >> EVT2_HIGH_BITS) - (prev >> EVT2_HIGH_BITS)  # loops crossed before each
    if (loops < 0).any():
        raise ValueError("EVT 2.0 events must be sorted by time")
    highs = np.where(high != prev, 2 * loops + 1, 0)  # TIME_HIGH words before each event
    if before is None:
        highs[:1] = 2 * loops[:1] + 1
    sizes = highs + 1
    out = np.empty(int(sizes.sum()), np.int64)
    start = np.cumsum(sizes) - sizes
    ramp = _ramp(highs)  # word j of an event's TIME_HIGH run: max (j even), 0, ..., its own
    last = ramp == np.repeat(highs - 1, highs)
    value = np.where(ramp % 2 == 0, EVT2_HIGH_MAX, 0)
    value = np.where(last, np.repeat(high & EVT2_HIGH_MAX, highs), value)
    out[np.repeat(start, highs) + ramp] = (0x8 << 28) | value
    out[start + highs] = (
        (events["p"].astype(np.int64) << 28)
        | ((t & 0x3F) << 22)
        | (events["x"].astype(np.int64) << 11)
        | events["y"]
    )
    return out.astype("<u4").tobytes()


def _raw_header(version: str) -> Callable[[SensorSize | None], bytes]:
    def header(sensor: SensorSize | None) -> bytes:
        lines = [f"% evt {version}"]
        if sensor is not None:
            lines.append(f"% format EVT{version[0]};height={sensor.height};width={sensor.width}")
        return ("\n".join([*lines, "% end"]) + "\n").encode("ascii")

    return header


# ---- EVT 3.0 ----------------------------------------------------------------------------


def _evt3_decode(body: bytes, state: np.ndarray, offset: int, path: str) -> np.ndarray:
    words = _words(body, "<u2")
    events, bad = evt3.decode_words(words, state)
    if bad >= 0:
        raise EventFormatError(
            path,
            offset + 2 * bad,
            f"EVT 3.0 word 0x{int(words[bad]):04x} "
            f"has unknown type 0x{int(words[bad]) >> 12:x}: corrupt data",
        )
    return events


def _evt3_check(events: np.ndarray) -> None:
    _check_coordinates(events, 1 << 11, "EVT 3.0")
    if len(events) and events["t"].min() < 0:
        raise ValueError("EVT 3.0 cannot store negative timestamps")


def _evt3_words(events: np.ndarray, before: np.ndarray | None) -> bytes:
    return evt3.encode(events, before).astype("<u2").tobytes()


# ---- ATIS .bin (N-MNIST / N-Caltech101) ---------------------------------------------------

OVERFLOW_Y = 240
OVERFLOW_STEP = 1 << 13


def _atis_decode(body: bytes, state: list[int], offset: int, path: str) -> np.ndarray:
    b = _words(body, "u1").reshape(-1, 5).astype(np.int64)
    overflow = b[:, 1] == OVERFLOW_Y
    base = state[0] + OVERFLOW_STEP * np.cumsum(overflow)
    state[0] = int(base[-1]) if len(base) else state[0]
    t = ((b[:, 2] & 0x7F) << 16 | b[:, 3] << 8 | b[:, 4]) + base
    keep = ~overflow
    return make_events(t[keep], b[keep, 0], b[keep, 1], b[keep, 2] >> 7)


def _atis_locate(body: bytes, i: int, n: int) -> int:
    """Every 5-byte word but the overflow markers is an event."""
    return 5 * int(np.flatnonzero(_words(body, "u1")[1::5] != OVERFLOW_Y)[i])


def _atis_check(events: np.ndarray) -> None:
    if not len(events):
        raise ValueError(
            "ATIS .bin cannot store 0 events: the file would be empty (no header), and "
            "read_events refuses an empty file"
        )
    _check_coordinates(events, 256, "ATIS .bin")
    if len(events) and ((events["y"] == OVERFLOW_Y).any() or events["t"].min() < 0):
        raise ValueError("ATIS .bin cannot store y == 240 (the overflow marker) or t < 0")


def _atis_loops(events: np.ndarray) -> np.ndarray:
    """Overflow markers up to each event: only where the 23-bit field runs out."""
    t = events["t"].astype(np.int64)
    return np.maximum(0, -(-(t - (1 << 23) + 1) // OVERFLOW_STEP))


def _atis_words(events: np.ndarray, before: np.ndarray | None) -> bytes:
    t = events["t"].astype(np.int64)
    loops = _atis_loops(events)  # low = t - markers_so_far * 2**13
    markers = np.diff(loops, prepend=0 if before is None else int(_atis_loops(before)[0]))
    if (markers < 0).any():
        raise ValueError("ATIS .bin events must be sorted by time")
    out = np.zeros((len(t) + int(markers.sum()), 5), np.uint8)
    at = np.arange(len(t)) + np.cumsum(markers)
    marker_rows = np.repeat(at - markers, markers) + _ramp(markers)
    out[marker_rows, 1] = OVERFLOW_Y
    low = t - loops * OVERFLOW_STEP
    out[at, 0], out[at, 1] = events["x"], events["y"]
    out[at, 2] = (events["p"].astype(np.int64) << 7) | (low >> 16)
    out[at, 3], out[at, 4] = (low >> 8) & 0xFF, low & 0xFF
    return out.tobytes()


def _ramp(counts: np.ndarray) -> np.ndarray:
    """0..c-1 for each count c, concatenated."""
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(int(counts.sum())) - starts


def _check_coordinates(events: np.ndarray, limit: int, fmt: str) -> None:
    if len(events) and (
        events["x"].max() >= limit
        or events["y"].max() >= limit
        or min(events["x"].min(), events["y"].min()) < 0
    ):
        raise ValueError(
            f"{fmt} stores coordinates in [0, {limit}); got x in "
            f"[{events['x'].min()}, {events['x'].max()}], y in "
            f"[{events['y'].min()}, {events['y'].max()}]"
        )
    if len(events) and events["p"].max() > 1:
        raise ValueError(f"{fmt}: polarity must be 0 or 1, got {int(events['p'].max())}")


CODECS: dict[str, Codec] = {
    "dat": Codec(
        "dat",
        8,
        lambda: None,
        _dat_decode,
        _dat_check,
        _dat_words,
        _dat_header,
        lambda b, i, n: 8 * i,
    ),
    "evt2": Codec(
        "evt2",
        4,
        lambda: [-1, 0],
        _evt2_decode,
        _evt2_check,
        _evt2_words,
        _raw_header("2.0"),
        _evt2_locate,
    ),
    "evt3": Codec(
        "evt3", 2, evt3.new_state, _evt3_decode, _evt3_check, _evt3_words, _raw_header("3.0")
    ),
    "atis": Codec(
        "atis",
        5,
        lambda: [0],
        _atis_decode,
        _atis_check,
        _atis_words,
        lambda sensor: b"",
        _atis_locate,
    ),
}
