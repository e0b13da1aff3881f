"""Behaviour cloning of the small VLA policy on cached expert demonstrations.

Loss: L1 between the predicted and the expert action chunk (OpenVLA-OFT's L1 regression).
AdamW with a cosine learning-rate decay; the model is trained unpruned (SpecPrune is
training-free). The checkpoint holds the state dict, the model config, the training config and
the task list, and is loaded with ``weights_only=True``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.checkpoints import load_checkpoint, save_checkpoint
from neuroedge.paths import checkpoint_path

MODEL = "vla.specprune"
CHECKPOINT_VERSION = 1
DEFAULTS: dict[str, Any] = {
    "tasks": ("button", "drawer", "reach"), "episodes": 30, "seed": 0, "epochs": 4,
    "batch": 16, "lr": 1e-3, "dim": 64, "heads": 2, "depth": 6, "ffn": 160,
    "threads": 1, "max_minutes": 0.0,  # stop early after this much wall time (0: run every epoch)
}


def make_policy(config: Mapping[str, Any]) -> Any:
    from neuroedge.models.specprune.data import CHUNK, TEXT_LEN, vocabulary
    from neuroedge.models.specprune.module import VLAPolicy

    return VLAPolicy(vocab=len(vocabulary()), dim=int(config["dim"]), heads=int(config["heads"]),
                     depth=int(config["depth"]), ffn=int(config["ffn"]), chunk=CHUNK,
                     text_len=TEXT_LEN)


def learning_rate(peak: float, done: float, warmup: float = 0.05) -> float:
    """Linear warm-up then cosine decay over the fraction ``done`` of the step or time budget
    (whichever runs out first), so a time-capped run still anneals."""
    if done < warmup:
        return peak * (done + 1e-3) / warmup
    return 0.5 * peak * (1.0 + math.cos(math.pi * (done - warmup) / (1.0 - warmup)))


def train(config: Mapping[str, Any] | None = None, out: str | os.PathLike[str] | None = None
          ) -> dict[str, Any]:
    """Train with a progress bar and save the checkpoint (default: paths.checkpoint_path)."""
    import torch
    from neuroedge.models.specprune.data import load_or_generate
    from tqdm import tqdm

    cfg = {**DEFAULTS, **(config or {})}
    cfg["tasks"] = tuple(cfg["tasks"])
    torch.set_num_threads(int(cfg["threads"]))  # 2 threads on a loaded 2-core box spin: 5-10x
    torch.manual_seed(int(cfg["seed"]))
    demos = load_or_generate(cfg["tasks"], int(cfg["episodes"]), int(cfg["seed"]))
    tensors = [torch.from_numpy(a) for a in (demos.primary, demos.wrist, demos.proprio,
                                             demos.text, demos.actions)]
    policy = make_policy(cfg).train()
    opt = torch.optim.AdamW(policy.parameters(), lr=float(cfg["lr"]), weight_decay=1e-4)
    batch, n = int(cfg["batch"]), len(demos)
    steps = int(cfg["epochs"]) * (n // batch)
    gen = torch.Generator().manual_seed(int(cfg["seed"]))
    losses: list[float] = []
    start, budget_s = time.monotonic(), 60.0 * float(cfg["max_minutes"] or 1e9)
    with tqdm(total=steps, desc="behaviour cloning", unit="step") as bar:
        for _ in range(int(cfg["epochs"])):
            order = torch.randperm(n, generator=gen)
            for first in range(0, n - batch + 1, batch):
                done = max(len(losses) / steps, (time.monotonic() - start) / budget_s)
                if done >= 1.0:
                    break
                for group in opt.param_groups:
                    group["lr"] = learning_rate(float(cfg["lr"]), done)
                idx = order[first:first + batch]
                prim, wrist, prop, text, target = (t[idx] for t in tensors)
                pred, _ = policy(prim, wrist, prop, text, torch.zeros(batch, policy.n_visual))
                loss = (pred - target).abs().mean()
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                opt.step()
                losses.append(float(loss))
                bar.set_postfix(l1=f"{np.mean(losses[-50:]):.4f}")
                bar.update(1)
    path = Path(out) if out else checkpoint_path(MODEL)
    save_checkpoint(path, {"version": CHECKPOINT_VERSION, "state_dict": policy.state_dict(),
                           "config": {k: list(v) if isinstance(v, tuple) else v
                                      for k, v in cfg.items()},
                           "final_l1": float(np.mean(losses[-50:])), "samples": n,
                           "steps": len(losses)})
    return {"checkpoint": str(path), "final_l1": float(np.mean(losses[-50:])), "samples": n}


def load_policy_checkpoint(path: str | os.PathLike[str]) -> tuple[Any, dict[str, Any]]:
    """(policy in eval mode, checkpoint config); a checkpoint of another version is refused."""
    from neuroedge.errors import ArtifactError

    ckpt = load_checkpoint(path, required=("version", "state_dict", "config"))
    if ckpt["version"] != CHECKPOINT_VERSION:
        raise ArtifactError(f"{path}: checkpoint version {ckpt['version']}, this neuroedge reads "
                            f"version {CHECKPOINT_VERSION}")
    cfg = {**DEFAULTS, **ckpt["config"]}
    policy = make_policy(cfg)
    policy.load_state_dict(ckpt["state_dict"])
    return policy.eval(), cfg
