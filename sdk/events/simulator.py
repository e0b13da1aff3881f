"""An event-camera (DVS) simulator: moving objects rendered to log intensity, pixel events.

Pixel model (as in ESIM and v2e, simplified): each pixel keeps a reference log intensity
``L_ref``. Between two rendered frames the log intensity moves linearly from ``L(t0)`` to
``L(t1)``; every crossing of ``L_ref +- C`` emits one ON/OFF event at the interpolated
crossing time and moves ``L_ref`` by ``C``. Contrast thresholds carry a per-pixel mismatch
(normal, ``sigma_threshold``). After an event a pixel is blind for ``refractory_us``; the
crossings it misses still move ``L_ref`` (the comparator resets regardless), a choice that keeps
the reference tied to the scene. Background activity is a Poisson process of ``noise_rate_hz``
events per pixel per second, uniform in time, position and polarity; hot pixels are a fixed
set firing ON events at ``hot_rate_hz``.

Scenes: a constant grey background and objects moving at constant velocity: ``car`` (a body,
a cabin and two dark wheels; the class to detect) and distractors ``blob`` (an ellipse) and
``bar`` (a thin rotated-looking rectangle). Edges are antialiased (pixel coverage), so sub-pixel
motion produces events as on a real sensor.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from neuroedge.events.core import EVENT_DTYPE, SensorSize, make_events

OBJECT_KINDS = ("car", "blob", "bar")


def _finite(owner: str, name: str, value: object, minimum: float | None = None) -> None:
    """ValueError unless ``value`` is a finite real (and >= ``minimum`` when given)."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not real or not math.isfinite(value):
        raise ValueError(f"{owner} {name} must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{owner} {name} must be >= {minimum}, got {value!r}")


def _whole(owner: str, name: str, value: object, minimum: int) -> None:
    """ValueError unless ``value`` is an integer >= ``minimum``."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{owner} {name} must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class DVSParams:
    """Pixel and noise parameters of the simulated sensor."""

    threshold: float = 0.2  # contrast threshold C, log-intensity units
    sigma_threshold: float = 0.02  # per-pixel threshold mismatch (std), log units
    refractory_us: int = 500  # dead time after an event, microseconds
    noise_rate_hz: float = 0.0  # background activity, events per pixel per second
    hot_pixels: int = 0  # number of stuck pixels
    hot_rate_hz: float = 200.0  # event rate of each hot pixel, per second

    def __post_init__(self) -> None:
        _finite("DVSParams", "threshold", self.threshold)
        if self.threshold <= 0:
            raise ValueError(f"DVSParams threshold must be > 0, got {self.threshold!r}")
        for name in ("sigma_threshold", "refractory_us", "noise_rate_hz", "hot_rate_hz"):
            _finite("DVSParams", name, getattr(self, name), 0)
        _whole("DVSParams", "hot_pixels", self.hot_pixels, 0)


@dataclass(frozen=True)
class MovingObject:
    """One object moving at constant velocity; (x, y) is its top-left corner at t = 0."""

    kind: str  # "car", "blob" or "bar"
    x: float  # pixels
    y: float  # pixels
    w: float  # width, pixels
    h: float  # height, pixels
    vx: float  # pixels per second
    vy: float  # pixels per second
    contrast: float  # intensity added (negative: darker than the background), 0..1 scale

    def __post_init__(self) -> None:
        if self.kind not in OBJECT_KINDS:
            raise ValueError(f"object kind {self.kind!r} is not one of {OBJECT_KINDS}")
        for name in ("x", "y", "vx", "vy", "contrast"):
            _finite("MovingObject", name, getattr(self, name))
        for name in ("w", "h"):
            _finite("MovingObject", name, getattr(self, name), 0)

    def box_at(self, t_us: float, sensor: SensorSize) -> tuple[float, float, float, float]:
        """(x, y, w, h) of the object at ``t_us`` clipped to the sensor."""
        x0, y0 = self.x + self.vx * t_us * 1e-6, self.y + self.vy * t_us * 1e-6
        x1, y1 = min(x0 + self.w, sensor.width), min(y0 + self.h, sensor.height)
        x0, y0 = max(x0, 0.0), max(y0, 0.0)
        return x0, y0, max(x1 - x0, 0.0), max(y1 - y0, 0.0)


def _box(gx: np.ndarray, gy: np.ndarray, x0: float, y0: float, w: float, h: float) -> np.ndarray:
    """Pixel coverage (0..1) of an axis-aligned box; pixel centres at integer + 0.5."""
    cx = np.clip(np.minimum(gx + 1 - x0, x0 + w - gx), 0, 1)
    cy = np.clip(np.minimum(gy + 1 - y0, y0 + h - gy), 0, 1)
    return cx[None, :] * cy[:, None]


def _ellipse(
    gx: np.ndarray,
    gy: np.ndarray,
    x0: float,
    y0: float,
    w: float,
    h: float,
) -> np.ndarray:
    rx, ry = max(w / 2, 0.5), max(h / 2, 0.5)
    dx = (gx + 0.5 - x0 - rx)[None, :] / rx
    dy = (gy + 0.5 - y0 - ry)[:, None] / ry
    return np.clip((1 - np.sqrt(dx**2 + dy**2)) * min(rx, ry) + 0.5, 0, 1)


def object_coverage(obj: MovingObject, t_us: float, sensor: SensorSize) -> np.ndarray:
    """The object's intensity contribution (H, W) at ``t_us`` (before the contrast factor)."""
    gx, gy = np.arange(sensor.width, dtype=np.float64), np.arange(sensor.height, dtype=np.float64)
    x0, y0 = obj.x + obj.vx * t_us * 1e-6, obj.y + obj.vy * t_us * 1e-6
    w, h = obj.w, obj.h
    if obj.kind == "blob":
        return _ellipse(gx, gy, x0, y0, w, h)
    if obj.kind == "bar":
        return _box(gx, gy, x0 + 0.4 * w, y0, 0.2 * w, h)
    body = _box(gx, gy, x0, y0 + 0.35 * h, w, 0.45 * h)
    cabin = _box(gx, gy, x0 + 0.25 * w, y0, 0.5 * w, 0.4 * h)
    r = 0.22 * min(w, h)
    wheels = _ellipse(gx, gy, x0 + 0.2 * w - r, y0 + h - 2 * r, 2 * r, 2 * r) + _ellipse(
        gx, gy, x0 + 0.8 * w - r, y0 + h - 2 * r, 2 * r, 2 * r
    )
    return np.clip(np.maximum(body, cabin) - 1.6 * np.clip(wheels, 0, 1), -1, 1)


def render_log_intensity(
    objects: list[MovingObject], times_us: np.ndarray, sensor: SensorSize, background: float = 0.5
) -> np.ndarray:
    """Log intensity frames (F, H, W) of the scene at ``times_us``."""
    frames = np.full((len(times_us), sensor.height, sensor.width), background)
    for i, t in enumerate(times_us):
        for obj in objects:
            frames[i] += obj.contrast * object_coverage(obj, float(t), sensor)
    return np.log(np.clip(frames, 0.02, None))


def log_frames_to_events(
    log_frames: np.ndarray, times_us: np.ndarray, params: DVSParams, rng: np.random.Generator
) -> np.ndarray:
    """Threshold-crossing events of a pixel array watching ``log_frames`` (see module doc)."""
    _, height, width = log_frames.shape
    threshold = np.clip(
        params.threshold + params.sigma_threshold * rng.standard_normal((height, width)), 0.05, None
    )
    ref = log_frames[0].copy()
    last = np.full((height, width), -(1 << 40), np.int64)
    chunks = []
    for i in range(1, len(times_us)):
        t0, t1 = int(times_us[i - 1]), int(times_us[i])
        diff = log_frames[i] - ref
        crossings = np.floor(np.abs(diff) / threshold).astype(np.int64)
        ys, xs = np.nonzero(crossings)
        if not len(ys):
            continue
        n, sign = crossings[ys, xs], np.sign(diff[ys, xs])
        start = log_frames[i - 1][ys, xs]
        slope = log_frames[i][ys, xs] - start
        for k in range(1, int(n.max()) + 1):
            live = n >= k
            level = ref[ys[live], xs[live]] + sign[live] * k * threshold[ys[live], xs[live]]
            frac = np.where(
                slope[live] != 0,
                (level - start[live]) / np.where(slope[live] != 0, slope[live], 1),
                1.0,
            )
            t = t0 + np.clip(frac, 0, 1) * (t1 - t0)
            t = t.astype(np.int64)
            yl, xl = ys[live], xs[live]
            ok = t - last[yl, xl] >= params.refractory_us
            last[yl[ok], xl[ok]] = t[ok]
            chunks.append(make_events(t[ok], xl[ok], yl[ok], (sign[live][ok] > 0)))
        ref[ys, xs] += sign * n * threshold[ys, xs]
    events = np.concatenate(chunks) if chunks else np.empty(0, EVENT_DTYPE)
    return events[np.argsort(events["t"], kind="stable")]


def noise_events(
    sensor: SensorSize, t0_us: int, t1_us: int, params: DVSParams, rng: np.random.Generator
) -> np.ndarray:
    """Background activity plus hot pixels over ``[t0_us, t1_us)``, sorted by time."""
    seconds = (t1_us - t0_us) * 1e-6
    n = rng.poisson(params.noise_rate_hz * sensor.width * sensor.height * seconds)
    ba = make_events(
        rng.integers(t0_us, t1_us, n),
        rng.integers(0, sensor.width, n),
        rng.integers(0, sensor.height, n),
        rng.integers(0, 2, n),
    )
    hot = []
    if params.hot_pixels:
        hx = rng.integers(0, sensor.width, params.hot_pixels)
        hy = rng.integers(0, sensor.height, params.hot_pixels)
        for x, y in zip(hx, hy):
            k = rng.poisson(params.hot_rate_hz * seconds)
            hot.append(
                make_events(rng.integers(t0_us, t1_us, k), np.full(k, x), np.full(k, y), np.ones(k))
            )
    events = np.concatenate([ba, *hot])
    return events[np.argsort(events["t"], kind="stable")]


def _check_simulate_args(
    objects: list[MovingObject],
    sensor: SensorSize,
    duration_us: int,
    params: DVSParams,
    seed: int,
    frame_us: int,
) -> None:
    if not isinstance(sensor, SensorSize):
        raise TypeError(f"sensor must be a SensorSize, got {type(sensor).__name__} {sensor!r}")
    if not isinstance(params, DVSParams):
        raise TypeError(f"params must be a DVSParams, got {type(params).__name__}")
    for i, obj in enumerate(objects):
        if not isinstance(obj, MovingObject):
            raise TypeError(f"objects[{i}] must be a MovingObject, got {type(obj).__name__}")
    _whole("simulate", "duration_us", duration_us, 1)
    _whole("simulate", "frame_us", frame_us, 1)
    _whole("simulate", "seed", seed, 0)


def simulate(
    objects: list[MovingObject],
    sensor: SensorSize,
    duration_us: int,
    params: DVSParams,
    seed: int,
    frame_us: int = 1000,
) -> np.ndarray:
    """Events of ``objects`` moving for ``duration_us``, rendered every ``frame_us``, plus the
    sensor noise of ``params``; reproducible from ``seed``."""
    _check_simulate_args(objects, sensor, duration_us, params, seed, frame_us)
    rng = np.random.default_rng(seed)
    times = np.arange(0, duration_us + 1, frame_us)
    if times[-1] != duration_us:  # frame_us does not divide duration_us: render the end too
        times = np.append(times, duration_us)
    signal = log_frames_to_events(render_log_intensity(objects, times, sensor), times, params, rng)
    merged = np.concatenate([signal, noise_events(sensor, 0, duration_us, params, rng)])
    merged = merged[np.argsort(merged["t"], kind="stable")]
    return merged[merged["t"] < duration_us]
