"""The numba kernels of E2S and the event histogram (``neuroedge.models.bivision.e2s``).

This module imports numba; ``e2s.kernels()`` imports it on first use, so importing ``e2s``
does not. The kernels are module-level functions that call each other as globals, not
closures built by factories: a closure over other jitted functions (numba dispatchers) gets a
new on-disk cache key in every process (a dispatcher pickles with a per-process id), so
``retina`` was recompiled (2.2 s) and a 123 KB cache file added on every run until
2026-12-05; now a second process loads it from the cache (a test checks).

Speed (one thread, ``nogil``, profiled on a 600x476 recording of 5.4 M events):

* Pass 1 (``bin_events``) reads the time-sorted events once: the step index advances by
  comparison (no division), the bounds check is one branch on x and y compared as unsigned (a
  negative coordinate wraps above any sensor size), and each event is one saturating uint8
  increment ``c + (c < cap)`` (no branch). Counts go to a grid padded by one pixel on every
  side, rows rounded up to 8 bytes, with one empty plane in front for "step -1": the
  neighbour test then needs no border or first-step case.
* Pass 2 (``retina``) scans the count planes in memory order 8 bytes at a time (skipping the
  all-zero words, most of a sparse plane) and updates only pixels with events, since a pixel
  without input cannot fire: its potential decays lazily by ``lam ** steps_since_update``.
  Before a plane is updated, its active pixels are counted 8 bytes at a time (a nonzero-byte
  count by shifts and one multiply) to set ``k[t]`` and the temporal gate. A spike is stored
  as bit 7 of the pixel's count (counts saturate at 127, far above any threshold), so "a
  neighbour spiked one step ago" reads the same padded grid. Memory-order
  traversal keeps the neighbour, potential and output accesses sequential; the earlier
  design (a list of touched cells in event order, decoded with two integer divisions each)
  took 1.3-1.5x the CPU time.
"""

from __future__ import annotations

from collections.abc import Callable

from neuroedge.numba_cache import use_writable_cache

use_writable_cache()  # before numba reads NUMBA_CACHE_DIR (a read-only install)

import numba  # noqa: E402
import numpy as np  # noqa: E402
from neuroedge.models.bivision.e2s import E2S_CAP, EVENT_SUPPORT_CAP, SPIKE_BIT  # noqa: E402


@numba.njit(cache=True, nogil=True, fastmath=True)
def bin_events(t, x, y, p, t0, step_us, steps, width, height, counts, row, rows, origin, cap):
    """Count the window's events into the flat grid ``counts``: event (step, p, y, x) adds
    one, saturating at ``cap``, at ``origin + step * plane + (p * rows + y) * row + x`` with
    ``plane = 2 * rows * row``. Returns (status, steps used): status -1 on success, -2 - i
    for the first event i earlier than its predecessor, i for one off the sensor or of a
    polarity other than 0 or 1. Events before ``t0`` are skipped but still checked for order
    (``last_t`` starts at the first event, not at ``t0``)."""
    plane = 2 * rows * row
    wide, high = np.uint64(width), np.uint64(height)  # negative coordinates wrap above
    edge, step, at0 = t0 + step_us, 0, origin
    last_t = t[0] if t.shape[0] > 0 else t0
    for i in range(t.shape[0]):
        ti = t[i]
        if ti < last_t:
            return -2 - i, 0
        last_t = ti
        if ti < t0:
            continue
        while ti >= edge and step < steps:  # bounded: far-future events end the window
            step += 1
            edge += step_us
            at0 += plane
        if step >= steps:
            return -1, steps
        xi, yi, pi = np.int64(x[i]), np.int64(y[i]), np.int64(p[i])
        if (np.uint64(xi) >= wide) | (np.uint64(yi) >= high) | (np.uint64(pi) > 1):
            return i, 0
        at = at0 + (pi * rows + yi) * row + xi
        c = counts[at]
        counts[at] = c + (c < cap)
    return -1, min(step + 1, steps)


@numba.njit(cache=True, nogil=True)
def support_needed(k0, active, eps):
    """The smallest k >= k0 (at most 8) with P(Binomial(8, active) >= k) <= eps."""
    if eps <= 0.0:
        return k0
    tail, pmf = 1.0, (1.0 - active) ** 8
    for k in range(9):
        if k >= k0 and tail <= eps:
            return k
        tail -= pmf
        pmf *= (8 - k) / (k + 1) * active / max(1.0 - active, 1e-12)
    return 8


@numba.njit(cache=True, nogil=True)
def events_needed(k0, mean, eps):
    """The smallest k >= k0 (at most ``EVENT_SUPPORT_CAP``) with P(Poisson(mean) >= k)
    <= eps."""
    if eps <= 0.0:
        return k0
    tail, pmf = 1.0, np.exp(-mean)
    for k in range(EVENT_SUPPORT_CAP):
        if k >= k0 and tail <= eps:
            return k
        tail -= pmf
        pmf *= mean / (k + 1)
    return EVENT_SUPPORT_CAP


@numba.njit(cache=True, nogil=True, fastmath=True)
def plane_events(words, first, last):
    """Sum of the (spike-bit-free) byte counts in ``words[first:last]``."""
    low, lanes, total = np.uint64(0x7F7F7F7F7F7F7F7F), np.uint64(0x00FF00FF00FF00FF), 0
    for w in range(first, last):
        m = words[w] & low
        if m == 0:
            continue
        m = (m & lanes) + ((m >> np.uint64(8)) & lanes)
        total += np.int64((m * np.uint64(0x0001000100010001)) >> np.uint64(48))
    return total


@numba.njit(cache=True, nogil=True, fastmath=True)
def active_cells(words, first, last):
    """Nonzero bytes in ``words[first:last]`` (the pixels with events of one plane)."""
    ones, total = np.uint64(0x0101010101010101), np.uint64(0)
    for w in range(first, last):
        m = words[w]
        m |= m >> np.uint64(4)
        m |= m >> np.uint64(2)
        m |= m >> np.uint64(1)
        total += ((m & ones) * ones) >> np.uint64(56)
    return np.int64(total)


# inlined into ``retina`` (``inline="always"``), as the code it was taken from
@numba.njit(cache=True, nogil=True, fastmath=True, inline="always")
def plane_gate(words, first, last, cells, k0, eps, by_count):
    """(k[t], gain of an unsupported event) of the plane ``words[first:last]`` of ``cells``
    pixels, from its active pixels (and, counting events, its events)."""
    active = active_cells(words, first, last)
    density = active / cells
    if by_count:
        mean = 9.0 * plane_events(words, first, last) / cells
        need = events_needed(k0, mean, eps)
    else:
        need = support_needed(k0, density, eps)
    lone = np.float32(1.0) if eps <= 0.0 or density <= eps else np.float32(0.0)
    return need, lone


@numba.njit(cache=True, nogil=True, fastmath=True, inline="always")
def neighbours(at, row):
    """The 8 neighbours of the padded-grid index ``at`` (rows ``row`` bytes apart)."""
    return (
        at - row - 1,
        at - row,
        at - row + 1,
        at - 1,
        at + 1,
        at + row - 1,
        at + row,
        at + row + 1,
    )


# events_around and active_around are inlined into ``retina`` (numba IR inlining): called, or
# merged into one function with a ``by_count`` branch, they slowed ``retina`` by 5-10 %.
@numba.njit(cache=True, nogil=True, fastmath=True, inline="always")
def events_around(counts, at, row, plane, c):
    """n[t] counted in events: the other ``c - 1`` events of the pixel at ``at`` plus its 8
    neighbours' events now and spikes one step ago."""
    found = np.int64(c) - 1
    for q in neighbours(at, row):
        found += (counts[q] & E2S_CAP) + (counts[q - plane] >> 7)
    return found


@numba.njit(cache=True, nogil=True, fastmath=True, inline="always")
def active_around(counts, at, row, plane):
    """n[t] counted in neighbours: those of the 8 with an event now or a spike one step ago."""
    found = 0
    for q in neighbours(at, row):
        found += (counts[q] | (counts[q - plane] >> 7)) != 0
    return found


@numba.njit(cache=True, nogil=True, fastmath=True)
def retina(counts, used, row, leak, w_n, theta, k0, eps, by_count, spikes):
    """The E2S neuron on the padded counts of ``bin_events`` (plane 0 = step -1), for the
    first ``used`` steps; writes ``spikes`` (T, 2, H, W) and the spike bit of ``counts``."""
    steps, _, height, width = spikes.shape
    rows = height + 2
    plane = 2 * rows * row
    pows = np.empty(steps + 1, np.float32)
    pows[0] = 1.0
    for k in range(1, steps + 1):
        pows[k] = pows[k - 1] * leak
    v = np.zeros(plane, np.float32)
    updated = np.zeros(plane, np.int32)
    words = counts.view(np.uint64)
    gain = np.float32(1.0) + w_n
    for s in range(used):
        now = (s + 1) * plane
        for pol in range(2):
            first = (now + pol * rows * row) // 8
            need, lone = plane_gate(
                words, first, first + rows * row // 8, height * width, k0, eps, by_count
            )
            for yi in range(height):
                start = now + (pol * rows + yi + 1) * row  # column 0 is the left border
                for w in range(start // 8, (start + row) // 8):
                    if words[w] == 0:
                        continue
                    for at in range(w * 8, w * 8 + 8):
                        c = counts[at]
                        if c == 0:
                            continue
                        if by_count:
                            found = events_around(counts, at, row, plane, c)
                        else:
                            found = active_around(counts, at, row, plane)
                        drive = np.float32(c) * (gain if found >= need else lone)
                        cell = at - now
                        u = v[cell] * pows[s - updated[cell]] + drive
                        updated[cell] = s
                        if u >= theta:
                            counts[at] = c | SPIKE_BIT
                            spikes[s, pol, yi, at - start - 1] = 1
                            v[cell] = 0.0
                        else:
                            v[cell] = u
    return spikes


KERNELS: dict[str, Callable] = {
    "bin": bin_events,
    "retina": retina,
    "support_needed": support_needed,
}
