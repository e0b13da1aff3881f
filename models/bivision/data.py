"""Load N-CARS-like and Gen1-like folders into network inputs (E2S spikes or histograms).

Representations (T steps of ``step_us`` from the recording's first step, ``recording_start``;
two polarity channels):

* ``e2s``: binary E2S spikes (``neuroedge.models.bivision.e2s``), the STATNF model's input.
* ``histogram``: ``log(1 + n)`` of the event count n per step and polarity (the counts are
  SFOD's / tonic ``ToFrame``'s), the baseline's. Decision: the log keeps the count order but
  stops a few busy pixels (up to tens of events per step) from saturating the first LIF layer;
  on raw counts the baseline trained to 0.58 accuracy / 0.07 mAP50 on clean data, with the log
  to 0.67 / 0.15 (same budget), so the comparison with E2S is against a fair baseline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
from neuroedge.events.core import SensorSize
from neuroedge.events.datasets import gen1_files, ncars_files, read_boxes
from neuroedge.events.io import read_events
from neuroedge.models.bivision.e2s import E2SParams, e2s, event_histogram

REPRESENTATIONS = ("e2s", "histogram")
TASKS = ("classification", "detection")  # N-CARS-like and Gen1-like folders
DEFAULT_E2S = E2SParams()  # T = 5 steps of 20 ms (SFOD)


class EventSet(NamedTuple):
    x: np.ndarray  # (N, T, 2, H, W) float32
    labels: np.ndarray  # (N,) int64 class (classification) or zeros
    boxes: list[np.ndarray]  # per sample (n, 4) x, y, w, h (detection) or empty


def represent(
    events: np.ndarray, sensor: SensorSize, rep: str, params: E2SParams = DEFAULT_E2S
) -> np.ndarray:
    """(T, 2, H, W) float32 input of one recording, over the window of ``params.steps``
    steps from ``recording_start``: recordings whose clock does not start near 0 (a cut from
    a longer stream) are represented from their first event instead of giving an all-zero
    input. A recording that fits the window from its first event but not from the rounded
    start (a 100 ms cut from 19.999 ms) starts at its first event: rounding down would drop
    its last events (up to one step) without a word."""
    t0 = recording_start(events, params.step_us)
    if len(events):
        span = params.steps * params.step_us
        first, last = int(events["t"].min()), int(events["t"].max())
        if last >= t0 + span and last < first + span:
            t0 = first
    return _represent_at(events, sensor, rep, params, t0)


def _represent_at(
    events: np.ndarray, sensor: SensorSize, rep: str, params: E2SParams, t0: int
) -> np.ndarray:
    """(T, 2, H, W) float32 ``rep`` of ``events`` over the window starting at ``t0``."""
    if rep == "e2s":
        return e2s(events, sensor.width, sensor.height, params, t0).astype(np.float32)
    if rep == "histogram":
        return np.log1p(
            event_histogram(events, sensor.width, sensor.height, params.steps, params.step_us, t0)
        )
    raise ValueError(f"representation {rep!r} is not one of {REPRESENTATIONS}")


def represent_windows(
    events: np.ndarray,
    sensor: SensorSize,
    rep: str = "e2s",
    params: E2SParams = DEFAULT_E2S,
    max_windows: int | None = None,
    span_us: tuple[int, int] | None = None,
) -> np.ndarray:
    """A long recording as network input (T, N, 2, H, W) float32: N consecutive windows of
    ``params.steps`` x ``params.step_us`` (100 ms by default), the first starting at
    ``recording_start``, each represented on its own as ``represent`` does a single cut (the
    nets are trained on independent 100 ms recordings). ``max_windows`` keeps the first ones.
    ``span_us=(start, last)`` fixes the windows instead: the first starts at ``start``, the
    last holds time ``last`` (so a crop of a recording keeps the recording's windows, empty
    ones included). Save it with ``np.savez("x.npz", x=...)`` for ``neuroedge run
    event.bivision --input``.

    Raises ValueError for an empty recording (without ``span_us``), or when N windows would
    allocate more than ``MAX_DENSE_ELEMENTS`` (naming the span and how many windows fit)."""

    if rep not in REPRESENTATIONS:
        raise ValueError(f"representation {rep!r} is not one of {REPRESENTATIONS}")
    if len(events) == 0 and span_us is None:
        raise ValueError("the recording has no events: nothing to represent")
    if max_windows is not None and (isinstance(max_windows, bool) or max_windows < 1):
        raise ValueError(f"max_windows={max_windows!r}: expected an integer >= 1")
    t = events["t"]
    if np.any(np.diff(t) < 0):
        events, t = events[np.argsort(t, kind="stable")], np.sort(t, kind="stable")
    span = params.steps * params.step_us
    t0, last = span_us if span_us is not None else (recording_start(events, params.step_us), t[-1])
    count = max(int((int(last) - int(t0)) // span) + 1, 1)
    count = min(count, max_windows or count)
    check_window_budget(count, sensor, params)
    out = np.zeros((params.steps, count, 2, sensor.height, sensor.width), np.float32)
    return fill_windows(events, sensor, rep, params, t0, out)


def fill_windows(
    events: np.ndarray, sensor: SensorSize, rep: str, params: E2SParams, t0: int, out: np.ndarray
) -> np.ndarray:
    """``out`` (T, N, 2, H, W) float32 filled with the N consecutive windows of ``events``
    from ``t0``, each represented on its own (as ``represent_windows`` does; the caller's
    array is written, so a long recording's batch is not built twice)."""
    t = events["t"]
    if np.any(np.diff(t) < 0):
        events, t = events[np.argsort(t, kind="stable")], np.sort(t, kind="stable")
    span = params.steps * params.step_us
    edges = np.searchsorted(t, t0 + span * np.arange(out.shape[1] + 1), side="left")
    for k in range(out.shape[1]):
        cut = events[edges[k] : edges[k + 1]]
        out[:, k] = _represent_at(cut, sensor, rep, params, t0 + k * span)
    return out


def check_window_budget(count: int, sensor: SensorSize, params: E2SParams = DEFAULT_E2S) -> None:
    """ValueError when ``count`` windows on ``sensor`` would allocate more than
    ``MAX_DENSE_ELEMENTS`` input values, naming the span and how many windows fit."""
    from neuroedge.models.bivision.e2s import MAX_DENSE_ELEMENTS

    per_window = params.steps * 2 * sensor.height * sensor.width
    if count * per_window > MAX_DENSE_ELEMENTS:
        raise ValueError(
            f"{count} windows of {params.steps * params.step_us} us on a "
            f"{sensor.width}x{sensor.height} sensor would allocate {count * per_window:,} "
            f"elements (at most {MAX_DENSE_ELEMENTS:,}): pass max_windows <= "
            f"{MAX_DENSE_ELEMENTS // per_window} or cut the recording"
        )


def recording_start(events: np.ndarray, step_us: int) -> int:
    """The window start of a recording: its first event's time rounded down to a multiple of
    ``step_us`` (0 when there are no events). Decision: rounding keeps the step edges of
    recordings that start at 0 (the generated datasets, whose first event comes within the
    first step: their inputs are unchanged) and of N-CARS-like 100 ms cuts."""
    if len(events) == 0:
        return 0
    return int(events["t"][0]) // int(step_us) * int(step_us)


def dataset_sensor(root: str | os.PathLike[str]) -> SensorSize:
    """The sensor size recorded in a generated dataset's config.json."""
    if not Path(root).is_dir():
        raise FileNotFoundError(f"{root}: no such dataset folder")
    path = Path(root) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no dataset config; a folder of your own recordings needs a config.json "
            'giving the sensor, e.g. {"width": 32, "height": 32}'
        )
    try:
        cfg = json.loads(path.read_text(encoding="utf-8-sig"))  # a BOM too (Notepad)
        size = {k: cfg[k] for k in ("width", "height")}
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: needs integer width and height ({err})") from None
    bad = {k: v for k, v in size.items() if isinstance(v, bool) or not isinstance(v, int) or v < 1}
    if bad:  # 32.9 or "32" is not read as 32
        raise ValueError(f"{path}: width and height must be integers >= 1, got {bad}")
    return SensorSize(size["width"], size["height"])


def load_classification(
    root: str | os.PathLike[str], split: str, rep: str, params: E2SParams = DEFAULT_E2S
) -> EventSet:
    """An N-CARS layout split as network inputs and labels (1 = car)."""
    sensor = dataset_sensor(root)
    files = ncars_files(root, split)
    x = np.stack([represent(read_events(f, sensor=sensor), sensor, rep, params) for f, _ in files])
    return EventSet(x, np.array([label for _, label in files], np.int64), [])


def load_detection(
    root: str | os.PathLike[str], split: str, rep: str, params: E2SParams = DEFAULT_E2S
) -> EventSet:
    """A Gen1 layout split as network inputs and per-sample boxes (the last box time stamp of
    each recording, where the window ends)."""
    sensor = dataset_sensor(root)
    xs, boxes = [], []
    for dat, npy in gen1_files(root, split):
        xs.append(represent(read_events(dat, sensor=sensor), sensor, rep, params))
        table = read_boxes(npy)
        last = table[table["ts"] == table["ts"].max()] if len(table) else table
        boxes.append(np.stack([last["x"], last["y"], last["w"], last["h"]], 1).astype(np.float64))
    return EventSet(np.stack(xs), np.zeros(len(xs), np.int64), boxes)


def load_task(
    root: str | os.PathLike[str], task: str, split: str, rep: str, params: E2SParams = DEFAULT_E2S
) -> EventSet:
    """``load_classification`` or ``load_detection`` by task name."""
    if task == "classification":
        return load_classification(root, split, rep, params)
    if task == "detection":
        return load_detection(root, split, rep, params)
    raise ValueError(f"task {task!r} is not one of {TASKS}")


def ensure_dataset(
    base: str | os.PathLike[str],
    task: str,
    cfg: dict,
    progress: bool = True,
) -> Path:
    """The generated dataset folder for ``task`` and ``cfg`` under ``base``, generated on first
    use (train_samples / test_samples recordings at noise_rate_hz; seed and size from cfg)."""
    from neuroedge.config_values import choice
    from neuroedge.events.generate import GeneratorConfig, make_gen1_like, make_ncars_like

    choice({"task": task}, "task", TASKS)  # not a detection set under a misspelled task's name
    counts = {"train": int(cfg["train_samples"]), "test": int(cfg["test_samples"])}
    gen = GeneratorConfig(
        width=int(cfg["size"]),
        height=int(cfg["size"]),
        noise_rate_hz=float(cfg["noise_rate_hz"]),
        seed=int(cfg["seed"]),
    )
    root = Path(base) / (
        f"{task}_{counts['train']}_{counts['test']}_{gen.width}px_"
        f"{gen.noise_rate_hz:g}hz_seed{gen.seed}"
    )
    if not (root / "config.json").is_file():
        make = make_ncars_like if task == "classification" else make_gen1_like
        make(root, counts, gen, progress)
    return root
