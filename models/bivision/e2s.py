"""E2S (Events-to-Spikes) and the event-histogram baseline, as numba kernels.

The paper states only that E2S keeps the representation spiking and mimics the memory and
noise filtering of retinal neurons. Our E2S (decisions and reasons):

1. Bin the window ``[t0, t0 + T*dt)`` into T steps; ``c[t]`` is the event count of a pixel and
   polarity in step t (the SFOD count histogram, which is also tonic's ``ToFrame``).
2. Spatial support, the classic background-activity filter (isolated events have no active
   neighbour), counted in events (``count_support=True``, the default): ``n[t]`` = the other
   events of the pixel in step t (``c[t] - 1``) plus the events of its 8 neighbours (same
   polarity) in step t plus the number of those neighbours that spiked in step t-1. With
   ``count_support=False`` (the earlier rule) ``n[t]`` is the number of the 8 neighbours with
   an event in step t or a spike in step t-1, each counted once.
3. A leaky retina neuron per pixel and polarity (memory across steps), reset by its spike::

       v[t] = lam * v[t-1] * (1 - s[t-1]) + c[t] * g[t]
       g[t] = 1 + w_n  if n[t] >= k[t]   else   1[a[t] <= eps]
       s[t] = 1[v[t] >= theta]

   With ``lam = 0.5, w_n = 1, theta = 1.5`` a lone noise event (v = 1) never fires, one with
   k supporting events (v = 2) fires at once, and two events on the same pixel in
   consecutive steps (0.5 + 1) fire: temporal *or* spatial support is required, as in retinal
   filtering.
4. Support adapts to the background activity, as retinal gain control does (decision: the
   paper gives no equation; a fixed rule either rejects signal on clean data or passes noise
   on noisy data). ``a[t]`` is the fraction of pixels of that polarity with events in step t
   and ``m[t]`` their mean event count per pixel:

   * spatial, counted in events: ``k[t] = min{k >= k0 : P(Poisson(9 m[t]) >= k) <= eps}``
     (at most 64), the fewest events in the 3x3 block that background activity of that
     density supplies with probability at most ``eps`` (0.05); with ``count_support=False``,
     ``k[t] = min{k >= k0 : P(Binomial(8, a[t]) >= k) <= eps}`` (at most 8) neighbours;
   * temporal: unsupported events count (``g = 1``, so a repeat on the same pixel can fire)
     only while ``a[t] <= eps``; above it a repeat is no evidence (it happens by chance more
     often than ``eps``), so only spatially supported events drive the neuron.

   ``eps = 0`` switches adaptation off (``k = k0``, ``g = 1`` for unsupported events).
   ``k0 = 2`` (not 1): on sparse data one noisy neighbour is already likely
   (``1 - exp(-8 R dt / 2)``, 33 % at 5 Hz/pixel and 20 ms steps). Background activity of
   R Hz/pixel makes ``a ~ 1 - exp(-R dt / 2)``: 26 % at 30 Hz/pixel, where the neighbour rule
   asks for 5 of 8 neighbours and the event rule for about 8 events in the 3x3 block.

   Why events, not neighbours (decision, measured): at high background activity most pixels
   have an event, so "is the neighbour active" carries little information, while a moving
   edge puts *several* events on each of its pixels (a band crossed by a contrast edge),
   which noise rarely does. On the sweep data at 30 Hz/pixel (per active cell, 96 test
   recordings), 3x3 event sums at the threshold keeping 94 % of the scene cells pass 3.5 % of
   the noise cells, while active-neighbour counts keep 86.5 % of the scene at 4.6 % noise.
   ``neuroedge.models.bivision.noise_sweep.filter_pass_fractions`` (fraction of scene / noise
   events landing in a spiking cell): neighbour rule at 30 Hz/pixel 82 % of the scene
   (10 % of the noise), at 10 Hz 95 % (12 %), clean 97.5 %; event rule at 30 Hz 96.5 %
   (11 %), at 10 Hz 97.5 % (12 %), clean 98 %. The neighbour rule's loss of scene events at
   30 Hz looked like what cost STATNF + E2S accuracy and mAP there: ``neuroedge bench
   event.bivision`` means over seeds 0-2 at 30 Hz/pixel went from 0.635 accuracy / 0.114
   mAP50 (neighbour rule) to 0.747 / 0.140 (event rule) in the runs made when the rule
   changed, but the committed code rerun later (same seeds; reruns are deterministic) gives
   0.653 / 0.117 for the event rule, so that gain is not established by the sweep; the pass
   fractions above are. The noise fraction stays near 10 %
   in both because a noise event landing on a scene pixel counts as passed. On clean data
   the two rules differ in 2 % of the spike cells (same spike total).
5. The output is binary spikes ``S in {0,1}^{T x 2 x H x W}``, so the first synaptic layer of
   the network performs accumulates (SOPs), not multiply-accumulates on counts.

The numba kernels (and their speed) are in ``neuroedge.models.bivision.e2s_kernels``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SPIKE_BIT = 128  # bit 7 of a padded E2S count: the pixel spiked in that step
E2S_CAP = 127  # E2S counts saturate here (below the spike bit)
EVENT_SUPPORT_CAP = 64  # the most supporting events the adaptive rule may ask for
# The most array elements (bytes for E2S, float32 for the histogram) one call may allocate:
# 1 GiB of uint8 for E2S, 4 GiB for the histogram. The shipped recordings need at most 92M at
# the throughput bench's 10 tiles (sample.aedat4: 295 steps of 20 ms, 320x240); a 1280x720
# sensor fits about 290 E2S steps (5.8 s at 20 ms). Larger is refused before allocating.
MAX_DENSE_ELEMENTS = 2**30
HISTOGRAM_BLOCK = 1 << 20  # counts converted to float32 at a time


def kernels() -> dict[str, Callable]:
    """The compiled kernels by name (``bin``, ``retina``, ``support_needed``); numba is
    imported on the first call (``e2s_kernels``), compiled code comes from its disk cache."""
    from neuroedge.models.bivision.e2s_kernels import KERNELS

    return KERNELS


@dataclass(frozen=True)
class E2SParams:
    """Parameters of the E2S retina neuron (see the module docstring for the equations)."""

    steps: int = 5  # T, time steps per window
    step_us: int = 20_000  # dt, microseconds per step
    leak: float = 0.5  # lam, membrane memory per step
    support_weight: float = 1.0  # w_n, gain of a supported event
    threshold: float = 1.5  # theta
    min_support: int = 2  # k0, the fewest active neighbours that count as support
    false_support: float = 0.05  # eps, accepted chance of support by chance (0: no adaptation)
    count_support: bool = True  # support = events in the 3x3 block (else active neighbours)

    def __post_init__(self) -> None:
        _positive_int("steps", self.steps)
        _positive_int("step_us", self.step_us)
        _int_in("min_support", self.min_support, 1, 8)
        _real_in("leak", self.leak, 0.0, 1.0, "in [0, 1)")
        _real_in("support_weight", self.support_weight, 0.0, np.inf, ">= 0 and finite")
        _real_in("threshold", self.threshold, 0.0, np.inf, "> 0 and finite", low_open=True)
        _real_in("false_support", self.false_support, 0.0, 1.0, "in [0, 1)")
        if not isinstance(self.count_support, (bool, np.bool_)):
            raise ValueError(f"count_support must be a bool, got {self.count_support!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _positive_int(name: str, value: object) -> None:
    """Raise ValueError unless ``value`` is an integer >= 1 (a zero or negative step would
    never advance the binning loop)."""
    if not _is_int(value) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _int_in(name: str, value: object, low: int, high: int) -> None:
    if not _is_int(value) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")


def _real_in(
    name: str, value: object, low: float, high: float, expected: str, low_open: bool = False
) -> None:
    """Raise ValueError unless ``value`` is a real number in ``[low, high)`` (``(low, high)``
    with ``low_open``); NaN and infinities fail, ``expected`` words the range."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )
    if ok:
        ok = (
            bool(np.isfinite(value))
            and (low < value if low_open else low <= value)
            and value < high
        )
    if not ok:
        raise ValueError(f"{name} must be a finite number {expected}, got {value!r}")


def check_input(
    events: np.ndarray, width: object, height: object, steps: object, step_us: object, t0: object
) -> None:
    """Raise ValueError unless the sizes are integers >= 1, ``t0`` an integer and ``events`` a
    1-D structured array with integer fields t, x, y, p (``neuroedge.events.EVENT_DTYPE``,
    ``as_events``). Values (order, sensor bounds, polarity in {0, 1}) are checked per event
    in the window by the binning kernel."""
    for name, value in (("width", width), ("height", height)):
        _positive_int(name, value)
    _positive_int("steps", steps)
    _positive_int("step_us", step_us)
    if not _is_int(t0):
        raise ValueError(f"t0 must be an integer (microseconds), got {t0!r}")
    names = getattr(getattr(events, "dtype", None), "names", None)
    if not isinstance(events, np.ndarray) or names is None or events.ndim != 1:
        got = getattr(events, "dtype", type(events).__name__)
        shape = getattr(events, "shape", None)
        raise ValueError(
            "events must be a 1-D numpy structured array with integer fields t, x, y, p "
            f"(neuroedge.events.EVENT_DTYPE; see as_events / make_events), got {got} of "
            f"shape {shape}"
        )
    for field in ("t", "x", "y", "p"):
        if field not in names:
            raise ValueError(f"events lack field {field!r} (have {list(names)})")
        kind = events.dtype[field]
        if not np.issubdtype(kind, np.integer):
            raise ValueError(
                f"events field {field!r} must have an integer dtype, got {kind} (fractional "
                "coordinates, times or polarities would be truncated; convert them first)"
            )


def dense_elements(width: int, height: int, steps: int, e2s_layout: bool) -> int:
    """Array elements allocated by ``event_histogram`` (T x 2 x H x W float32) or, with
    ``e2s_layout``, by ``e2s`` (padded uint8 counts of T + 1 steps, T x 2 x H x W uint8 spikes)."""
    out = steps * 2 * height * width
    if not e2s_layout:
        return out
    return (steps + 1) * 2 * (height + 2) * (-(-(width + 2) // 8) * 8) + out


def check_dense_size(width: int, height: int, steps: int, step_us: int, e2s_layout: bool) -> int:
    """``dense_elements``; ValueError naming the time span, bin width, sensor size and element
    count when it exceeds MAX_DENSE_ELEMENTS."""
    elements = dense_elements(width, height, steps, e2s_layout)
    if elements > MAX_DENSE_ELEMENTS:
        what = "E2S" if e2s_layout else "the event histogram"
        raise ValueError(
            f"{what} of a {steps * step_us} us window ({steps} steps of {step_us} us) on a "
            f"{width}x{height} sensor would allocate {elements:,} array elements; at most "
            f"{MAX_DENSE_ELEMENTS:,} (MAX_DENSE_ELEMENTS) are allowed: use a shorter window "
            "(fewer steps), coarser bins (a larger step_us) or a smaller sensor"
        )
    return elements


def _native(field: np.ndarray) -> np.ndarray:
    return field if field.dtype.isnative else field.astype(field.dtype.newbyteorder("="))


def _bin(
    events: np.ndarray,
    width: int,
    height: int,
    steps: int,
    step_us: int,
    t0: int,
    counts: np.ndarray,
    row: int,
    rows: int,
    origin: int,
    cap: float | int,
) -> int:
    """Run ``bin_events`` on a structured event array; raise ValueError naming a bad event.
    Fields in non-native byte order (a big-endian file's dtype) are swapped first: the kernel
    reads raw native integers."""
    t, x, y, p = (_native(events[f]) for f in "txyp")
    status, used = kernels()["bin"](
        t,
        x,
        y,
        p,
        int(t0),
        int(step_us),
        int(steps),
        int(width),
        int(height),
        counts,
        int(row),
        int(rows),
        int(origin),
        cap,
    )
    if status <= -2:
        i = -2 - status
        raise ValueError(
            f"event {i} (t={int(events['t'][i])} us) is earlier than event {i - 1}"
            " (events must be sorted by time; see neuroedge.events.check_events)"
        )
    if status >= 0:
        raise ValueError(
            f"event {status} {events[status].tolist()} is off the {width}x{height} "
            "sensor or has a polarity other than 0 or 1"
        )
    return int(used)


def event_histogram(
    events: np.ndarray, width: int, height: int, steps: int, step_us: int, t0: int = 0
) -> np.ndarray:
    """Event counts (T, 2, H, W) float32 of the window ``[t0, t0 + steps*step_us)``.

    Events before ``t0`` are skipped. Raises ValueError on a bad argument or event array
    (``check_input``), a tensor over MAX_DENSE_ELEMENTS (``check_dense_size``), and naming the
    first event that is out of time order, off the sensor or of polarity other than 0 or 1.
    Counted in int32 (a float32 count stops at 2**24: 2**24 + 1 rounds back down), then
    converted in place, block by block: the result is float32 nearest the exact count.
    """
    check_input(events, width, height, steps, step_us, t0)
    check_dense_size(width, height, steps, step_us, False)
    counts = np.zeros(steps * 2 * height * width, np.int32)
    cap = np.int32(np.iinfo(np.int32).max)
    _bin(events, width, height, steps, step_us, t0, counts, width, height, 0, cap)
    out = counts.view(np.float32)  # the same memory: no second tensor of the sensor's size
    for at in range(0, len(counts), HISTOGRAM_BLOCK):
        out[at : at + HISTOGRAM_BLOCK] = counts[at : at + HISTOGRAM_BLOCK].astype(np.float32)
    return out.reshape(steps, 2, height, width)


def e2s(
    events: np.ndarray, width: int, height: int, params: E2SParams = E2SParams(), t0: int = 0
) -> np.ndarray:
    """Binary spikes (T, 2, H, W) uint8 of the E2S retina (module docstring).

    uint8 keeps the memory traffic of large sensors low (a spike is one byte). Events before
    ``t0`` are skipped; input errors raise ValueError as in ``event_histogram``."""
    check_input(events, width, height, params.steps, params.step_us, t0)
    check_dense_size(width, height, params.steps, params.step_us, True)
    row = -(-(width + 2) // 8) * 8  # padded row, whole 8-byte words
    plane = 2 * (height + 2) * row
    counts = np.zeros((params.steps + 1) * plane, np.uint8)
    used = _bin(
        events,
        width,
        height,
        params.steps,
        params.step_us,
        t0,
        counts,
        row,
        height + 2,
        plane + row + 1,
        np.uint8(E2S_CAP),
    )
    spikes = np.zeros((params.steps, 2, height, width), np.uint8)
    return kernels()["retina"](
        counts,
        used,
        row,
        np.float32(params.leak),
        np.float32(params.support_weight),
        np.float32(params.threshold),
        np.int64(params.min_support),
        np.float64(params.false_support),
        bool(params.count_support),
        spikes,
    )
