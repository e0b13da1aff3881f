"""Prophesee EVT 3.0: a stream of 16-bit little-endian words, decoded by a numba state machine.

Word types (top nibble), from the published Metavision format description:

====  ==============  ===================================================================
0x0   EVT_ADDR_Y      y = bits 0-10 (bit 11: system type, ignored)
0x2   EVT_ADDR_X      one event at x = bits 0-10, polarity bit 11, current y and time
0x3   VECT_BASE_X     base x = bits 0-10, polarity bit 11 for the vectors that follow
0x4   VECT_12         12-bit validity mask: events at base_x + i; base_x += 12
0x5   VECT_8          8-bit validity mask: events at base_x + i; base_x += 8
0x6   EVT_TIME_LOW    t bits 0-11
0x8   EVT_TIME_HIGH   t bits 12-23; a decrease means the 24-bit counter wrapped (+2**24 us)
0x7, 0xA, 0xE, 0xF    CONTINUED_4, EXT_TRIGGER, OTHERS, CONTINUED_12: carry no CD event
====  ==============  ===================================================================

Any other nibble is corruption and raises with the byte offset. The decoder state is carried
between chunks, so streaming gives the same events as one read.

Time reconstruction (a decision the format description leaves open in practice): the real
recording in the shared test data (a Gen4.1 EVK3) repeats one TIME_HIGH value while its
TIME_LOW wraps around 11 times, so a decoder that trusts TIME_HIGH alone runs backwards in
time. We follow expelliarmus, whose decode of that file is the reference: a decrease of
TIME_LOW counts a 4096 us period, ``t = 2**24 * high_wraps + 4096 * (high + low_wraps) + low``,
and an event takes the time of the last time word (t = 0 before any). The writer therefore
encodes time with one TIME_HIGH, then TIME_LOW words only, advancing a period by a TIME_LOW
decrease (0xFFF then 0x000 per extra period crossed), which this decoder and expelliarmus
both read back exactly. Coordinates go out as ADDR_Y on change plus one ADDR_X per event.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from neuroedge.events.core import EVENT_DTYPE

WRAP = 1 << 24  # the 24-bit time counter wraps every 16.78 s
VALID_TYPES = (0x0, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x8, 0xA, 0xE, 0xF)
# state slots carried between chunks
TH, TL, Y, BASE_X, POL, HIGH_WRAPS, LOW_WRAPS, NOW = range(8)


def new_state() -> np.ndarray:
    """Decoder state before the first word of a file."""
    return np.zeros(8, np.int64)


def _kernels():  # compiled on first use, cached on disk
    """The (count, decode) numba kernels."""
    return _count_kernel(), _decode_kernel()


def _count_kernel() -> Callable[[np.ndarray], tuple[int, int]]:
    """The numba kernel counting the events a chunk of words holds."""
    import numba

    @numba.njit(cache=True, nogil=True)
    def count(words: np.ndarray) -> tuple[int, int]:
        """(events the words hold, index of the first invalid word or -1)."""
        n = 0
        for i in range(words.shape[0]):
            w = np.int64(words[i])
            kind = w >> 12
            if kind == 0x2:
                n += 1
            elif kind == 0x4 or kind == 0x5:
                mask = w & (0xFFF if kind == 0x4 else 0xFF)
                while mask:
                    n += 1
                    mask &= mask - 1
            elif kind == 0x1 or kind == 0x9 or (kind >= 0xB and kind <= 0xD):
                return n, i
        return n, -1

    return count


def _decode_kernel() -> Callable[..., int]:
    """The numba kernel decoding words into preallocated event columns, updating the state."""
    import numba

    @numba.njit(cache=True, nogil=True)
    def decode(
        words: np.ndarray,
        state: np.ndarray,
        t: np.ndarray,
        x: np.ndarray,
        y: np.ndarray,
        p: np.ndarray,
    ) -> int:
        th, tl, cy, bx = state[TH], state[TL], state[Y], state[BASE_X]
        pol, high_wraps, low_wraps, now = (
            state[POL],
            state[HIGH_WRAPS],
            state[LOW_WRAPS],
            state[NOW],
        )
        n = 0
        for i in range(words.shape[0]):
            w = np.int64(words[i])
            kind = w >> 12
            if kind == 0x0:
                cy = w & 0x7FF
            elif kind == 0x2:
                t[n], x[n], y[n], p[n] = now, w & 0x7FF, cy, (w >> 11) & 1
                n += 1
            elif kind == 0x3:
                bx, pol = w & 0x7FF, (w >> 11) & 1
            elif kind == 0x4 or kind == 0x5:
                width = 12 if kind == 0x4 else 8
                for b in range(width):
                    if (w >> b) & 1:
                        t[n], x[n], y[n], p[n] = now, bx + b, cy, pol
                        n += 1
                bx += width
            elif kind == 0x6 or kind == 0x8:
                value = w & 0xFFF
                if kind == 0x6:
                    low_wraps += value < tl
                    tl = value
                else:
                    high_wraps += value < th
                    th = value
                now = high_wraps * WRAP + ((th + low_wraps) << 12) + tl
        state[TH], state[TL], state[Y], state[BASE_X] = th, tl, cy, bx
        state[POL], state[HIGH_WRAPS], state[LOW_WRAPS], state[NOW] = (
            pol,
            high_wraps,
            low_wraps,
            now,
        )
        return n

    return decode


_COMPILED: dict[str, object] = {}


def decode_words(words: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, int]:
    """Decode uint16 ``words`` (updating ``state``); returns events and the index of the first
    invalid word (-1 when all are valid; events before it are returned)."""
    if not _COMPILED:
        _COMPILED["count"], _COMPILED["decode"] = _kernels()
    n, bad = _COMPILED["count"](words)
    valid = words if bad < 0 else words[:bad]
    t, x = np.empty(n, np.int64), np.empty(n, np.int16)
    y, p = np.empty(n, np.int16), np.empty(n, np.uint8)
    got = _COMPILED["decode"](valid, state, t, x, y, p)
    out = np.empty(got, EVENT_DTYPE)
    out["t"], out["x"], out["y"], out["p"] = t[:got], x[:got], y[:got], p[:got]
    return out, bad


def encode(events: np.ndarray) -> np.ndarray:
    """uint16 words for time-sorted ``events``: one TIME_HIGH, then TIME_LOW on change (a
    period advanced by a TIME_LOW decrease), ADDR_Y on change, one ADDR_X per event."""
    if not len(events):
        return np.zeros(0, np.uint16)
    t = events["t"].astype(np.int64)
    if t[0] >= WRAP:
        raise ValueError(
            f"EVT 3.0 writer: the first timestamp {int(t[0])} us must be below "
            f"2**24 us (shift the recording's time origin)"
        )
    period, low = t >> 12, t & 0xFFF
    extra = np.diff(period, prepend=period[0])  # periods crossed before each event
    # per event: filler words (0xFFF, 0x000: one period each) for periods not already counted
    # by a natural TIME_LOW decrease, then
    # TIME_LOW when the time changed, ADDR_Y when y changed, then ADDR_X
    y = events["y"].astype(np.int64)
    new_t = np.concatenate([[True], t[1:] != t[:-1]])
    new_y = np.concatenate([[True], y[1:] != y[:-1]])
    prev_low = np.concatenate([[0], low[:-1]])
    # a TIME_LOW decrease counts one period by itself, but only without fillers before it
    natural = (extra == 1) & (low < prev_low)
    fillers = 2 * (extra - natural)
    sizes = fillers + new_t + new_y + 1
    out = np.empty(int(sizes.sum()) + 1, np.int64)
    out[0] = (0x8 << 12) | (period[0] & 0xFFF)
    start = 1 + np.cumsum(sizes) - sizes
    filler_at = np.repeat(start, fillers) + _ramp(fillers)
    out[filler_at] = np.where(_ramp(fillers) % 2 == 0, (0x6 << 12) | 0xFFF, 0x6 << 12)
    pos = start + fillers
    out[pos[new_t]] = (0x6 << 12) | low[new_t]
    pos = pos + new_t
    out[pos[new_y]] = y[new_y] & 0x7FF
    pos = pos + new_y
    out[pos] = (0x2 << 12) | (events["p"].astype(np.int64) << 11) | events["x"]
    return out.astype(np.uint16)


def _ramp(counts: np.ndarray) -> np.ndarray:
    """0..c-1 for each count c, concatenated."""
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(int(counts.sum())) - starts
