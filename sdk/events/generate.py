"""Generate N-CARS-like (car / background) and Gen1-like (car boxes) datasets on disk.

Recordings are written in the real formats and layouts (DAT files; Gen1 ``*_bbox.npy``), so
the same loaders read generated and real data. Each recording lasts ``duration_us`` (100 ms,
as N-CARS samples). Gen1-like boxes are stamped at the end of the recording (``ts =
duration_us``), where a detector that has integrated the whole window should see the object.
The generator's configuration is written next to the data (``config.json``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from neuroedge.atomic import write_bytes, write_text
from neuroedge.events.core import SensorSize
from neuroedge.events.datasets import BOX_DTYPE, NCARS_CLASSES, write_boxes
from neuroedge.events.io import write_events
from neuroedge.events.simulator import DVSParams, MovingObject, simulate

CAR_CLASS = 0  # Gen1 class ids: 0 = car, 1 = pedestrian
MIN_BOX_PIXELS = 3.0  # boxes narrower or lower than this (clipped at the border) are dropped


@dataclass(frozen=True)
class GeneratorConfig:
    """What a generated dataset was made with (written to config.json)."""

    width: int = 64
    height: int = 64
    duration_us: int = 100_000
    noise_rate_hz: float = 0.0
    hot_pixels: int = 2
    seed: int = 0


def random_object(
    kind: str, sensor: SensorSize, duration_us: int, rng: np.random.Generator
) -> MovingObject:
    """An object of ``kind`` that is inside the sensor half-way through the recording."""
    scale = min(sensor.width, sensor.height)
    if kind == "car":
        w = rng.uniform(0.3, 0.5) * scale
        h = w * rng.uniform(0.55, 0.7)
    elif kind == "bar":
        w, h = rng.uniform(0.15, 0.3) * scale, rng.uniform(0.4, 0.7) * scale
    else:
        w = rng.uniform(0.2, 0.4) * scale
        h = w * rng.uniform(0.6, 1.4)
    speed = rng.uniform(120, 260) * rng.choice((-1, 1))
    vx, vy = speed, rng.uniform(-40, 40)
    mid = duration_us * 1e-6 / 2
    cx = rng.uniform(0.1, 0.9) * sensor.width - w / 2
    cy = rng.uniform(0.15, 0.85) * sensor.height - h / 2
    contrast = rng.uniform(0.25, 0.4) * rng.choice((-1, 1))
    return MovingObject(kind, cx - vx * mid, cy - vy * mid, w, h, vx, vy, contrast)


def keep_boxes(boxes: np.ndarray, width: float, height: float) -> np.ndarray:
    """The boxes of ``boxes`` ((n, 4 + k): x, y, w, h in pixels, then any columns such as a
    score, kept as they are) clipped to the ``width`` x ``height`` sensor, without those
    narrower or lower than ``MIN_BOX_PIXELS`` after clipping (or not finite).

    The one rule for both sides of detection scoring: the generated ground truth is made with
    it (a car that has mostly left the sensor gets no box), and detections pass through it
    before mAP, so a detector is not charged a false positive for a car sliver the ground truth
    leaves out (Prophesee's Gen1 ``filter_boxes`` likewise filters both sides alike). A box
    already inside the sensor keeps its coordinates bit for bit."""
    out = np.array(boxes, np.float64)  # a copy: the caller's boxes are left as they are
    out = out.reshape(-1, out.shape[-1] if out.ndim == 2 else 4)
    finite = np.isfinite(out[:, :4]).all(1)
    out[~finite, :4] = 0.0  # dropped below; zeroed so the clipping has no inf - inf
    for lo, size, limit in ((0, 2, width), (1, 3, height)):
        start, end = out[:, lo], out[:, lo] + out[:, size]
        outside = (start < 0) | (end > limit)
        clipped = np.minimum(end, limit) - np.maximum(start, 0.0)
        out[:, size] = np.where(outside, clipped, out[:, size])
        out[:, lo] = np.where(outside, np.maximum(start, 0.0), start)
    return out[finite & (np.minimum(out[:, 2], out[:, 3]) >= MIN_BOX_PIXELS)]


def _params(cfg: GeneratorConfig) -> DVSParams:
    return DVSParams(noise_rate_hz=cfg.noise_rate_hz, hot_pixels=cfg.hot_pixels)


def _write_config(root: Path, cfg: GeneratorConfig, kind: str, counts: dict) -> None:
    write_text(
        root / "config.json",
        json.dumps({"dataset": kind, **asdict(cfg), "counts": counts}, indent=2) + "\n",
    )


def make_ncars_like(
    root: str | os.PathLike[str],
    counts: dict[str, int],
    cfg: GeneratorConfig = GeneratorConfig(),
    progress: bool = True,
) -> Path:
    """Write ``counts[split]`` balanced car/background recordings per split (N-CARS layout)."""
    from tqdm import tqdm

    root, sensor = Path(root), SensorSize(cfg.width, cfg.height)
    rng = np.random.default_rng(cfg.seed)
    for split, n in counts.items():
        for i in tqdm(range(n), desc=f"N-CARS-like {split}", disable=not progress):
            label = i % 2
            kinds = ["car"] if label else [str(rng.choice(("blob", "bar")))]
            if rng.random() < 0.3:
                kinds.append(str(rng.choice(("blob", "bar"))))
            objects = [random_object(k, sensor, cfg.duration_us, rng) for k in kinds]
            events = simulate(
                objects, sensor, cfg.duration_us, _params(cfg), int(rng.integers(1 << 31))
            )
            path = root / split / NCARS_CLASSES[label] / f"obj_{i:06d}_td.dat"
            write_events(path, events, "dat", sensor=sensor)
    _write_config(root, cfg, "ncars_like", dict(counts))
    return root


def make_gen1_like(
    root: str | os.PathLike[str],
    counts: dict[str, int],
    cfg: GeneratorConfig = GeneratorConfig(),
    progress: bool = True,
) -> Path:
    """Write ``counts[split]`` recordings per split with 1-2 cars and 0-1 distractors, plus
    their ``*_bbox.npy`` car boxes at the end of each recording (Gen1 layout)."""
    from tqdm import tqdm

    root, sensor = Path(root), SensorSize(cfg.width, cfg.height)
    rng = np.random.default_rng(cfg.seed + 1)
    for split, n in counts.items():
        for i in tqdm(range(n), desc=f"Gen1-like {split}", disable=not progress):
            kinds = ["car"] * int(rng.integers(1, 3))
            kinds += [str(rng.choice(("blob", "bar")))] * int(rng.integers(0, 2))
            objects = [random_object(k, sensor, cfg.duration_us, rng) for k in kinds]
            events = simulate(
                objects, sensor, cfg.duration_us, _params(cfg), int(rng.integers(1 << 31))
            )
            boxes = keep_boxes(
                [o.box_at(cfg.duration_us, sensor) for o in objects if o.kind == "car"],
                sensor.width,
                sensor.height,
            )
            table = np.zeros(len(boxes), BOX_DTYPE)
            for j, (x, y, w, h) in enumerate(boxes):
                table[j] = (cfg.duration_us, x, y, w, h, CAR_CLASS, 1.0, j)
            stem = root / split / f"sample_{i:05d}"
            write_events(f"{stem}_td.dat", events, "dat", sensor=sensor)
            write_boxes(f"{stem}_bbox.npy", table)
    _write_config(root, cfg, "gen1_like", dict(counts))
    return root


def add_noise_to_dataset(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    noise_rate_hz: float,
    seed: int = 0,
    hot_pixels: int = 0,
) -> Path:
    """Copy a generated dataset folder, adding background activity (and hot pixels) to every
    ``.dat`` recording; box files and config are copied. Same scenes, more noise: a controlled
    noise sweep."""

    from neuroedge.events.io import read_events
    from neuroedge.events.simulator import noise_events

    src, dst = Path(src), Path(dst)
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8-sig"))
    sensor = SensorSize(int(cfg["width"]), int(cfg["height"]))
    params = DVSParams(noise_rate_hz=noise_rate_hz, hot_pixels=hot_pixels)
    for k, path in enumerate(sorted(src.rglob("*"))):
        target = dst / path.relative_to(src)
        if path.is_dir() or path.name == "config.json":
            continue
        if path.suffix != ".dat":
            target.parent.mkdir(parents=True, exist_ok=True)
            write_bytes(target, path.read_bytes())
            continue
        events = read_events(path, sensor=sensor)
        noise = noise_events(
            sensor, 0, int(cfg["duration_us"]), params, np.random.default_rng([seed, k])
        )
        merged = np.concatenate([events, noise])
        write_events(target, merged[np.argsort(merged["t"], kind="stable")], "dat", sensor=sensor)
    cfg.update(noise_rate_hz=noise_rate_hz, noise_seed=seed, added_hot_pixels=hot_pixels)
    write_text(dst / "config.json", json.dumps(cfg, indent=2) + "\n")
    return dst
