"""Behaviour cloning of the small VLA policy on cached expert demonstrations.

Loss: L1 between the predicted and the expert action chunk (OpenVLA-OFT's L1 regression).
AdamW with a cosine learning-rate decay over the step or wall-time budget, random-shift image
augmentation; the model is trained unpruned (SpecPrune is training-free).

Design decisions (sizes chosen for the 2-core CPU):

* dim 128, 8 decoder layers, SwiGLU width 352 and a light patch embedding (a linear map per
  8x8 patch, no ViT block, ``vit_depth`` 0): the decoder holds most of the inference FLOPs and
  time, as in OpenVLA-OFT where the 7B Llama dominates. With d=64 and a ViT block per view the
  fixed per-call costs hid any token pruning (0.85x end-to-end at 57% of the FLOPs).
* The default recipe is two phases counted in optimizer steps, so every machine trains the
  same steps on the same schedule whatever its load (one thread, seeded data order and
  augmentation: on one machine a seed reproduces the weights, a test checks it): phase 1,
  ``steps`` at peak ``lr`` with warm-up and cosine decay; phase 2, ``finetune_steps`` from
  phase 1's weights with a fresh AdamW and a second cosine at ``finetune_lr`` (a warm restart).
  Measured with 50 layouts per task (three Meta-World tasks, 50 paired episodes each): one
  phase of 793 steps left specprune 3.3 points below unpruned; the restart brought them level
  (phases under wall-time budgets, 793 and 694 steps; step-counted 800 + 700: 92 vs 93 of 150).
  ``max_minutes`` (0: off) is an optional wall-time cap for a quick run; each phase then
  anneals within whichever budget runs out first.
* Data and length (``episodes`` 300, ``steps`` 1600 + ``finetune_steps`` 1400; demonstrations
  ~20 min, training ~55-75 min on one thread). Measured with the ``vla.specprune`` bench,
  2026-12-03, 50 paired episodes per task:

  - 50 layouts per task, 800 + 700 steps (the recipe before): unpruned 93 of 150 (button 33,
    drawer 50, reach 10). The policy uses the cameras (wrist view gray: 24 of 150) but reads
    all it needs in the two unpruned layers: one visual token kept after layer 1 still gave
    88 of 150, so no pruning rule could be told from another.
  - 300 layouts, 800 + 700 steps: the same (unpruned 93, wrist gray 7, rules tie).
  - 300 layouts, 1600 + 1400 steps (the default): unpruned 99 of 150 (31/50/18), and the
    visual tokens matter after layer 1: with one kept, FastV 55 and random 57 of 150, where
    SpecPrune keeps 77 (paired McNemar p = 0.0002 against each). The benchmark can now
    separate pruning rules; it is the policy the README's figures come from.

The checkpoint holds the state dict, the model config, the training config and the task list,
and is loaded with ``weights_only=True``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.checkpoints import load_checkpoint, load_weights, save_checkpoint
from neuroedge.config_values import SEED_MAX
from neuroedge.paths import checkpoint_path

MODEL = "vla.specprune"
CHECKPOINT_VERSION = 2  # 2: light patch embedding (vit_depth), wider decoder, chunk of 8
DEFAULTS: dict[str, Any] = {
    "tasks": ("button", "drawer", "reach"),
    "episodes": 300,
    "seed": 0,
    "batch": 32,
    "lr": 1.5e-3,
    "dim": 128,
    "heads": 4,
    "depth": 8,
    "ffn": 352,
    "vit_depth": 0,
    "shift": 4,  # random-shift augmentation of both views, in pixels (0: off)
    "threads": 1,
    "steps": 1600,  # phase 1: optimizer steps at peak ``lr`` (warm-up, then cosine decay)
    "finetune_steps": 1400,
    "finetune_lr": 6e-4,  # phase 2: warm restart (0 steps: skip it)
    "max_minutes": 0.0,  # optional wall-time cap per phase (0: off, the step counts decide)
    "init": "",  # a checkpoint to continue from ("": fresh weights)
}


# What a checkpoint's config must hold: the policy's sizes, its tasks and demonstrations (the
# bench's default tasks and first unseen layout); every version-2 checkpoint saves them.
SAVED_KEYS = ("tasks", "episodes", "dim", "heads", "depth", "ffn", "vit_depth")


# Integer keys: (least, greatest or None). Upper bounds where a huge value would crash or
# exhaust memory before any message: the seed (32-bit, as every neuroedge seed), threads
# (torch's count is a C int), demonstration episodes per task (each holds up to 60 samples of
# two 64x64 RGB frames, 1.5 MB, all in memory and stacked once more at the end: 2,000 x 3 tasks
# are up to 18 GB; the default is 300), the random shift (it pads both views by that many
# pixels; the frames are 64 wide), the network's sizes (allocated at once; their product
# is bounded by MAX_PARAMS) and the optimizer steps per phase (MAX_STEPS, as the other models:
# the default is 1600 + 1400). ``batch`` is bounded by the demonstrations (check_batch).
MAX_STEPS = 10**6
INT_BOUNDS: dict[str, tuple[int, int | None]] = {
    "episodes": (1, 2_000),
    "batch": (1, None),
    "dim": (1, 4096),
    "heads": (1, 256),
    "depth": (1, 1024),
    "ffn": (1, 16384),
    "threads": (1, 4096),
    "seed": (0, SEED_MAX),
    "vit_depth": (0, 64),
    "shift": (0, 64),
    "steps": (0, MAX_STEPS),
    "finetune_steps": (0, MAX_STEPS),
}
# what ``init``'s checkpoint must share with the config (its weights are loaded)
NETWORK_KEYS = ("dim", "heads", "depth", "ffn", "vit_depth")
# Parameters of the policy: AdamW keeps four float32 copies (weights, gradients, two moments),
# 1.6 GB at 100 M; the default network has 1.7 M.
MAX_PARAMS = 100_000_000


def training_config(config: Any) -> dict[str, Any]:
    """A training config (``train_config`` of a build or bench: a mapping of ``DEFAULTS``
    keys) over DEFAULTS, checked by ``check_train_config``; ConfigError naming a value that
    is no mapping or a key training does not read (it would be ignored)."""
    from neuroedge.config_values import train_config

    return check_train_config({**DEFAULTS, **train_config(MODEL, config, DEFAULTS)})


def check_train_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """Every training value, checked before the expert demos are generated (11-20 min):
    ConfigError naming the key (bad values failed only after them, some as raw tracebacks)."""
    from neuroedge.config_values import integer, number
    from neuroedge.errors import ConfigError
    from neuroedge.models.specprune.bench_checks import check_tasks

    cfg = {**cfg, "tasks": check_tasks(cfg["tasks"])}
    for key, (least, most) in INT_BOUNDS.items():
        cfg[key] = integer(cfg, key, least, most)
    for key in ("lr", "finetune_lr"):  # AdamW's peak rates (the defaults 1.5e-3 and 6e-4)
        cfg[key] = number(cfg, key, 0.0, 10.0, open_low=True)
    cfg["max_minutes"] = number(cfg, "max_minutes", 0.0)
    check_batch(cfg)
    if cfg["dim"] % cfg["heads"] or (cfg["dim"] // cfg["heads"]) % 2:
        raise ConfigError(
            f"dim={cfg['dim']} heads={cfg['heads']}: each head needs an even width "
            "(dim / heads, rotary positions pair its dimensions)"
        )
    params = policy_parameters(cfg)
    if params > MAX_PARAMS:
        raise ConfigError(
            f"dim={cfg['dim']} depth={cfg['depth']} ffn={cfg['ffn']} vit_depth="
            f"{cfg['vit_depth']}: a policy of {params:,} parameters, above {MAX_PARAMS:,} "
            "(AdamW holds four float32 copies); the default has 1.7 M"
        )
    if cfg["steps"] + cfg["finetune_steps"] == 0:
        raise ConfigError("nothing to train: steps and finetune_steps are both 0")
    check_init(cfg)
    return cfg


def check_batch(cfg: Mapping[str, Any]) -> None:
    """ConfigError for a ``batch`` larger than the most samples the demonstrations can give
    (every episode a success of the longest length), before they are generated (11-20 min);
    ``run_phase`` checks the samples they gave."""
    from neuroedge.errors import ConfigError
    from neuroedge.models.specprune.data import MAX_EPISODE_SAMPLES

    most = cfg["episodes"] * len(cfg["tasks"]) * MAX_EPISODE_SAMPLES
    if cfg["batch"] > most:
        raise ConfigError(
            f"batch={cfg['batch']}: expected an integer in 1..{most} (the most demonstration "
            f"samples of episodes={cfg['episodes']} x {len(cfg['tasks'])} tasks, "
            f"{MAX_EPISODE_SAMPLES} per episode)"
        )


def check_init(cfg: Mapping[str, Any]) -> None:
    """Config ``init``: "" (fresh weights) or a checkpoint this training can continue from,
    loaded here (a bad file is named before the demos, not after them) and of the config's
    network sizes (its weights are loaded into that network)."""
    from neuroedge.errors import ArtifactError, ConfigError

    init = cfg.get("init", "")
    if not isinstance(init, str):  # [], 0 or false meant fresh weights without a word
        raise ConfigError(f'init={init!r}: expected the path of a checkpoint file, or ""')
    if not init:
        return
    if not Path(init).is_file():
        raise ConfigError(f"init={init!r}: no such checkpoint file")
    try:
        saved = load_policy_checkpoint(init)[1]
    except ArtifactError as err:
        raise ConfigError(f"init: {err}") from None
    other = [f"{k}={saved[k]}" for k in NETWORK_KEYS if saved[k] != cfg[k]]
    if other:
        raise ConfigError(
            f"init={init!r}: a network of {', '.join(other)}; this training's is "
            f"{', '.join(f'{k}={cfg[k]}' for k in NETWORK_KEYS)}"
        )


def policy_parameters(config: Mapping[str, Any]) -> int:
    """The parameter count of ``make_policy(config)``, built on torch's meta device (shapes
    only, no memory), so a network too large to allocate is refused before it is."""
    import torch

    with torch.device("meta"):
        return sum(p.numel() for p in make_policy(config).parameters())


def make_policy(config: Mapping[str, Any]) -> Any:
    from neuroedge.models.specprune.data import CHUNK, TEXT_LEN, vocabulary
    from neuroedge.models.specprune.module import VLAPolicy

    return VLAPolicy(
        vocab=len(vocabulary()),
        dim=int(config["dim"]),
        heads=int(config["heads"]),
        depth=int(config["depth"]),
        ffn=int(config["ffn"]),
        chunk=CHUNK,
        text_len=TEXT_LEN,
        vit_depth=int(config.get("vit_depth", 1)),
    )


def learning_rate(peak: float, done: float, warmup: float = 0.05) -> float:
    """Linear warm-up then cosine decay over the fraction ``done`` of the step or time budget
    (whichever runs out first), so a time-capped run still anneals."""
    if done < warmup:
        return peak * (done + 1e-3) / warmup
    return 0.5 * peak * (1.0 + math.cos(math.pi * (done - warmup) / (1.0 - warmup)))


def random_shift(images: Any, pad: int, gen: Any) -> Any:
    """DrQ-style augmentation: pad uint8 [B, H, W, 3] by ``pad`` edge pixels and crop each
    image back at a random offset (camera jitter, so the policy does not key on exact pixels)."""
    import torch
    import torch.nn.functional as F

    if pad <= 0:
        return images
    b, h, w, _ = images.shape
    padded = F.pad(images.permute(0, 3, 1, 2).float(), (pad,) * 4, mode="replicate")
    dy, dx = torch.randint(0, 2 * pad + 1, (2, b), generator=gen).tolist()
    crops = [
        padded[i, :, y : y + h, x : x + w] for i, (y, x) in enumerate(zip(dy, dx, strict=True))
    ]
    return torch.stack(crops).permute(0, 2, 3, 1).to(images.dtype)


def train(
    config: Mapping[str, Any] | None = None, out: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """Train both phases with a progress bar and save the checkpoint (default:
    paths.checkpoint_path)."""
    import torch
    from neuroedge.models.specprune.data import load_or_generate
    from neuroedge.seeding import seeded, torch_threads

    cfg = training_config(config)  # before the demos (minutes)
    # threads (1): 2 threads on a loaded 2-core box spin, 5-10x slower; the caller's count and
    # random state come back after the training
    with torch_threads(int(cfg["threads"])), seeded(int(cfg["seed"])):
        demos = load_or_generate(cfg["tasks"], int(cfg["episodes"]), int(cfg["seed"]))
        tensors = [
            torch.from_numpy(a)
            for a in (demos.primary, demos.wrist, demos.proprio, demos.text, demos.actions)
        ]
        policy = make_policy(cfg).train()
        if cfg["init"]:  # continue from a checkpoint's weights (checked: same network)
            policy.load_state_dict(load_policy_checkpoint(cfg["init"])[0].state_dict())
        phases = [  # label, the key of its peak learning rate, steps
            ("phase 1", "lr", int(cfg["steps"])),
            ("phase 2 (restart)", "finetune_lr", int(cfg["finetune_steps"])),
        ]
        losses: list[float] = []
        done_steps = []
        for label, key, steps in phases:
            if steps > 0:
                losses = run_phase(policy, tensors, cfg, float(cfg[key]), steps, label, key)
                done_steps.append(len(losses))
    path = Path(out) if out else checkpoint_path(MODEL)
    summary = {"final_l1": float(np.mean(losses[-50:])), "samples": len(demos), "steps": done_steps}
    save_checkpoint(path, {**checkpoint_payload(policy, cfg), **summary})
    return {"checkpoint": str(path), **summary}


def checkpoint_payload(policy: Any, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What a checkpoint of ``policy`` trained with ``cfg`` holds (``load_policy_checkpoint``
    reads it): the version, the state dict, the training config (tuples saved as lists; a
    key unknown to it, None, left out: read back, it is unknown again)."""
    return {
        "version": CHECKPOINT_VERSION,
        "state_dict": policy.state_dict(),
        "config": {
            k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items() if v is not None
        },
    }


@contextmanager
def frozen_policy(policy: Any, cfg: Mapping[str, Any]) -> Iterator[str]:
    """The path of a checkpoint of ``policy``'s weights as they are now (written once, in a
    temporary folder removed on exit): the bench's closed-loop cells, in worker processes too,
    load this copy, not the checkpoint file again, which a ``neuroedge train`` finishing
    meanwhile may have replaced (the success rates would measure other weights than the
    timings and the parity)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="specprune-policy-") as folder:
        path = Path(folder) / "policy.pt"
        save_checkpoint(path, checkpoint_payload(policy, cfg))
        yield str(path)


def run_phase(
    policy: Any,
    tensors: list[Any],
    cfg: Mapping[str, Any],
    peak: float,
    steps: int,
    label: str,
    key: str = "lr",
) -> list[float]:
    """One cosine phase of ``steps`` AdamW steps from the policy's current weights, with its own
    optimizer and a data order seeded by ``cfg["seed"]``; returns the per-step L1 losses.
    TrainingDiverged naming ``key`` (the config key of ``peak``) at the first NaN or infinite
    loss, before the NaN weights are saved (the phase went on to its last step)."""
    import torch
    from neuroedge.divergence import check_loss
    from tqdm import tqdm

    opt = torch.optim.AdamW(policy.parameters(), lr=peak, weight_decay=1e-4)
    batch, n = int(cfg["batch"]), len(tensors[0])
    if n < batch:
        raise ValueError(f"batch={batch}: {n} demonstration samples, fewer than one batch")
    gen = torch.Generator().manual_seed(int(cfg["seed"]))
    losses: list[float] = []
    start, budget_s = time.monotonic(), 60.0 * float(cfg["max_minutes"] or 1e9)
    with tqdm(total=steps, desc=f"behaviour cloning, {label}", unit="step") as bar:
        while len(losses) < steps:
            order = torch.randperm(n, generator=gen)
            for first in range(0, n - batch + 1, batch):
                done = max(len(losses) / steps, (time.monotonic() - start) / budget_s)
                if done >= 1.0:
                    return losses
                for group in opt.param_groups:
                    group["lr"] = learning_rate(peak, done)
                idx = order[first : first + batch]
                prim, wrist, prop, text, target = (t[idx] for t in tensors)
                prim, wrist = (random_shift(v, int(cfg["shift"]), gen) for v in (prim, wrist))
                pred, _ = policy(prim, wrist, prop, text, torch.zeros(batch, policy.n_visual))
                loss = (pred - target).abs().mean()
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                opt.step()
                where = f"vla.specprune training, {label} step {len(losses) + 1}"
                losses.append(check_loss(loss.detach(), where, (key,)))  # read per step anyway
                bar.set_postfix(l1=f"{np.mean(losses[-50:]):.4f}")
                bar.update(1)
    return losses


def load_policy_checkpoint(path: str | os.PathLike[str]) -> tuple[Any, dict[str, Any]]:
    """(policy in eval mode, checkpoint config); a checkpoint of another version is refused."""
    from neuroedge.errors import ArtifactError
    from neuroedge.seeding import seeded

    ckpt = load_checkpoint(path, required=("version", "state_dict", "config"))
    if ckpt["version"] != CHECKPOINT_VERSION:
        raise ArtifactError(
            f"{path}: checkpoint version {ckpt['version']}, this neuroedge reads "
            f"version {CHECKPOINT_VERSION}"
        )
    cfg = saved_config(ckpt["config"], path)
    with seeded(0):  # its fresh layers draw, not from the caller's generator; the
        policy = make_policy(cfg)  # checkpoint's weights replace every one of them
    load_weights(policy, ckpt["state_dict"], path)
    return policy.eval(), cfg


def saved_config(saved: Any, path: str | os.PathLike[str]) -> dict[str, Any]:
    """A checkpoint's training config over every DEFAULTS key, checked as a user's is
    (``check_train_config``, today's defaults standing in for keys it lacks; the ``init``
    file it continued from need not exist here): ArtifactError naming the file and the bad
    value. A key it lacks is unknown (``settle_saved``: None, never compared with a
    train_config): one saved before the two-phase recipe trained epochs, not ``steps`` 1600
    and ``finetune_steps`` 1400. The keys the policy and bench are built from (every version-2
    checkpoint saves them) must be there."""
    from neuroedge.checkpoint_configs import checked_saved_config, settle_saved
    from neuroedge.errors import ConfigError

    def check(saved: Mapping[str, Any]) -> dict[str, Any]:
        check_train_config({**DEFAULTS, **saved, "init": ""})  # a bad value named first
        missing = [k for k in SAVED_KEYS if k not in saved]
        if missing:
            raise ConfigError(f"lacks {', '.join(missing)} (every version-2 checkpoint saves them)")
        return settle_saved(saved, DEFAULTS)

    return checked_saved_config(saved, path, check, DEFAULTS)
