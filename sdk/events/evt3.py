"""Prophesee EVT 3.0: a stream of 16-bit little-endian words, decoded by a numba state machine.

Word types (top nibble), from the published Metavision format description:

====  ==============  ===================================================================
0x0   EVT_ADDR_Y      y = bits 0-10 (bit 11: system type, ignored)
0x2   EVT_ADDR_X      one event at x = bits 0-10, polarity bit 11, current y and time
0x3   VECT_BASE_X     base x = bits 0-10, polarity bit 11 for the vectors that follow
0x4   VECT_12         12-bit validity mask: events at base_x + i; base_x += 12
0x5   VECT_8          8-bit validity mask: events at base_x + i; base_x += 8
0x6   EVT_TIME_LOW    t bits 0-11
0x8   EVT_TIME_HIGH   t bits 12-23; a drop from near 4095 to near 0 means the 24-bit
                      counter wrapped (+2**24 us)
0x7, 0xA, 0xE, 0xF    CONTINUED_4, EXT_TRIGGER, OTHERS, CONTINUED_12: carry no CD event
====  ==============  ===================================================================

Any other nibble is corruption and raises with the byte offset. The decoder state is carried
between chunks, so streaming gives the same events as one read.

Time: as the format description says, TIME_HIGH and TIME_LOW are the upper and lower 12 bits of
one 24-bit time base, ``t = 2**24 * high_wraps + 4096 * high + low``; an event takes the time
of the last time word. CD words before the first TIME_HIGH have no time base and are dropped,
as in the EVT 2.0 reader and OpenEB (a file cut out of a longer recording starts mid-period:
those events read as t = 0 before, a gap of seconds before the rest). A TIME_LOW decrease is
not a new period: the real recording in the shared test data (a Gen4.1 EVK3) re-sends TIME_HIGH
every ~1000 us followed by a TIME_LOW up to 11 us older (811 -> 800), and steps TIME_HIGH 2861
-> 2862 -> 2863 as its time base passes 4096 us periods. An earlier version followed
expelliarmus, which counts every TIME_LOW decrease as a 4096 us period; on that file it adds 11
gaps of 4097 us that no other event gap comes near (the next largest is under 100 us),
stretching 8.8 ms of recording to 53.9 ms (the shared data's ``evt3_sample.expected.npy`` was
made that way). The Rust ``evt3`` 0.4.1 decoder reads the file as we now do: t from 11,718,656
to 11,727,457 us. A TIME_HIGH drop of at least ``WRAP_DROP`` = 4085 periods counts a 24-bit
wrap, the rule of Prophesee's OpenEB decoder (a drop within 10 periods of the full range) that
the Rust reader follows too; a smaller drop (a re-sent, slightly older time base) does not. The
writer emits TIME_HIGH whenever the 4096 us period changes, and across each wrap in a gap the
pair 4095, 0 first, so long gaps and wraps read back exactly here and in those readers; then
TIME_LOW when the time changes, ADDR_Y on change and one ADDR_X per event.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from neuroedge.events.core import EVENT_DTYPE

WRAP = 1 << 24  # the 24-bit time counter wraps every 16.78 s
VALID_TYPES = (0x0, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x8, 0xA, 0xE, 0xF)
WRAP_DROP = 4095 - 10  # a TIME_HIGH drop of at least this many periods is a counter wrap
# state slots carried between chunks
TH, TL, Y, BASE_X, POL, HIGH_WRAPS, NOW, KNOWN = range(8)  # KNOWN: a TIME_HIGH was seen


def new_state() -> np.ndarray:
    """Decoder state before the first word of a file."""
    return np.zeros(8, np.int64)


def _kernels():  # compiled on first use, cached on disk
    """The (count, decode) numba kernels (numba given a cache folder it can write first)."""
    from neuroedge.numba_cache import use_writable_cache

    use_writable_cache()
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
        pol, high_wraps, now, known = state[POL], state[HIGH_WRAPS], state[NOW], state[KNOWN]
        n = 0
        for i in range(words.shape[0]):
            w = np.int64(words[i])
            kind = w >> 12
            if kind == 0x0:
                cy = w & 0x7FF
            elif kind == 0x2:
                if known:
                    t[n], x[n], y[n], p[n] = now, w & 0x7FF, cy, (w >> 11) & 1
                    n += 1
            elif kind == 0x3:
                bx, pol = w & 0x7FF, (w >> 11) & 1
            elif kind == 0x4 or kind == 0x5:
                width = 12 if kind == 0x4 else 8
                for b in range(width):
                    if known and (w >> b) & 1:
                        t[n], x[n], y[n], p[n] = now, bx + b, cy, pol
                        n += 1
                bx += width
            elif kind == 0x6 or kind == 0x8:
                value = w & 0xFFF
                if kind == 0x6:
                    tl = value
                else:
                    if known and th - value >= WRAP_DROP:
                        high_wraps += 1
                    th, known = value, 1
                now = high_wraps * WRAP + (th << 12) + tl
        state[TH], state[TL], state[Y], state[BASE_X] = th, tl, cy, bx
        state[POL], state[HIGH_WRAPS], state[NOW], state[KNOWN] = pol, high_wraps, now, known
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


def encode(events: np.ndarray, before: np.ndarray | None = None) -> np.ndarray:
    """uint16 words for time-sorted ``events``: when the 4096 us period changes, a TIME_HIGH
    pair (4095, 0) for every counter wrap crossed, then the new period's TIME_HIGH; TIME_LOW
    when the time changes, ADDR_Y when y changes, then one ADDR_X per event. The first event
    gets all three unless ``before`` (the one event before these: a file written in pieces)
    says what is current."""
    if not len(events):
        return np.zeros(0, np.uint16)
    t = events["t"].astype(np.int64)
    y = events["y"].astype(np.int64)
    period, low = t >> 12, t & 0xFFF
    first = before is None
    t0, y0 = (0, 0) if first else (int(before["t"][0]), int(before["y"][0]))
    prev = np.concatenate([[t0 >> 12], period[:-1]])
    wraps = (period >> 12) - (prev >> 12)  # 24-bit counter wraps crossed before each event
    highs = np.where(period != prev, 2 * wraps + 1, 0)  # TIME_HIGH words before each event
    if first:
        highs[0] = 2 * wraps[0] + 1
    new_t = np.concatenate([[first or t[0] != t0], t[1:] != t[:-1]])
    new_y = np.concatenate([[first or y[0] != y0], y[1:] != y[:-1]])
    sizes = highs + new_t + new_y + 1
    out = np.empty(int(sizes.sum()), np.int64)
    start = np.cumsum(sizes) - sizes
    ramp = _ramp(highs)  # word j of an event's TIME_HIGH run: 4095 (j even), 0, ..., period
    last = ramp == np.repeat(highs - 1, highs)
    value = np.where(last, np.repeat(period, highs), np.where(ramp % 2 == 0, 0xFFF, 0))
    out[np.repeat(start, highs) + ramp] = (0x8 << 12) | (value & 0xFFF)
    pos = start + highs
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
