"""Latency the trtexec way: warm-up, timed synchronous calls, percentiles and throughput.

``measure_side_by_side`` interleaves several callables in short blocks, so a noisy machine
slows them alike and their ratio stays meaningful. Blocks (rather than single calls) keep one
runtime's idle worker threads from spinning through the other's timed call.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from neuroedge.types import Measurement


@dataclass(frozen=True)
class Latency:
    """Per-call wall times in milliseconds, and the batch each call processed."""

    times_ms: tuple[float, ...]
    batch: int = 1

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.times_ms, q))

    def metrics(self) -> dict[str, Measurement]:
        mean_s = float(np.mean(self.times_ms)) / 1000.0
        return {
            "latency_p50_ms": Measurement(self.percentile(50), "ms"),
            "latency_p90_ms": Measurement(self.percentile(90), "ms"),
            "latency_p99_ms": Measurement(self.percentile(99), "ms"),
            # a mean of 0 ms (a timer too coarse for the call) has no finite throughput
            "throughput_per_s": Measurement(
                self.batch / mean_s if mean_s > 0 else math.inf, "samples/s"
            ),
        }


def peak_rss_mb() -> float | None:
    """Peak resident memory of this process so far (ru_maxrss), in MB; None where it is not
    measured (Windows has no ``resource`` module)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def measure_latency(
    fn: Callable[[], object], *, repeats: int = 50, warmup: int = 5, batch: int = 1
) -> Latency:
    """Time ``repeats`` calls of ``fn`` after ``warmup`` untimed ones."""
    return measure_side_by_side({"fn": fn}, repeats=repeats, warmup=warmup, batch=batch)["fn"]


def measure_side_by_side(
    fns: Mapping[str, Callable[[], object]],
    *,
    repeats: int = 50,
    warmup: int = 5,
    batch: int = 1,
    block: int = 10,
) -> dict[str, Latency]:
    """Time each callable ``repeats`` times, interleaved in blocks of ``block`` calls; each
    block starts with one untimed call (``warmup`` untimed calls before the first)."""
    if repeats < 1 or block < 1 or warmup < 0:
        raise ValueError(
            f"repeats and block must be >= 1 and warmup >= 0, got {repeats}, {block}, {warmup}"
        )
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for first in range(0, repeats, block):
        for name, fn in fns.items():
            fn()
            for _ in range(min(block, repeats - first)):
                start = time.perf_counter_ns()
                fn()
                times[name].append((time.perf_counter_ns() - start) / 1e6)
    return {name: Latency(tuple(ts), batch) for name, ts in times.items()}
