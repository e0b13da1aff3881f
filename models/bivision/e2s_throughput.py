"""The throughput rows of ``neuroedge bench event.bivision``: E2S against tonic's ``ToFrame``
on the same events (the real EVT 2.0 recording of the shared test data, tiled in time;
simulated events if it is absent), timed side by side, interleaved (``measure_side_by_side``),
single thread each: rows ``e2s`` and ``tonic_toframe``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.errors import ConfigError
from neuroedge.models.bivision.bench_settings import MODEL, check_path
from neuroedge.types import Measurement, Report


STEP_US = 20_000  # SFOD's T = 5 steps per 100 ms


def _check_size(path: Path, span: int, tiles: int, width: int, height: int, steps: int) -> None:
    """ConfigError naming events_file and throughput_tiles when E2S of the tiled recording
    would allocate more than MAX_DENSE_ELEMENTS (before tiling, timing or allocating)."""
    from neuroedge.models.bivision.e2s import MAX_DENSE_ELEMENTS, dense_elements

    elements = dense_elements(width, height, steps, True)
    if elements > MAX_DENSE_ELEMENTS:
        raise ConfigError(
            f"events_file={str(path)!r}: events spanning {span} us x {tiles} tiles "
            f"(throughput_tiles) = {steps} E2S steps of {STEP_US} us on a {width}x{height} "
            f"sensor (largest x, y + 1) would allocate {elements:,} array elements; at most "
            f"{MAX_DENSE_ELEMENTS:,} (MAX_DENSE_ELEMENTS) are allowed: use a shorter recording, "
            "fewer throughput_tiles or a smaller sensor"
        )


def shared_recording() -> Path:
    """The real EVT 2.0 recording of the shared test data (``<repo>/../shared``)."""
    import neuroedge

    return (
        Path(neuroedge.__file__).resolve().parents[2]
        / "shared"
        / "data"
        / "events"
        / "evt2_sample.raw"
    )


def tiled_recording(cfg: Mapping[str, Any]) -> tuple[Path, np.ndarray, int, int, int, int]:
    """``(path, events, tiles, width, height, steps)``: the recording (``events_file``, else
    ``shared_recording``) tiled ``throughput_tiles`` times in time, checked before tiling."""
    from neuroedge.events.io import read_events

    check_path(cfg, "events_file")
    path = Path(cfg.get("events_file") or shared_recording())
    base = read_events(path)
    if len(base) < 2:
        raise ValueError(f"{path}: {len(base)} events; the throughput bench needs at least 2")
    base["t"] -= base["t"][0]
    span = int(base["t"][-1]) + 1
    tiles = int(cfg["throughput_tiles"])
    width, height = int(base["x"].max()) + 1, int(base["y"].max()) + 1
    steps = -(-span * tiles // STEP_US)
    _check_size(path, span, tiles, width, height, steps)
    events = np.concatenate([base] * tiles)
    events["t"] += np.repeat(np.arange(tiles) * span, len(base))
    return path, events, tiles, width, height, steps


def throughput_rows(cfg: Mapping[str, Any]) -> tuple[list[Report], str]:
    """Rows ``e2s`` and ``tonic_toframe``: events per second on the same events."""
    path, events, tiles, width, height, steps = tiled_recording(cfg)
    import tonic.transforms
    from neuroedge.bench.latency import measure_side_by_side
    from neuroedge.models.bivision.e2s import E2SParams, e2s

    params = E2SParams(steps=steps, step_us=STEP_US)
    to_frame = tonic.transforms.ToFrame(sensor_size=(width, height, 2), time_window=STEP_US)
    e2s(events[:10], width, height, params)  # compile outside the timing
    timings = measure_side_by_side(
        {
            "e2s": lambda: e2s(events, width, height, params),
            "tonic_toframe": lambda: to_frame(events),
        },
        repeats=int(cfg["throughput_repeats"]),
        warmup=1,
        block=1,
    )
    cpu = {
        "e2s": lambda: e2s(events, width, height, params),
        "tonic_toframe": lambda: to_frame(events),
    }
    rows = []
    for name, lat in timings.items():
        rate = len(events) / (float(np.mean(lat.times_ms)) / 1000.0)
        rows.append(
            Report(
                MODEL,
                "host",
                name,
                metrics={
                    "throughput_per_s": Measurement(rate, "events/s"),
                    "throughput_per_cpu_s": Measurement(
                        len(events) / _thread_seconds(cpu[name]), "events/CPU-s"
                    ),
                    "latency_p50_ms": Measurement(lat.percentile(50), "ms"),
                },
                notes=(
                    (
                        f"{len(events)} events ({path.name} x{tiles}), {width}x{height}, "
                        f"{params.steps} steps of {STEP_US} us, one thread"
                    ),
                ),
            )
        )
    ratio = rows[0].metrics["throughput_per_s"].value / rows[1].metrics["throughput_per_s"].value
    return rows, f"E2S vs tonic ToFrame, same events, same run: {ratio:.2f}x"


def _thread_seconds(fn: Any, repeats: int = 3) -> float:
    """Best CPU time of this thread over ``repeats`` calls: the one-core cost of ``fn`` when
    other processes share the cores (wall time then includes their turns)."""
    import time

    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return max(best, 1e-9)
