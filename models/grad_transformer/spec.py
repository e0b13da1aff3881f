"""The registered ModelSpec of transfer.grad_transformer (a HostProgram: update generator).

``run``: small-model updates ``[batch, 9]`` (a client's fine-tuning delta of the small linear
model on a task of the family) -> the generated large-model updates ``[batch, 65]`` (add them to
the large model's start, zero). The generator is trained at build on the shadow pairs of the
family of ``seed`` (~30 s on 2 cores; ``smoke``: a few steps, for plumbing tests only; its
sizes apply to the keys not given). The example's small updates are fine-tuned as the shadow
tasks' are (the build's ``samples``, ``gd_steps``, ``gd_lr``).
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


def build_config(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The checked config of a build (``config_values.layered``: the bench's defaults,
    ``smoke``'s values under the keys not given, the keys given). ConfigError names a bad
    value."""
    from neuroedge.config_values import layered
    from neuroedge.models.grad_transformer import experiment as X

    return X.check_config(layered(config or {}, BENCH_DEFAULTS, SMOKE)[2])


def build(config: Mapping[str, Any]) -> HostProgram:
    """``fn(delta_small)`` -> ``delta_large``."""
    from neuroedge.config_values import flag
    from neuroedge.models.grad_transformer import experiment as X
    from neuroedge.models.grad_transformer import functional as F
    from neuroedge.seeding import one_thread
    from neuroedge.shapes import check_finite

    cfg = build_config(config)
    if not flag(config, "smoke"):
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


def example(seed: int = 0, config: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """The small updates of four fresh tasks of the family the generator of a build with
    ``config`` was trained on (its ``seed``: 0 by default), each fine-tuned as that build's
    shadow tasks were (``samples`` examples, ``gd_steps`` steps at ``gd_lr``: the input the
    generator learnt from); ``seed`` draws the tasks. ConfigError names a bad build value."""
    from neuroedge.models.grad_transformer import functional as F

    cfg = build_config(config)
    fam, rng = F.Family.make(cfg["seed"]), np.random.default_rng(1000 + seed)
    deltas = []
    for _ in range(4):
        x, y = fam.task(rng, cfg["samples"], rng.standard_normal(F.D_IN))
        gd = (cfg["gd_steps"], cfg["gd_lr"], 1)
        deltas.append(F.gd_iterates(fam.small_features(x), y, *gd)[-1])
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
