"""The training loop: shuffled batches, augmentation, one epoch (with the energy constraint
when a budget is given), the optimiser's parameter groups, a cosine-scheduled fit, accuracy."""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from neuroedge.divergence import check_loss, check_weights
from neuroedge.errors import ConfigError
from neuroedge.models.unisparse.constraint import constrained_terms, task_loss
from neuroedge.models.unisparse.data import ImageSplit, direct_encoding
from neuroedge.models.unisparse.module import SpikingResNet


def _batches(data: ImageSplit, batch: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(len(data.y_train))
    return [order[i : i + batch] for i in range(0, len(order), batch)]


def _augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random 4-pixel-padded crop and horizontal flip (the CIFAR recipe's augmentation)."""
    n, _, h, w = x.shape
    padded = F.pad(x, (4, 4, 4, 4))
    dy, dx = (int(v) for v in torch.randint(0, 9, (2,), generator=gen))
    out = padded[:, :, dy : dy + h, dx : dx + w]
    flip = torch.rand(n, generator=gen) < 0.5
    return torch.where(flip.view(-1, 1, 1, 1).to(x.device), out.flip(3), out)


def run_epoch(
    net: SpikingResNet,
    data: ImageSplit,
    opt: torch.optim.Optimizer,
    cfg: Mapping[str, Any],
    rng: np.random.Generator,
    budget: dict[str, Any] | None = None,
    on_batch: Callable[[], None] | None = None,
) -> dict[str, float]:
    """One pass over the training set; with ``budget`` the energy term and dual step run."""
    from neuroedge.distributed import current

    device, steps, dp = torch.device(cfg["device"]), int(cfg["steps"]), current()
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
    net.train()
    losses, energies = [], []
    for idx in _batches(data, int(cfg["batch"]), rng):
        if on_batch is not None:
            on_batch()
        if dp is not None:  # data-parallel: this rank's share of the global batch
            if dp.skips(idx):
                continue
            idx = dp.shard(idx)
        x = torch.from_numpy(data.x_train[idx]).to(device)
        if cfg.get("augment"):
            x = _augment(x, gen)
        xs = x.unsqueeze(0).expand(steps, *x.shape)
        logits, maps = net.forward_sequence(xs)
        teacher = _teacher_logits(budget, xs)
        loss = task_loss(logits, torch.from_numpy(data.y_train[idx]).to(device), teacher, cfg)
        threshold_grads: list[tuple[torch.Tensor, torch.Tensor]] = []
        if budget is not None:
            penalty, energy, threshold_grads = constrained_terms(net, maps, budget, cfg, len(idx))
            loss = loss + penalty
            energies.append(energy)
        opt.zero_grad()
        loss.backward()
        for param, grad in threshold_grads:
            param.grad = grad if param.grad is None else param.grad + grad
        if dp is not None:  # after the threshold gradients, which backward() never saw
            dp.average_gradients(net.parameters())
        opt.step()
        losses.append(float(loss.detach()))
    if dp is not None:
        if not losses:  # every global batch skipped: its NaN mean would read as divergence
            raise ConfigError(
                f"batch={cfg['batch']} with {dp.world.size} data-parallel ranks: no global "
                "batch gives every rank a sample, so nothing trained; expected batch (and "
                f"train_subset) >= {dp.world.size}"
            )
        dp.average_buffers(net)  # BN running statistics: each rank saw its own share
        losses = [dp.mean(float(np.mean(losses)))]
    return {
        "loss": float(np.mean(losses)),
        "energy_uj": float(np.mean(energies)) if energies else math.nan,
    }


@torch.no_grad()
def _teacher_logits(budget: dict[str, Any] | None, xs: torch.Tensor) -> torch.Tensor | None:
    teacher = None if budget is None else budget.get("teacher")
    return None if teacher is None else teacher.forward_sequence(xs)[0]


@torch.no_grad()
def accuracy(
    net: torch.nn.Module,
    x: np.ndarray,
    y: np.ndarray,
    steps: int,
    device: str = "cpu",
    batch: int = 256,
) -> float:
    """Top-1 accuracy of time-averaged logits (``net`` in eval mode)."""
    net.eval()
    correct = 0
    for i in range(0, len(y), batch):
        xs = torch.from_numpy(direct_encoding(x[i : i + batch], steps)).to(device)
        logits, _ = net.forward_sequence(xs)
        correct += int((logits.argmax(-1).cpu().numpy() == y[i : i + batch]).sum())
    return correct / len(y)


def _optimizer(
    net: SpikingResNet, cfg: Mapping[str, Any], lr: float, bn_lr: float
) -> torch.optim.Optimizer:
    masks = [p for n, p in net.named_parameters() if n.endswith("mask_logits")]
    bn = [p for n, p in net.named_parameters() if ".bn." in f".{n}"]
    taken = {id(p) for p in (*masks, *bn)}
    weights = [p for p in net.parameters() if id(p) not in taken]
    return torch.optim.AdamW(
        [
            {"params": weights, "weight_decay": float(cfg["weight_decay"])},
            {"params": bn, "weight_decay": 0.0, "lr": bn_lr},
            {"params": masks, "weight_decay": 0.0, "lr": float(cfg["mask_lr"])},
        ],
        lr=lr,
    )


# the config keys that set the scale of a phase's steps (named when it diverges)
DENSE_KEYS = ("lr", "weight_decay")
CONSTRAINED_KEYS = (
    *DENSE_KEYS,
    *("bn_lr", "mask_lr", "penalty_rho", "dual_lr", "spike_scale", "e_ac_pj", "kd_temp"),
    *("temp_start", "temp_end"),  # the mask gate's temperature: 1e300 gave a NaN gradient
)


def fit_phase(
    net: SpikingResNet,
    data: ImageSplit,
    cfg: Mapping[str, Any],
    epochs: int,
    lr: float,
    budget: dict[str, Any] | None,
    label: str,
    progress: bool,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[dict[str, float]]:
    """``epochs`` epochs with a cosine learning rate; returns per-epoch logs (with seconds).
    TrainingDiverged at the first epoch whose mean loss is NaN or inf (the loss each step
    already reads, averaged over ranks: every rank stops at one epoch), or at the end when a
    weight or statistic is no longer finite (``divergence.check_weights``)."""
    from tqdm import tqdm

    # the constrained phases move the thresholds (BN affine) faster than the weights
    opt = _optimizer(net, cfg, lr, lr if budget is None else float(cfg["bn_lr"]))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(epochs, 1))
    rng = np.random.default_rng(int(cfg["seed"]) + zlib.crc32(label.encode()) % 1000)
    per_epoch = math.ceil(len(data.y_train) / int(cfg["batch"]))
    counter = {"batch": 0}

    def tick() -> None:
        if on_batch is not None:
            on_batch(counter["batch"], epochs * per_epoch)
        counter["batch"] += 1

    from neuroedge.distributed import current

    dp = current()
    if dp is not None:
        dp.broadcast(net)  # every rank starts from rank 0's parameters
        progress = progress and dp.world.lead
    logs, keys = [], DENSE_KEYS if budget is None else CONSTRAINED_KEYS
    bar = tqdm(range(epochs), desc=f"unisparse {label}", disable=not progress, leave=False)
    for epoch in bar:
        start = time.perf_counter()
        log = run_epoch(net, data, opt, cfg, rng, budget, tick)
        check_loss(log["loss"], f"snn.unisparse {label} phase epoch {epoch + 1}", keys)
        sched.step()
        log["seconds"] = time.perf_counter() - start
        if budget is not None:
            log["lambda"] = budget["lambda"]
        logs.append(log)
        bar.set_postfix(loss=f"{log['loss']:.3f}", energy=f"{log['energy_uj']:.3g}")
    if dp is not None:
        dp.check_agreement(net, f"the {label} phase")
    check_weights(net, f"snn.unisparse {label} phase", keys)
    return logs
