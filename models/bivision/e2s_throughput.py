"""The throughput rows of ``neuroedge bench event.bivision``: E2S against tonic's ``ToFrame``
on the same events (``events_file``; else the real EVT 2.0 recording of the shared test data,
or, where that is absent (an installed wheel, a clone without ``../shared``), a recording
generated here of the same size class, ``GENERATED``), tiled in time, timed side by side,
interleaved (``measure_side_by_side``), single thread each: rows ``e2s`` and
``tonic_toframe``. The rows' notes and the summary line name the recording used. tonic is
installed by ``make`` with ``--no-deps`` (it declares librosa), not by the wheel: without it
the ``tonic_toframe`` row and the ratio say "not measured" with the install line."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from neuroedge.errors import ConfigError
from neuroedge.models.bivision.bench_settings import MODEL, check_path
from neuroedge.types import Measurement, Report

if TYPE_CHECKING:
    from neuroedge.bench.latency import Latency


STEP_US = 20_000  # SFOD's T = 5 steps per 100 ms
TONIC_INSTALL = "pip install --no-deps tonic==1.7.0 expelliarmus==1.1.12 importRosbag==1.0.4"
# the stand-in for the shared sample (539,481 events in 50 ms on a 600x476 sensor): cars,
# blobs and bars moving over a 640x480 sensor plus background activity, ~0.5 M events
GENERATED = {
    "width": 640,
    "height": 480,
    "duration_us": 50_000,
    "objects": 12,
    "noise_rate_hz": 25.0,
    "seed": 0,
}


def _check_size(label: str, span: int, tiles: int, width: int, height: int, steps: int) -> None:
    """ConfigError naming the recording (``label``) and throughput_tiles when E2S of the tiled
    recording would allocate more than MAX_DENSE_ELEMENTS (before tiling, timing or
    allocating)."""
    from neuroedge.models.bivision.e2s import MAX_DENSE_ELEMENTS, dense_elements

    elements = dense_elements(width, height, steps, True)
    if elements > MAX_DENSE_ELEMENTS:
        raise ConfigError(
            f"{label}: events spanning {span} us x {tiles} tiles "
            f"(throughput_tiles) = {steps} E2S steps of {STEP_US} us on a {width}x{height} "
            f"sensor (largest x, y + 1) would allocate {elements:,} array elements; at most "
            f"{MAX_DENSE_ELEMENTS:,} (MAX_DENSE_ELEMENTS) are allowed: use a shorter recording, "
            "fewer throughput_tiles or a smaller sensor"
        )


def shared_recording() -> Path:
    """The real EVT 2.0 recording of the shared test data (``<repo>/../shared``); it exists
    in a checkout beside ``../shared`` only."""
    import neuroedge

    return (
        Path(neuroedge.__file__).resolve().parents[2]
        / "shared"
        / "data"
        / "events"
        / "evt2_sample.raw"
    )


def generated_recording(spec: Mapping[str, Any] | None = None) -> tuple[np.ndarray, str]:
    """Simulated events of ``spec`` (default ``GENERATED``; reproducible from its seed) and
    their description, ``"generated: N events, WxH, seed S"``."""
    spec = GENERATED if spec is None else spec
    from neuroedge.events.core import SensorSize
    from neuroedge.events.generate import random_object
    from neuroedge.events.simulator import DVSParams, simulate

    sensor, duration = SensorSize(spec["width"], spec["height"]), int(spec["duration_us"])
    rng = np.random.default_rng(spec["seed"])
    kinds = ("car", "blob", "bar")
    objects = [random_object(kinds[i % 3], sensor, duration, rng) for i in range(spec["objects"])]
    params = DVSParams(noise_rate_hz=spec["noise_rate_hz"], hot_pixels=2)
    events = simulate(objects, sensor, duration, params, seed=spec["seed"])
    size = f"{sensor.width}x{sensor.height}"
    return events, f"generated: {len(events)} events, {size}, seed {spec['seed']}"


def _base_recording(cfg: Mapping[str, Any]) -> tuple[np.ndarray, str, str]:
    """``(events, source, label)``: ``events_file``, else the shared sample, else a generated
    recording; ``source`` names it in the report, ``label`` in errors."""
    from neuroedge.events.io import read_events

    check_path(cfg, "events_file")
    given = cfg.get("events_file")
    path = Path(given or shared_recording())
    if given or path.is_file():
        return read_events(path), str(path), f"events_file={str(path)!r}"
    events, source = generated_recording()
    return events, source, f"the {source} recording (no events_file; {path} is absent)"


def tiled_recording(cfg: Mapping[str, Any]) -> tuple[str, np.ndarray, int, int, int, int]:
    """``(source, events, tiles, width, height, steps)``: the recording (``_base_recording``)
    tiled ``throughput_tiles`` times in time, checked before tiling; ``source`` is its path
    or ``"generated: ..."``."""
    base, source, label = _base_recording(cfg)
    if len(base) < 2:
        raise ValueError(f"{source}: {len(base)} events; the throughput bench needs at least 2")
    base["t"] -= base["t"][0]
    span = int(base["t"][-1]) + 1
    tiles = int(cfg["throughput_tiles"])
    width, height = int(base["x"].max()) + 1, int(base["y"].max()) + 1
    steps = -(-span * tiles // STEP_US)
    _check_size(label, span, tiles, width, height, steps)
    events = np.concatenate([base] * tiles)
    events["t"] += np.repeat(np.arange(tiles) * span, len(base))
    return source, events, tiles, width, height, steps


def tonic_to_frame(width: int, height: int) -> tuple[Callable[[np.ndarray], Any] | None, str]:
    """tonic's ``ToFrame`` for the sensor and ``""``, or None and why (the install line)."""
    try:
        import tonic.transforms
    except ImportError as err:
        return None, (
            f"tonic is not installed ({err}): {TONIC_INSTALL} (make does it; --no-deps: "
            "tonic declares librosa)"
        )
    return tonic.transforms.ToFrame(sensor_size=(width, height, 2), time_window=STEP_US), ""


def throughput_rows(cfg: Mapping[str, Any]) -> tuple[list[Report], str]:
    """Rows ``e2s`` and ``tonic_toframe``: events per second on the same events (the tonic
    row "not measured", with the install line, where tonic is missing)."""
    source, events, tiles, width, height, steps = tiled_recording(cfg)
    from neuroedge.bench.latency import measure_side_by_side
    from neuroedge.models.bivision.e2s import E2SParams, e2s

    params = E2SParams(steps=steps, step_us=STEP_US)
    to_frame, missing = tonic_to_frame(width, height)
    fns: dict[str, Callable[[], Any]] = {"e2s": lambda: e2s(events, width, height, params)}
    if to_frame is not None:
        fns["tonic_toframe"] = lambda: to_frame(events)
    e2s(events[:10], width, height, params)  # compile outside the timing
    timings = measure_side_by_side(fns, repeats=int(cfg["throughput_repeats"]), warmup=1, block=1)
    note = (
        f"{len(events)} events ({source}; x{tiles} in time), {width}x{height}, "
        f"{params.steps} steps of {STEP_US} us, one thread"
    )
    rows = [_row(name, len(events), lat, fns[name], note) for name, lat in timings.items()]
    if missing:
        skipped = Report(
            MODEL, "host", "tonic_toframe", rejections=(f"not measured: {missing}",), notes=(note,)
        )
        return [*rows, skipped], f"E2S vs tonic ToFrame: not measured ({missing})"
    ratio = rows[0].metrics["throughput_per_s"].value / rows[1].metrics["throughput_per_s"].value
    return rows, f"E2S vs tonic ToFrame, same events ({source}), same run: {ratio:.2f}x"


def _row(name: str, n: int, lat: Latency, fn: Callable[[], Any], note: str) -> Report:
    """One throughput row: ``n`` events per wall second (mean of ``lat``), per CPU second of
    this thread, and the p50 latency."""
    return Report(
        MODEL,
        "host",
        name,
        metrics={
            "throughput_per_s": Measurement(
                n / (float(np.mean(lat.times_ms)) / 1000.0), "events/s"
            ),
            "throughput_per_cpu_s": Measurement(n / _thread_seconds(fn), "events/CPU-s"),
            "latency_p50_ms": Measurement(lat.percentile(50), "ms"),
        },
        notes=(note,),
    )


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
