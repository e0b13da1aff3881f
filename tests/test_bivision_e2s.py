"""event.bivision E2S: the kernel against its equations, noise filtering and support, refused
events, the histogram against tonic, and the SOP cost of the E2S front end."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from neuroedge.events import make_events
from neuroedge.models.bivision.e2s import E2SParams, e2s, event_histogram
from neuroedge.models.bivision.module import BiSNet


def support_needed(p: E2SParams, active: float) -> int:
    """k[t]: the least k >= k0 with P(Binomial(8, active) >= k) <= eps, at most 8."""
    if p.false_support == 0:
        return p.min_support
    for k in range(p.min_support, 9):
        tail = sum(math.comb(8, j) * active**j * (1 - active) ** (8 - j) for j in range(k, 9))
        if tail <= p.false_support:
            return k
    return 8


def events_needed(p: E2SParams, mean: float) -> int:
    """k[t] of count support: the least k >= k0 with P(Poisson(mean) >= k) <= eps."""
    if p.false_support == 0:
        return p.min_support
    for k in range(p.min_support, 64):
        tail = 1 - sum(math.exp(-mean) * mean**j / math.factorial(j) for j in range(k))
        if tail <= p.false_support:
            return k
    return 64


def e2s_reference(counts: np.ndarray, p: E2SParams) -> np.ndarray:
    """The E2S equations written densely, step by step (module docstring of e2s)."""
    steps, pols, height, width = counts.shape
    v, spikes = np.zeros((pols, height, width)), np.zeros(counts.shape, np.uint8)
    for t in range(steps):
        active = (counts[t] > 0).astype(float)
        prev = spikes[t - 1].astype(float) if t else np.zeros_like(active)
        if p.count_support:  # events of the 8 neighbours plus their spikes one step ago
            neighbour = counts[t] + prev
            support = counts[t] - 1.0
        else:  # neighbours active now or spiking one step ago, counted once
            neighbour = np.maximum(active, prev)
            support = np.zeros_like(active)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                if dy or dx:
                    shifted = np.zeros_like(active)
                    src = neighbour[
                        :, max(dy, 0) : height + min(dy, 0), max(dx, 0) : width + min(dx, 0)
                    ]
                    shifted[
                        :, max(-dy, 0) : height + min(-dy, 0), max(-dx, 0) : width + min(-dx, 0)
                    ] = src
                    support += shifted
        density = active.mean(axis=(1, 2))
        need = np.array(
            [
                events_needed(p, 9 * float(m)) if p.count_support else support_needed(p, float(d))
                for d, m in zip(density, counts[t].mean(axis=(1, 2)))
            ]
        )[:, None, None]
        lone = ((p.false_support == 0) | (density <= p.false_support)).astype(float)
        gain = np.where(support >= need, 1 + p.support_weight, lone[:, None, None])
        v = p.leak * v * (1 - prev) + counts[t] * gain
        spikes[t] = v >= p.threshold
    return spikes


def random_events(n: int, width: int, height: int, span: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return make_events(
        np.sort(rng.integers(0, span, n)),
        rng.integers(0, width, n),
        rng.integers(0, height, n),
        rng.integers(0, 2, n),
    )


@pytest.mark.parametrize("by_count", [True, False])
@pytest.mark.parametrize(
    "seed,min_support,eps,span,density",
    [
        (0, 1, 0.0, 4000, 150),
        (1, 2, 0.0, 4000, 150),
        (2, 3, 0.0, 4000, 150),
        (3, 2, 0.05, 4000, 150),
        (4, 2, 0.05, 6500, 40),
        (5, 1, 0.02, 9000, 60),
        (6, 3, 0.05, 4000, 400),
    ],
)
def test_e2s_kernel_equals_its_equations(seed, min_support, eps, span, density, by_count):
    """Spans past the 4-step window check that the last step is kept when later events are
    cut off; densities from 40 to 150 events per step (of 320 pixel pairs) move the adaptive
    support requirement through several values."""
    params = E2SParams(
        steps=4, step_us=1000, min_support=min_support, false_support=eps, count_support=by_count
    )
    events = random_events(density * span // 1000, 20, 16, span, seed)
    counts = event_histogram(events, 20, 16, 4, 1000)
    np.testing.assert_array_equal(e2s(events, 20, 16, params), e2s_reference(counts, params))


def test_e2s_filters_isolated_events_and_passes_supported_ones():
    params = E2SParams(steps=2, step_us=100)  # two active neighbours (sparse: k stays k0)
    lone = make_events(np.array([10]), np.array([5]), np.array([5]), np.array([1]))
    pair = make_events(np.array([10, 11]), np.array([5, 6]), np.array([5, 5]), np.array([1, 1]))
    corner = make_events(
        np.array([10, 11, 12]), np.array([5, 6, 5]), np.array([5, 5, 6]), np.array([1, 1, 1])
    )
    repeat = make_events(np.array([10, 150]), np.array([5, 5]), np.array([5, 5]), np.array([1, 1]))
    assert e2s(lone, 10, 10, params).sum() == 0
    assert e2s(pair, 10, 10, params).sum() == 0
    assert e2s(pair, 10, 10, E2SParams(steps=2, step_us=100, min_support=1, false_support=0))[
        0, 1, 5, 5:7
    ].tolist() == [1, 1]
    assert e2s(corner, 10, 10, params)[0, 1].sum() == 3  # each has the other two as neighbours
    assert e2s(repeat, 10, 10, params)[:, 1, 5, 5].tolist() == [0, 1]
    with pytest.raises(ValueError, match="min_support"):
        E2SParams(min_support=0)
    with pytest.raises(ValueError, match="false_support"):
        E2SParams(false_support=1.0)


def test_e2s_support_requirement_rises_with_background_activity():
    """Dense background noise raises k, so noise alone stops counting as support."""
    from neuroedge.events.core import SensorSize
    from neuroedge.events.simulator import DVSParams, noise_events

    sensor = SensorSize(32, 32)
    noise = noise_events(
        sensor, 0, 100_000, DVSParams(noise_rate_hz=30.0), np.random.default_rng(0)
    )
    fixed = e2s(noise, 32, 32, E2SParams(false_support=0.0)).sum()
    adaptive = e2s(noise, 32, 32).sum()
    assert support_needed(E2SParams(), 0.01) == 2 and support_needed(E2SParams(), 0.26) == 5
    assert adaptive < 0.5 * fixed


def test_e2s_event_support_keeps_a_moving_edge_in_dense_noise():
    """At 30 Hz/pixel most pixels are active, so counting active neighbours loses edge pixels;
    counting events keeps them (an edge puts several events per pixel) at no more noise."""
    from neuroedge.events.core import SensorSize
    from neuroedge.events.simulator import DVSParams, noise_events

    rng = np.random.default_rng(0)
    t, x, y = [], [], []
    for step in range(5):  # a 3-pixel ON band moving right by 5 pixels per step
        for col in range(4 + 5 * step, 7 + 5 * step):
            for row in range(8, 24):
                n = int(rng.integers(1, 4))
                t += list(step * 20_000 + rng.integers(0, 20_000, n))
                x += [col] * n
                y += [row] * n
    order = np.argsort(t)
    edge = make_events(
        np.array(t)[order], np.array(x)[order], np.array(y)[order], np.ones(len(t), int)
    )
    noise = noise_events(SensorSize(32, 32), 0, 100_000, DVSParams(noise_rate_hz=30.0), rng)
    events = np.concatenate([edge, noise])
    events = events[np.argsort(events["t"], kind="stable")]
    cells = np.zeros((5, 2, 32, 32), bool)
    cells[edge["t"] // 20_000, 1, edge["y"], edge["x"]] = True
    kept, noisy = {}, {}
    for by_count in (True, False):
        spikes = e2s(events, 32, 32, E2SParams(count_support=by_count)).astype(bool)
        kept[by_count], noisy[by_count] = spikes[cells].mean(), spikes[~cells].sum()
    assert kept[True] > 0.9 and kept[True] > kept[False] + 0.1
    assert noisy[True] <= 1.2 * noisy[False]


def test_e2s_rejects_unsorted_and_off_sensor_events_by_index():
    events = make_events(np.array([5, 3]), np.array([1, 1]), np.array([1, 1]), np.array([0, 0]))
    with pytest.raises(ValueError, match="event 1 .* earlier"):
        e2s(events, 4, 4)
    events = make_events(np.array([1, 3]), np.array([1, 9]), np.array([1, 1]), np.array([0, 0]))
    with pytest.raises(ValueError, match="event 1 .* off the 4x4 sensor"):
        e2s(events, 4, 4)
    events = make_events(np.array([1, 3]), np.array([1, 2]), np.array([1, -1]), np.array([0, 0]))
    with pytest.raises(ValueError, match="event 1 .* off the 4x4 sensor"):
        event_histogram(events, 4, 4, 2, 10)


def test_histogram_equals_tonic_toframe():
    transforms = pytest.importorskip("tonic.transforms")
    events = random_events(5000, 30, 20, 50_000, 3)
    events["t"][0] = 0
    frames = transforms.ToFrame(sensor_size=(30, 20, 2), time_window=10_000)(events)
    ours = event_histogram(events, 30, 20, len(frames), 10_000)
    np.testing.assert_array_equal(ours, frames)


def test_histogram_counts_past_float32s_last_exact_integer():
    # one pixel-step with 2**24 + 1000 events (one event repeated: no memory); counted in
    # float32, 2**24 + 1 rounded back down and the count stuck at 16,777,216
    n = 2**24 + 1000
    one = make_events(np.array([7]), np.array([2]), np.array([1]), np.array([1]))
    events = np.lib.stride_tricks.as_strided(one, shape=(n,), strides=(0,))
    counts = event_histogram(events, 4, 4, 1, 1000)
    assert counts.dtype == np.float32 and counts.shape == (1, 2, 4, 4)
    assert counts[0, 1, 1, 2] == n and counts.sum() == n  # n is a float32 (even)


def test_e2s_front_end_costs_accumulates_and_histograms_cost_macs():
    from neuroedge.bench.sops import OpCounter

    torch.manual_seed(0)
    counts = event_histogram(random_events(3000, 32, 32, 100_000, 5), 32, 32, 5, 20_000)
    spikes = e2s(random_events(3000, 32, 32, 100_000, 5), 32, 32).astype(np.float32)
    totals = {}
    for name, x in (("hist", counts), ("e2s", spikes)):
        net = BiSNet("lif", 32).eval()
        with OpCounter(net) as counter, torch.no_grad():
            net.forward_sequence(torch.from_numpy(x[:, None]))
        totals[name] = counter.totals(1)
    assert totals["e2s"].macs_per_sample < totals["hist"].macs_per_sample / 10
    # dense first conv: 16x16 outputs x 8 channels x 2x3x3 taps x 5 steps, less the zero border
    assert totals["hist"].macs_per_sample >= 0.95 * 16 * 16 * 8 * 18 * 5


def test_e2s_kernels_load_from_numbas_disk_cache_in_a_new_process(tmp_path: Path) -> None:
    # until 2026-12-05 ``retina`` closed over other jitted functions, whose pickled form
    # changes per process: every process missed the cache (2.2 s) and added a cache file
    script = tmp_path / "run_e2s.py"
    script.write_text(
        "import numpy as np\n"
        "from neuroedge.events import EVENT_DTYPE\n"
        "from neuroedge.models.bivision.e2s import e2s, kernels\n"
        "ev = np.zeros(64, EVENT_DTYPE)\n"
        "ev['t'] = np.arange(64) * 100\n"
        "ev['x'], ev['y'] = np.arange(64) % 8, np.arange(64) // 8\n"
        "e2s(ev, 8, 8)\n"
        "s = {k: kernels()[k].stats for k in ('bin', 'retina')}\n"
        "print({k: (len(v.cache_hits), len(v.cache_misses)) for k, v in s.items()})\n"
    )
    runs = [
        subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    assert runs[1].stdout.strip() == "{'bin': (1, 0), 'retina': (1, 0)}", runs[1].stdout
