"""Train BiSNet for classification (N-CARS-like) or detection (Gen1-like) by BPTT.

Variants: ``statnf`` neurons on E2S spikes (the paper's design) and ``lif`` neurons on event
histograms (the SFOD-style baseline). Losses: cross-entropy on time-averaged class readouts
(SFOD uses spike-rate MSE; CE trains faster at this scale), the focal/L1 detection loss of
``neuroedge.models.bivision.detection`` on the last step's head outputs (``BiSNet.
forward_sequence``). Adam, cosine schedule.

Augmentation (``augment``: ``"none"`` by default, or ``"flip"``, ``"swap"``,
``"flip+swap"``): mirror a training sample left-right (boxes mirrored with it) and/or swap its
two polarity channels, each with probability 1/2: symmetries of the simulated scenes
(velocities and contrast signs are drawn symmetric; the swap only approximately, since events
follow log intensity). Decision: off, as they slowed learning more than they regularised at
the sweep's budget (20 epochs, 192 recordings, 0 Hz/pixel, STATNF, flattened-map
classifier): test accuracy 0.53 with flip+swap, 0.59 with flip, 0.70 without; with the
translation-invariant
evidence-map classifier (``module``) the unaugmented network no longer overfits (0.77 test,
0.79 train). Detection mAP50 was the same with and without (0.15 vs 0.14).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.errors import ConfigError
from neuroedge.models.bivision.bench_settings import MAX_SIZE
from neuroedge.models.bivision.data import TASKS, EventSet
from neuroedge.models.bivision.module import BiSNet

VARIANTS = {"statnf_e2s": ("statnf", "e2s"), "lif_histogram": ("lif", "histogram")}
# The input encoding (``data.represent``) a checkpoint's net was trained on, saved in it as
# ``representation_version``; a build refuses another (``spec._checkpoint``). 2: E2S counts
# the support in the 3x3 block with a noise-adaptive k (a0ec326, 2026-12-02). Checkpoints saved
# before this key was (1 before that change, 2 since) cannot be told apart: a build notes it.
REPRESENTATION_VERSION = 2
DEFAULTS: dict[str, Any] = {
    "task": "classification",
    "variant": "statnf_e2s",
    "epochs": 8,
    "batch": 32,
    "lr": 3e-3,
    "seed": 0,
    "size": 64,
    "train_samples": 600,
    "test_samples": 200,
    "noise_rate_hz": 0.0,
    "augment": "none",
}


def _augment(xs: np.ndarray, flip: np.ndarray, swap: np.ndarray) -> np.ndarray:
    """(B, T, 2, H, W) inputs mirrored in W where ``flip`` and polarity-swapped where ``swap``."""
    out = xs.copy()
    out[flip] = out[flip][..., ::-1]
    out[swap] = out[swap][:, :, ::-1]
    return np.ascontiguousarray(out)


def _mirrored(boxes: list[np.ndarray], width: int) -> list[np.ndarray]:
    """x, y, w, h boxes mirrored left-right on a sensor ``width`` pixels wide."""
    out = []
    for table in boxes:
        table = np.asarray(table, np.float64).reshape(-1, 4).copy()
        table[:, 0] = width - table[:, 0] - table[:, 2]
        out.append(table)
    return out


def augmentations(spec: Any) -> np.ndarray:
    """``[flip, swap]`` flags from a config value: a string like ``"flip+swap"``, ``"none"``,
    or a bool (True = ``"flip"``)."""
    if isinstance(spec, bool):
        spec = "flip" if spec else "none"
    names = set() if spec in ("none", "") else set(str(spec).split("+"))
    if not names <= {"flip", "swap"}:
        raise ConfigError(f"augment {spec!r}: use 'none' or names from 'flip', 'swap' joined by +")
    return np.array(["flip" in names, "swap" in names])


def make_net(cfg: Mapping[str, Any]) -> BiSNet:
    """A fresh BiSNet for ``cfg["variant"]``, initialised from ``cfg["seed"]`` (so a run's
    result does not depend on what was trained before it in the same process)."""
    from neuroedge.config_values import integer
    from neuroedge.seeding import seeded

    if cfg["variant"] not in VARIANTS:
        raise ValueError(f"variant {cfg['variant']!r} is not one of {sorted(VARIANTS)}")
    size = integer(cfg, "size", 8, MAX_SIZE)  # 2.5 was cut to 2, then refused as "2"
    with seeded(integer({"seed": cfg.get("seed", 0)}, "seed", 0)):  # the caller's RNG kept
        return BiSNet(VARIANTS[cfg["variant"]][0], size)


def _batch_loss(net: BiSNet, xs: Any, task: str, labels: Any, targets: Any) -> Any:
    import torch.nn.functional as F
    from neuroedge.models.bivision.detection import detection_loss

    logits, detection = net.forward_sequence(xs)
    if task == "classification":
        return F.cross_entropy(logits, labels)
    return detection_loss(detection, targets)


def fit(
    net: BiSNet, data: EventSet, task: str, cfg: Mapping[str, Any], progress: bool = True
) -> float:
    """Train ``net`` in place on ``data``; returns the last epoch's mean loss.
    TrainingDiverged (naming lr) at the first NaN or infinite batch loss, or at the end of an
    epoch whose weights are no longer finite (``divergence.check_weights``), before a NaN net
    is measured or saved (the loop went on through every epoch)."""
    import torch
    from neuroedge.divergence import check_loss, check_weights
    from neuroedge.models.bivision.detection import make_targets
    from neuroedge.seeding import seeded, torch_threads
    from tqdm import tqdm

    if task not in TASKS:
        raise ValueError(f"task {task!r} is not one of {TASKS}")
    # small convs: threads only contend; the caller's count and random state come back after
    with torch_threads(int(cfg.get("threads", 1))), seeded(int(cfg["seed"])):
        rng = np.random.default_rng(int(cfg["seed"]))
        opt = torch.optim.Adam(net.parameters(), lr=float(cfg["lr"]))
        epochs, batch = int(cfg["epochs"]), int(cfg["batch"])
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(epochs, 1))
        grid = net.size // 4
        targets = make_targets(data.boxes, grid, 4) if task == "detection" else None
        mirrored = (
            make_targets(_mirrored(data.boxes, net.size), grid, 4) if task == "detection" else None
        )
        augment = augmentations(cfg.get("augment", DEFAULTS["augment"]))
        labels = torch.from_numpy(data.labels)
        mean_loss = float("nan")
        bar = tqdm(range(epochs), desc=f"train {cfg['variant']} {task}", disable=not progress)
        for epoch in bar:
            net.train()
            losses = []
            order = rng.permutation(len(data.x))
            where = f"event.bivision training ({cfg['variant']}, {task}) epoch {epoch + 1}"
            for first in range(0, len(order), batch):
                idx = order[first : first + batch]
                flip, swap = (rng.random((2, len(idx))) < 0.5) & augment[:, None]
                xs = torch.from_numpy(_augment(data.x[idx], flip, swap)).transpose(0, 1)
                target = None
                if targets is not None:
                    target = torch.where(
                        torch.from_numpy(flip)[:, None, None, None], mirrored[idx], targets[idx]
                    )
                loss = _batch_loss(net, xs, task, labels[idx], target)
                opt.zero_grad()
                loss.backward()
                opt.step()
                # the value read for the epoch's mean anyway: a NaN loss stops the run here
                losses.append(check_loss(loss, f"{where} batch {first // batch + 1}", ("lr",)))
            sched.step()
            check_weights(net, where, ("lr",))
            mean_loss = float(np.mean(losses))
            bar.set_postfix(loss=f"{mean_loss:.3f}")
        net.eval()
        return mean_loss


def predict(net: BiSNet, x: np.ndarray, batch: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Time-mean class logits (N, classes) and last-step detection maps (N, 5, G, G) for
    (N, T, ...) inputs."""
    import torch

    logits, maps = [], []
    with torch.inference_mode():
        for first in range(0, len(x), batch):
            xs = torch.from_numpy(x[first : first + batch]).transpose(0, 1)
            y, d = net.forward_sequence(xs)
            logits.append(y.numpy())
            maps.append(d.numpy())
    return np.concatenate(logits), np.concatenate(maps)


def task_metrics(
    logits: np.ndarray, maps: np.ndarray, data: EventSet, task: str
) -> dict[str, float]:
    """``accuracy`` for classification; ``map50`` and ``map`` (COCO) for detection, both sides
    clipped to the sensor (the inputs' width and height) and boxes under 3 px dropped."""
    from neuroedge.models.bivision.detection import decode, sensor_map

    if task == "classification":
        return {"accuracy": float((logits.argmax(-1) == data.labels).mean())}
    height, width = data.x.shape[-2:]
    return sensor_map(data.boxes, decode(maps, stride=4), width, height)


def train(
    config: Mapping[str, Any] | None = None, out: str | Path | None = None, progress: bool = True
) -> dict[str, Any]:
    """Generate (or reuse) the task's dataset, train one variant, save the checkpoint.

    ``config``: task, variant, epochs, batch, lr, seed, size, train_samples, test_samples,
    noise_rate_hz, data (a dataset folder to use instead of generating one).
    """
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.models.bivision.data import dataset_sensor, ensure_dataset, load_task
    from neuroedge.models.bivision.spec import checkpoint_name  # spec imports this module
    from neuroedge.paths import checkpoint_path, home
    from neuroedge.seeding import torch_threads

    from neuroedge.models.bivision.bench_settings import check_values

    cfg = check_values({**DEFAULTS, **(config or {})}, bench=False)
    root = (
        Path(cfg["data"])
        if cfg.get("data")
        else ensure_dataset(home() / "data" / "bivision", cfg["task"], cfg, progress)
    )
    sensor = dataset_sensor(root)
    if (sensor.width, sensor.height) != (cfg["size"], cfg["size"]):
        raise ValueError(
            f"{root}: recordings of a {sensor.width}x{sensor.height} sensor, but the net takes "
            f"{cfg['size']}x{cfg['size']} inputs (config size); crop or rescale the events to "
            "a square sensor of that size first"
        )
    rep = VARIANTS[cfg["variant"]][1]
    train_set, test_set = (
        load_task(root, cfg["task"], "train", rep),
        load_task(root, cfg["task"], "test", rep),
    )
    with torch_threads(int(cfg.get("threads", 1))):  # the test too, as the training
        net = make_net(cfg)
        start = time.perf_counter()
        loss = fit(net, train_set, cfg["task"], cfg, progress)
        seconds = time.perf_counter() - start
        metrics = task_metrics(*predict(net, test_set.x), test_set, cfg["task"])
    path = Path(out) if out else checkpoint_path(checkpoint_name(cfg))  # where a build reads
    save_checkpoint(
        path,
        {
            "state_dict": net.state_dict(),
            "config": dict(cfg),
            "representation_version": REPRESENTATION_VERSION,
            "metrics": {**metrics, "loss": loss, "train_seconds": seconds},
        },
    )
    return {"path": str(path), "data": str(root), **metrics, "seconds": seconds}
