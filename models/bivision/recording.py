"""An event-camera recording as event.bivision's input: ``neuroedge run event.bivision --events``.

A recording of any supported format (``.raw`` EVT 2.0/3.0, ``.dat``, ATIS ``.bin``,
``.aedat4``) is read in chunks, cropped to a square, scaled to the net's sensor side S and cut
into consecutive 100 ms windows (``data.represent_windows``), one batch entry each: the net
answers ``logits[T, N, 2]`` per window.

Decisions:

* **Crop.** ``crop=(x0, y0, side)`` in the recording's pixels; by default the centred largest
  square of the sensor (a 640x480 sensor: x 80..559, all of y). Events outside are dropped.
* **Scale.** ``x' = (x - x0) * S // side`` (likewise y): every output pixel pools the input
  pixels that map onto it, which for ``side`` a multiple of S is plain binning (``x // k``).
* **Sensor.** The header's when it states one (or the Prophesee camera plugin it names:
  ``events.io.PLUGIN_SENSORS``); ATIS ``.bin`` files and DAT files without a size state none,
  so the events' own extent (largest x and y + 1) is taken, said so, and bounds no explicit
  crop.
* **Length.** ``max_windows`` (default ``DEFAULT_MAX_WINDOWS``, 60 s) keeps the first
  windows; reading stops once the events pass them, so a long recording is not read whole
  for a short look, and the line printed says when the recording goes on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.errors import InputError
from neuroedge.events.core import SensorSize

DEFAULT_MAX_WINDOWS = 600  # 60 s of 100 ms windows: a long recording is not read whole unasked


def square_crop(
    sensor: SensorSize, crop: tuple[int, int, int] | None, stated: bool = True
) -> tuple[int, int, int]:
    """``crop`` checked against a ``stated`` sensor, or the sensor's centred largest square.
    A sensor taken from the events' extent bounds no explicit crop (the camera may be larger)."""
    if crop is None:
        side = min(sensor.width, sensor.height)
        return (sensor.width - side) // 2, (sensor.height - side) // 2, side
    x0, y0, side = crop
    if stated and (x0 + side > sensor.width or y0 + side > sensor.height):
        raise InputError(
            f"crop x {x0}..{x0 + side - 1}, y {y0}..{y0 + side - 1} leaves the "
            f"{sensor.width}x{sensor.height} sensor"
        )
    return crop


def crop_and_scale(events: np.ndarray, crop: tuple[int, int, int], size: int) -> np.ndarray:
    """The events inside the square ``crop`` with coordinates scaled to ``size`` pixels."""
    x0, y0, side = crop
    x, y = events["x"].astype(np.int64), events["y"].astype(np.int64)
    keep = (x >= x0) & (x < x0 + side) & (y >= y0) & (y < y0 + side)
    out = events[keep].copy()
    out["x"] = (x[keep] - x0) * size // side
    out["y"] = (y[keep] - y0) * size // side
    return out


def _read(
    path: Path, params: Any, max_windows: int | None
) -> tuple[np.ndarray, SensorSize | None, bool]:
    """(events, stated sensor, whether events were left) of ``path``, stopping after
    ``max_windows`` windows."""
    from neuroedge.events.io import recording_sensor, stream_events
    from neuroedge.models.bivision.data import recording_start

    chunks, stop, left = [], None, False
    for chunk in stream_events(path):
        if len(chunk) == 0:
            continue
        if stop is None and max_windows is not None:
            start = recording_start(chunk, params.step_us)
            stop = start + max_windows * params.steps * params.step_us
        if stop is not None and int(chunk["t"][-1]) >= stop:
            chunks.append(chunk[chunk["t"] < stop])
            left = True
            break
        chunks.append(chunk)
    if not chunks or not sum(len(c) for c in chunks):
        raise InputError(f"{path}: the recording holds no events")
    return np.concatenate(chunks), recording_sensor(path), left


def recording_inputs(
    path: str | os.PathLike[str],
    config: Mapping[str, Any] | None = None,
    crop: tuple[int, int, int] | None = None,
    max_windows: int | None = DEFAULT_MAX_WINDOWS,
) -> tuple[dict[str, np.ndarray], str]:
    """({"x": (T, N, 2, S, S)}, a line saying what was read) for the net a build with
    ``config`` makes (its side S and representation: the checkpoint's, else the config's).
    ``max_windows`` None reads the whole recording."""
    from neuroedge.models.bivision.data import represent_windows
    from neuroedge.models.bivision.e2s import E2SParams
    from neuroedge.models.bivision.spec import built_geometry
    from neuroedge.models.bivision.train import VARIANTS

    path = Path(path)
    if max_windows is not None and max_windows < 1:
        raise InputError(f"--max-windows {max_windows}: expected an integer >= 1")
    cfg = dict(config or {})
    size, variant = built_geometry(cfg)
    rep = VARIANTS[variant][1]
    params = E2SParams()
    events, sensor, left = _read(path, params, max_windows)
    stated, how = sensor is not None, "from the header"
    if sensor is None:
        sensor = SensorSize(int(events["x"].max()) + 1, int(events["y"].max()) + 1)
        how = "the events' extent: the file states none"
    box = square_crop(sensor, crop, stated)
    cut = crop_and_scale(events, box, size)
    if len(cut) == 0:
        raise InputError(
            f"{path}: none of its {len(events)} events lies in the crop x {box[0]}.."
            f"{box[0] + box[2] - 1}, y {box[1]}..{box[1] + box[2] - 1}"
        )
    try:
        x = represent_windows(cut, SensorSize(size, size), rep, params, max_windows)
    except ValueError as err:
        raise InputError(f"{path}: {err}") from None
    line = (
        f"events {path}: {len(events):,} events, sensor {sensor.width}x{sensor.height} ({how}), "
        f"crop x0={box[0]} y0={box[1]} side={box[2]} -> {size}x{size}, {len(cut):,} events in "
        f"{x.shape[1]} window{'s' * (x.shape[1] != 1)} of "
        f"{params.steps * params.step_us // 1000} ms ({rep})"
        + ("; the recording goes on past them (--max-windows N reads more)" if left else "")
    )
    return {"x": x}, line
