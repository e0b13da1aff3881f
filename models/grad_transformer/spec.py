"""The registered ModelSpec of transfer.grad_transformer (a HostProgram: update generator).

``run``: small-model updates ``[batch, 9]`` (a client's fine-tuning delta of the small linear
model on a task of the family) -> the generated large-model updates ``[batch, 65]`` (add them to
the large model's start, zero). The generator is trained at build on the shadow pairs of the
family of ``seed`` (~30 s on 2 cores; ``smoke``: a few steps, for plumbing tests only).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.grad_transformer.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

SMALL, LARGE = 9, 65  # functional.SMALL / LARGE (functional.py imports torch)
BUILD_KEYS = tuple(k for k in BENCH_DEFAULTS if k not in ("seeds", "workers", "private_tasks"))
SMOKE = {"shadow_tasks": 4, "steps": 3, "d_model": 8}


def build(config: Mapping[str, Any]) -> HostProgram:
    """``fn(delta_small)`` -> ``delta_large``."""
    from neuroedge.config_values import flag
    from neuroedge.models.grad_transformer import experiment as X
    from neuroedge.models.grad_transformer import functional as F
    from neuroedge.seeding import one_thread
    from neuroedge.shapes import check_finite

    smoke = flag(config, "smoke")
    cfg = X.check_config({**BENCH_DEFAULTS, **{k: v for k, v in config.items() if k != "smoke"}})
    if smoke:
        cfg.update(SMOKE)
    else:
        print(f"{SPEC.name}: training the generator (~30 s)", file=sys.stderr)
    with one_thread():
        rng = np.random.default_rng(cfg["seed"])
        small, large = X.shadow_pairs(F.Family.make(cfg["seed"]), cfg, rng)
        model = X.train_gt(small, large, cfg, cfg["seed"])

    def generate(delta_small: Any) -> dict[str, np.ndarray]:
        arr = np.asarray(delta_small)
        if arr.ndim != 2 or arr.shape[1] != SMALL or len(arr) == 0:
            raise ValueError(
                f"delta_small: expected [batch >= 1, {SMALL}] small-model updates (8 weights, "
                f"1 bias), got {list(arr.shape)}"
            )
        return {"delta_large": model.generate(check_finite(arr, "delta_small:"))}

    return HostProgram(generate, meta={"seed": cfg["seed"], "pairs": len(small)})


def family_seed(config: Mapping[str, Any] | None = None) -> int:
    """The seed of the task family a build with ``config`` trains the generator on (``seed``,
    else the bench default). ConfigError names a bad value."""
    from neuroedge.config_values import integer

    return integer({"seed": BENCH_DEFAULTS["seed"], **(config or {})}, "seed", 0, 2**31 - 1)


def example(seed: int = 0, config: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """The small updates of four fresh tasks of the family the generator of a build with
    ``config`` was trained on (``family_seed``: seed 0 by default); ``seed`` draws the tasks."""
    from neuroedge.models.grad_transformer import functional as F

    fam, rng = F.Family.make(family_seed(config)), np.random.default_rng(1000 + seed)
    deltas = []
    for _ in range(4):
        x, y = fam.task(rng, 256, rng.standard_normal(F.D_IN))
        deltas.append(F.gd_iterates(fam.small_features(x), y, 100, 0.1, 1)[-1])
    return {"delta_small": np.stack(deltas)}


SPEC = ModelSpec(
    name="transfer.grad_transformer",
    family="ann",
    summary="Grad-Transformer: a large model's update generated from a small model's (edge "
    "client fine-tunes the small one)",
    inputs=(IOSpec("delta_small", ("batch", SMALL), "float64"),),
    outputs=(IOSpec("delta_large", ("batch", LARGE), "float64"),),
    build=build,
    example=example,
    paper=Paper(
        "Gradient Transformer: Learning to Generate Updates for LLMs",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2605.27591",
    ),
    efficiency=Efficiency("FLOP"),
    tolerance={"default": 1e-9},
    bench="neuroedge.models.grad_transformer.experiment:bench",
    seed_sweep=True,
    config_keys={"build": (*BUILD_KEYS, "smoke"), "bench": tuple(BENCH_DEFAULTS)},
)
