"""E2S (Events-to-Spikes) and the event-histogram baseline, as numba kernels.

The paper states only that E2S keeps the representation spiking and mimics the memory and
noise filtering of retinal neurons. Our E2S (decisions and reasons):

1. Bin the window ``[t0, t0 + T*dt)`` into T steps; ``c[t]`` is the event count of a pixel and
   polarity in step t (the SFOD count histogram, which is also tonic's ``ToFrame``).
2. Spatial support, the classic background-activity filter (isolated events have no active
   neighbour): ``n[t]`` = the number of the 8 neighbours (same polarity) with an event in step
   t or a spike in step t-1, each counted once.
3. A leaky retina neuron per pixel and polarity (memory across steps), reset by its spike::

       v[t] = lam * v[t-1] * (1 - s[t-1]) + c[t] * (1 + w_n * 1[n[t] >= k])
       s[t] = 1[v[t] >= theta]

   With ``lam = 0.5, w_n = 1, theta = 1.5`` a lone noise event (v = 1) never fires, one with
   k supporting neighbours (v = 2) fires at once, and two events on the same pixel in
   consecutive steps (0.5 + 1) fire: temporal *or* spatial support is required, as in retinal
   filtering. ``k = 2`` (not 1): background activity of rate R Hz/pixel puts
   ``R * dt / 2`` noise events on a pixel and polarity per step, so with k = 1 a noise event
   finds a noisy neighbour with probability ``1 - exp(-8 R dt / 2)`` (33 % at 5 Hz/pixel,
   20 ms steps), with k = 2 far less (6 %). On the simulated sweep data (32x32 moving objects,
   measured by ``neuroedge.models.bivision.bench.filter_pass_fractions``) k = 2 halves
   the noise events that reach a spiking cell at 2-10 Hz/pixel while keeping 99.9 % of
   the signal events (moving edges are lines, so their events have two or more neighbours).
4. The output is binary spikes ``S in {0,1}^{T x 2 x H x W}``, so the first synaptic layer of
   the network performs accumulates (SOPs), not multiply-accumulates on counts.

Speed (single thread, ``nogil``): one pass over the time-sorted events (the step index advances
by comparison, no division) that also lists the (step, pixel) cells hit; the neuron update then
visits only those cells, since a cell without events cannot fire. Counts and spikes are uint8
(a dense float32 grid of a large sensor costs more memory traffic than the events).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class E2SParams:
    """Parameters of the E2S retina neuron (see the module docstring for the equations)."""

    steps: int = 5  # T, time steps per window
    step_us: int = 20_000  # dt, microseconds per step
    leak: float = 0.5  # lam, membrane memory per step
    support_weight: float = 1.0  # w_n, gain of a supported event
    threshold: float = 1.5  # theta
    min_support: int = 2  # k, active neighbours an event needs to count as supported

    def __post_init__(self) -> None:
        if self.steps < 1 or self.step_us < 1:
            raise ValueError(f"steps and step_us must be >= 1, got {self.steps}, {self.step_us}")
        if self.min_support < 1 or self.min_support > 8:
            raise ValueError(f"min_support must be in 1..8 neighbours, got {self.min_support}")
        if not 0.0 <= self.leak < 1.0 or self.threshold <= 0:
            raise ValueError(f"leak must be in [0, 1) and threshold > 0: {self}")


_KERNELS: dict[str, object] = {}


def _compile() -> dict[str, object]:
    if _KERNELS:
        return _KERNELS
    import numba

    @numba.njit(cache=True, nogil=True)
    def bin_events(t, x, y, p, t0, step_us, counts, cap, touched, bounds):
        """Add each event of the window to ``counts`` (T, 2, H, W), saturating at ``cap``;
        when ``touched`` has room, list the cells first hit in each step (step s owns
        ``touched[bounds[s]:bounds[s + 1]]``). Returns -1 on success or the index of the
        first event out of order (-2 - i) or off the sensor (i)."""
        steps, pols, height, width = counts.shape
        plane = pols * height * width
        record = touched.shape[0] > 0
        edge, step, last_t, n = t0 + step_us, 0, t0, 0
        flat = counts.reshape(-1)
        for i in range(t.shape[0]):
            ti = t[i]
            if ti < last_t:
                return -2 - i
            last_t = ti
            if ti < t0:
                continue
            while ti >= edge:
                step += 1
                edge += step_us
                if step < steps:
                    bounds[step] = n
            if step >= steps:
                break
            xi, yi, pi = x[i], y[i], p[i]
            if xi < 0 or yi < 0 or xi >= width or yi >= height or pi > 1:
                return i
            at = step * plane + (pi * height + yi) * width + xi
            count = flat[at]
            if record and count == 0:
                touched[n] = at - step * plane
                n += 1
            if count < cap:
                flat[at] = count + 1
        for s in range(step + 1, steps + 1):
            bounds[s] = n
        return -1

    @numba.njit(cache=True, nogil=True)
    def retina(counts, touched, bounds, leak, w_n, theta, need, spikes):
        """The E2S neuron over the (step, cell) pairs ``bin_events`` listed.

        Only a pixel with events in a step can reach threshold (without input its potential
        only decays), so the update visits the touched pairs and decays their potential
        lazily by ``leak ** steps_since_last_update``."""
        steps, pols, height, width = counts.shape
        plane = pols * height * width
        flat = counts.reshape(-1)
        pows = np.empty(steps + 1, np.float32)
        pows[0] = 1.0
        for k in range(1, steps + 1):
            pows[k] = pows[k - 1] * leak
        v = np.zeros(plane, np.float32)
        updated = np.zeros(plane, np.int64)
        spike_flat, hw = spikes.reshape(-1), height * width
        for s in range(steps):
            now, before = s * plane, (s - 1) * plane
            for k in range(bounds[s], bounds[s + 1]):
                cell = touched[k]
                rest = cell % hw
                i = rest // width
                j = rest - i * width
                found = 0  # neighbours active now or spiking one step ago, up to ``need``
                for di in range(max(i - 1, 0), min(i + 2, height)):
                    row = cell + (di - i) * width
                    for q in range(row + max(j - 1, 0) - j, row + min(j + 2, width) - j):
                        if q != cell and (flat[now + q] > 0
                                          or (s > 0 and spike_flat[before + q] > 0)):
                            found += 1
                            if found >= need:
                                break
                    if found >= need:
                        break
                supported = found >= need
                drive = flat[now + cell] * (1.0 + w_n) if supported else flat[now + cell]
                u = v[cell] * pows[s - updated[cell]] + drive
                if u >= theta:
                    spike_flat[now + cell] = 1
                    v[cell] = 0.0
                else:
                    v[cell] = u
                updated[cell] = s
        return spikes

    _KERNELS["bin"], _KERNELS["retina"] = bin_events, retina
    return _KERNELS


def _raise_for(status: int, events: np.ndarray, width: int, height: int) -> None:
    if status <= -2:
        i = -2 - status
        raise ValueError(f"event {i} (t={int(events['t'][i])} us) is earlier than event {i - 1}"
                         " (events must be sorted by time; see neuroedge.events.check_events)")
    if status >= 0:
        raise ValueError(f"event {status} {events[status].tolist()} is off the {width}x{height} "
                         "sensor or has polarity > 1")


def event_histogram(events: np.ndarray, width: int, height: int, steps: int, step_us: int,
                    t0: int = 0) -> np.ndarray:
    """Event counts (T, 2, H, W) float32 of the window ``[t0, t0 + steps*step_us)``.

    Raises ValueError naming the first event that is out of time order or off the sensor.
    """
    counts = np.zeros((steps, 2, height, width), np.float32)
    status = _compile()["bin"](events["t"], events["x"], events["y"], events["p"], int(t0),
                               int(step_us), counts, np.float32(np.inf),
                               np.empty(0, np.int64), np.zeros(steps + 1, np.int64))
    _raise_for(status, events, width, height)
    return counts


def e2s(events: np.ndarray, width: int, height: int, params: E2SParams = E2SParams(),
        t0: int = 0) -> np.ndarray:
    """Binary spikes (T, 2, H, W) uint8 of the E2S retina (module docstring).

    uint8 keeps the memory traffic of large sensors low (a spike is one byte); counts
    saturate at 255 events per pixel and step, far above any threshold."""
    counts = np.zeros((params.steps, 2, height, width), np.uint8)
    spikes = np.zeros((params.steps, 2, height, width), np.uint8)
    touched = np.empty(max(min(len(events), counts.size), 1), np.int64)
    bounds = np.zeros(params.steps + 1, np.int64)
    kernels = _compile()
    status = kernels["bin"](events["t"], events["x"], events["y"], events["p"], int(t0),
                            int(params.step_us), counts, np.uint8(255), touched, bounds)
    _raise_for(status, events, width, height)
    return kernels["retina"](counts, touched, bounds, np.float32(params.leak),
                             np.float32(params.support_weight), np.float32(params.threshold),
                             np.int64(params.min_support), spikes)
