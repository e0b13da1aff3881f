"""An event-camera recording as event.bivision's input: ``neuroedge run event.bivision --events``.

A recording of any supported format (``.raw`` EVT 2.0/3.0, ``.dat``, ATIS ``.bin``,
``.aedat4``) is read in chunks, cropped to a square, scaled to the net's sensor side S and cut
into consecutive 100 ms windows (``data.represent_windows``), one batch entry each: the net
answers ``logits[T, N, 2]`` per window.

Decisions:

* **Windows** start at the recording's first event (rounded down to a 20 ms step), whatever
  the crop: the same time span gives the same windows under any crop, and windows in which
  nothing happened inside the crop are kept (all zero) rather than dropped.
* **Crop.** ``crop=(x0, y0, side)`` in the recording's pixels; by default the centred largest
  square of the sensor (a 640x480 sensor: x 80..559, all of y), or, for a sensor smaller than
  S, an S-pixel square centred on it (the sensor sits 1:1 in the middle, the rest is empty).
  An explicit ``side`` below S is refused: scaling up would light every (S / side)-th pixel.
* **Scale.** ``x' = (x - x0) * S // side`` (likewise y): each net pixel counts the input
  pixels that map onto it; for ``side`` a multiple of S that is plain binning (``x // k``),
  otherwise the bins alternate between two widths (720 -> 32: 22 and 23 pixels).
* **Sensor.** The header's when it states one; else the one a Prophesee header's camera plugin
  implies (``events.io.PLUGIN_SENSORS``, said so); else (ATIS ``.bin``, DAT without a size)
  the extent of the events read, said so: then the default crop follows what was read, and
  ``--crop`` fixes the geometry. Only a stated sensor bounds an explicit crop.
* **Length.** ``max_windows`` keeps the first windows; reading stops once the events pass
  them, so a long recording is not read whole for a short look, and the line printed says
  when the recording goes on. The default (``default_windows``) is 600 windows (60 s), fewer
  for a large S so that the batch stays under ``DEFAULT_INPUT_VALUES`` input values (S = 256:
  25 windows): the whole batch goes through the net in one call. The batch (float32) is
  allocated once for ``max_windows`` windows, its pages touched as windows are written, and
  trimmed in place to the windows read; a request over ``MAX_WINDOW_BYTES`` is refused
  before reading, naming ``--max-windows``.
* **Memory.** A recording is read in chunks of ``CHUNK_BYTES``: memory holds the batch and a
  chunk, not the recording. Without a stated sensor or a crop, the default crop needs the
  events' extent first: the recording (up to the windows' end) is read twice, once for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from neuroedge.errors import InputError
from neuroedge.events.core import EVENT_DTYPE, SensorSize
from neuroedge.models.bivision.e2s import MAX_DENSE_ELEMENTS

DEFAULT_MAX_WINDOWS = 600  # 60 s of 100 ms windows: a long recording is not read whole unasked
DEFAULT_INPUT_VALUES = 2**24  # ... nor a batch built that a large net cannot run at once
MAX_WINDOW_BYTES = 4 * MAX_DENSE_ELEMENTS  # a requested float32 batch over this is refused


def default_windows(size: int, steps: int = 5) -> int:
    """How many windows a recording gives by default for a net of side ``size``."""
    return max(1, min(DEFAULT_MAX_WINDOWS, DEFAULT_INPUT_VALUES // (steps * 2 * size * size)))


def square_crop(
    sensor: SensorSize, crop: tuple[int, int, int] | None, size: int, stated: bool = True
) -> tuple[int, int, int]:
    """``crop`` checked (against a ``stated`` sensor, and its side against the net's
    ``size``), or the default: the sensor's centred largest square, at least ``size``."""
    if crop is None:
        side = max(min(sensor.width, sensor.height), size)
        return (sensor.width - side) // 2, (sensor.height - side) // 2, side
    x0, y0, side = crop
    if side < size:
        raise InputError(
            f"crop side {side} is smaller than the net's {size} pixels: scaled up, the net "
            f"would see every {size / side:.3g}th pixel lit; give a side of at least {size}"
        )
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


CHUNK_BYTES = 1 << 22  # bytes of a recording read at a time


class _Read(NamedTuple):
    start: int  # the first window's start
    last: int  # the last time covered
    left: bool  # whether the recording goes on past the windows
    count: int  # events read
    extent: SensorSize  # of the events read


def check_window_bytes(windows: int, size: int, params: Any, given: bool = True) -> None:
    """InputError when ``windows`` windows (``given`` as --max-windows, else the default) for
    a net of side ``size`` take over ``MAX_WINDOW_BYTES`` bytes of float32 input, naming
    ``--max-windows`` and how many fit."""
    per_window = params.steps * 2 * size * size * np.dtype(np.float32).itemsize
    if windows * per_window <= MAX_WINDOW_BYTES:
        return
    fit = MAX_WINDOW_BYTES // per_window
    advice = f"give --max-windows {fit} or fewer" if fit else "use a net of smaller side"
    raise InputError(
        ("--max-windows " if given else "the default ") + f"{windows}: {windows} windows of "
        f"{params.steps * params.step_us // 1000} ms for a {size}x{size} net take "
        f"{windows * per_window:,} bytes of input ({per_window:,} each); at most "
        f"{MAX_WINDOW_BYTES:,} (MAX_WINDOW_BYTES) are allowed: {advice}"
    )


def _trimmed(out: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` windows of ``out`` (T, capacity, ...), C-contiguous in ``out``'s
    own memory: each step's windows moved down in place, the tail given back (``resize``)."""
    steps, capacity, *window = out.shape
    if count == capacity:
        return out
    size = int(np.prod(window)) * count  # values of one step's kept windows
    flat = out.reshape(-1)
    for k in range(1, steps):  # each target starts before its source: moved in order
        flat[k * size : (k + 1) * size] = flat[k * capacity * size // count :][:size]
    del flat
    out.resize(steps * size, refcheck=False)  # shrinks in place: no second batch
    return out.reshape(steps, count, *window)


def _read(
    path: Path, params: Any, max_windows: int, push: Callable[[np.ndarray, int], None]
) -> _Read:
    """Read ``path`` up to ``max_windows`` windows, handing each chunk (sorted, cut at the
    last window's end) to ``push(chunk, first window start)`` as it is read."""
    from neuroedge.events.io import stream_events
    from neuroedge.models.bivision.data import recording_start

    stop, left, count, last, width, height = None, False, 0, 0, 0, 0
    for chunk in stream_events(path, chunk_bytes=CHUNK_BYTES):
        if len(chunk) == 0:
            continue
        if stop is None:
            start = recording_start(chunk, params.step_us)
            stop = start + max_windows * params.steps * params.step_us
        if int(chunk["t"][-1]) >= stop:
            chunk, left = chunk[chunk["t"] < stop], True
        if len(chunk):
            count, last = count + len(chunk), int(chunk["t"][-1])
            width = max(width, int(chunk["x"].max()) + 1)
            height = max(height, int(chunk["y"].max()) + 1)
            push(chunk, start)
        if left:
            break
    if stop is None:
        raise InputError(f"{path}: the recording holds no events")
    return _Read(start, stop - 1 if left else last, left, count, SensorSize(width, height))


class _Windows:
    """Cropped events turned into network input window by window as the recording is read:
    a window is represented once a later event shows it complete, and its events dropped, so
    memory holds the output and one chunk, not the recording (``represent_windows`` on the
    whole cut gives the same array: each window is represented on its own)."""

    def __init__(
        self, crop: tuple[int, int, int], size: int, rep: str, params: Any, windows: int
    ) -> None:
        self.crop, self.size, self.rep, self.params = crop, size, rep, params
        self.span = params.steps * params.step_us
        self.pending: list[np.ndarray] = []
        # the batch, allocated once: a page is touched when a window is written to it
        self.out = np.zeros((params.steps, windows, 2, size, size), np.float32)
        self.next, self.kept = 0, 0  # the first window not represented; events in the crop

    def push(self, chunk: np.ndarray, start: int) -> None:
        cut = crop_and_scale(chunk, self.crop, self.size)
        self.kept += len(cut)
        self.pending.append(cut)
        complete = (int(chunk["t"][-1]) - start) // self.span  # windows before the current
        if complete > self.next:
            self._emit(start, start + complete * self.span - 1)

    def finish(self, start: int, last: int) -> np.ndarray:
        if (last - start) // self.span >= self.next:
            self._emit(start, last)
        return _trimmed(self.out, self.next)

    def _emit(self, start: int, last: int) -> None:
        """Represent windows ``next`` .. the one holding ``last``; keep later events."""
        from neuroedge.models.bivision.data import fill_windows

        events = np.concatenate(self.pending) if self.pending else np.zeros(0, EVENT_DTYPE)
        later = events["t"] > last
        self.pending = [events[later]]
        windows = (last - start) // self.span + 1  # at most max_windows: _read cuts there
        sensor = SensorSize(self.size, self.size)
        first = start + self.next * self.span
        out = self.out[:, self.next : windows]
        fill_windows(events[~later], sensor, self.rep, self.params, first, out)
        self.next = windows


def _known_sensor(path: Path) -> tuple[SensorSize, bool, str] | None:
    """(sensor, whether stated, how it was found) when the file says it (its header, or its
    camera plugin), else None."""
    from neuroedge.events.io import plugin_sensor, recording_sensor

    stated = recording_sensor(path)
    if stated is not None:
        return stated, True, "from the header"
    implied = plugin_sensor(path)
    if implied is not None:
        return implied[0], False, f"implied by its camera plugin {implied[1]}"
    return None


def _refuse_empty_crop(path: Path, kept: int, got: _Read, box: tuple[int, int, int]) -> None:
    if kept == 0:
        more = "; the recording goes on: --max-windows N reads more" if got.left else ""
        raise InputError(
            f"{path}: none of the {got.count} events read lies in the crop x {box[0]}.."
            f"{box[0] + box[2] - 1}, y {box[1]}..{box[1] + box[2] - 1}{more}"
        )


_EXTENT_HOW = "the extent of the events read: the file states none; --crop fixes it"


def recording_inputs(
    path: str | os.PathLike[str],
    config: Mapping[str, Any] | None = None,
    crop: tuple[int, int, int] | None = None,
    max_windows: int | None = None,
) -> tuple[dict[str, np.ndarray], str]:
    """({"x": (T, N, 2, S, S)}, a line saying what was read) for the net a build with
    ``config`` makes (its side S and representation: the checkpoint's, else the config's);
    ``max_windows`` None is ``default_windows(S)``."""
    from neuroedge.models.bivision.e2s import E2SParams
    from neuroedge.models.bivision.spec import built_geometry
    from neuroedge.models.bivision.train import VARIANTS

    path = Path(path)
    if max_windows is not None and (
        isinstance(max_windows, bool) or not isinstance(max_windows, int) or max_windows < 1
    ):
        raise InputError(f"--max-windows {max_windows!r}: expected an integer >= 1")
    size, variant = built_geometry(dict(config or {}))
    rep, params = VARIANTS[variant][1], E2SParams()
    windows = max_windows or default_windows(size)
    check_window_bytes(windows, size, params, max_windows is not None)
    known = _known_sensor(path)
    sensor, stated, how = known or (SensorSize(1, 1), False, _EXTENT_HOW)
    if known is None and crop is None:  # the default crop follows the events' extent:
        sensor = _read(path, params, windows, lambda chunk, start: None).extent  # a 1st pass
    box = square_crop(sensor, crop, size, stated)  # a given crop needs no sensor unstated
    sink = _Windows(box, size, rep, params, windows)
    got = _read(path, params, windows, sink.push)  # windows made while reading
    sensor = sensor if known is not None else got.extent
    _refuse_empty_crop(path, sink.kept, got, box)
    x = sink.finish(got.start, got.last)
    start, left = got.start, got.left
    line = (
        f"events {path}: {got.count:,} events read, sensor {sensor.width}x{sensor.height} "
        f"({how}), crop x0={box[0]} y0={box[1]} side={box[2]} -> {size}x{size}, "
        f"{sink.kept:,} events in {x.shape[1]} window{'s' * (x.shape[1] != 1)} of "
        f"{params.steps * params.step_us // 1000} ms ({rep}) from t={start} us"
        + ("; the recording goes on past them (--max-windows N reads more)" if left else "")
    )
    return {"x": x}, line
