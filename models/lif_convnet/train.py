"""Train the LIF convnet on digits by backprop through time with a surrogate gradient."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from neuroedge.bench.provenance import thread_settings
from neuroedge.checkpoints import save_checkpoint
from neuroedge.divergence import check_loss
from neuroedge.models.lif_convnet.data import direct_encoding, load_digits_split
from neuroedge.models.lif_convnet.module import LIFConvNet
from neuroedge.paths import checkpoint_path
from neuroedge.seeding import seeded

DEFAULTS: dict[str, Any] = {
    "steps": 8,
    "epochs": 20,
    "batch": 64,
    "lr": 1e-2,
    "seed": 0,
    "channels1": 16,
    "channels2": 32,
}


def check_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The training config over DEFAULTS, every value checked before any work (ConfigError
    naming key and value): 2.5 epochs is not 2, and 0 epochs would save untrained weights as a
    trained checkpoint."""
    from neuroedge.config_values import MAX_LR, SEED_MAX, integer, number, train_config

    cfg = {**DEFAULTS, **train_config("snn.lif_convnet", config, DEFAULTS)}
    for key, least, most in (
        ("steps", 1, 10_000),
        ("epochs", 1, 100_000),
        ("batch", 1, 100_000),
        ("seed", 0, SEED_MAX),
        ("channels1", 1, 4096),
        ("channels2", 1, 4096),
    ):
        cfg[key] = integer(cfg, key, least, most)
    cfg["lr"] = number(cfg, "lr", 0, MAX_LR, open_low=True)
    return cfg


def make_net(config: Mapping[str, Any]) -> LIFConvNet:
    return LIFConvNet(int(config["channels1"]), int(config["channels2"]))


def accuracy(net: LIFConvNet, x: np.ndarray, y: np.ndarray, steps: int) -> float:
    import torch

    with torch.no_grad():
        logits = net.forward_sequence(torch.from_numpy(direct_encoding(x, steps)))
    return float((logits.argmax(-1).numpy() == y).mean())


def train(
    config: Mapping[str, Any] | None = None, out: str | Path | None = None, progress: bool = True
) -> dict[str, Any]:
    """Train, save the checkpoint atomically and return ``{"path", "accuracy", "seconds"}``."""
    import torch
    from tqdm import tqdm

    cfg = check_config(config)
    # seeded: the caller's torch generator is left where it was (a deploy that trains)
    with seeded(int(cfg["seed"])):
        rng = np.random.default_rng(int(cfg["seed"]))
        data = load_digits_split(int(cfg["seed"]))
        net = make_net(cfg)
        opt = torch.optim.Adam(net.parameters(), lr=float(cfg["lr"]))
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=int(cfg["epochs"]))
        steps, batch = int(cfg["steps"]), int(cfg["batch"])
        start = time.perf_counter()
        bar = tqdm(range(int(cfg["epochs"])), desc="train snn.lif_convnet", disable=not progress)
        for epoch in bar:
            net.train()
            order = rng.permutation(len(data.y_train))
            for first in range(0, len(order), batch):
                idx = order[first : first + batch]
                xs = torch.from_numpy(direct_encoding(data.x_train[idx], steps))
                loss = torch.nn.functional.cross_entropy(
                    net.forward_sequence(xs), torch.from_numpy(data.y_train[idx])
                )
                opt.zero_grad()
                loss.backward()
                opt.step()
            sched.step()
            net.eval()
            # the epoch's last loss, read once per epoch as before: a diverged run stops here,
            # naming lr (save_checkpoint still refuses a NaN weight that left the loss finite)
            value = check_loss(loss, f"snn.lif_convnet training epoch {epoch + 1}", ("lr",))
            bar.set_postfix(
                loss=f"{value:.3f}",
                test_acc=f"{accuracy(net, data.x_test, data.y_test, steps):.3f}",
            )
    seconds = time.perf_counter() - start
    acc = accuracy(net, data.x_test, data.y_test, steps)
    path = Path(out) if out else checkpoint_path("snn.lif_convnet")
    save_checkpoint(
        path,
        {
            "state_dict": net.state_dict(),
            "config": cfg,
            "metrics": {"accuracy": acc, "train_seconds": seconds},
            # the float reductions of training depend on them: a report shows them (weights)
            "threads": thread_settings(),
        },
    )
    return {"path": str(path), "accuracy": acc, "seconds": seconds}
