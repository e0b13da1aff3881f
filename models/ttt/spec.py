"""The registered ModelSpec of ttt.linear_attention.

The program is one multi-head TTT layer in its streaming form: a token-level (chunk 1),
update-then-apply recurrence with the fast weight as explicit state,
``(x_t, S_t[, M_t]) -> (y_t, S_t+1[, M_t+1])``, S_0 = the learned W1_0. The default variant is
V6, the end of the paper's ladder (exactly linear attention); ``variant=la_momentum`` (or any
static-kernel variant without weight norm) adds a momentum state M. Weights are seeded, not
trained: this program's contract is numerics (forms agree, exports match) and speed; task
quality is measured by ``neuroedge train ttt.linear_attention`` (the ladder on MQAR).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.ttt.throughput import BENCH_DEFAULTS
from neuroedge.models.ttt.train import DEFAULTS as TRAIN_DEFAULTS
from neuroedge.seeding import seeded
from neuroedge.types import Efficiency, IOSpec, ModelSpec, Paper, TorchProgram

DEFAULTS: dict[str, Any] = {"variant": "v6", "d_model": 32, "heads": 2, "head_dim": 16, "seed": 0}
EXAMPLE_STEPS, EXAMPLE_BATCH = 16, 2


def check_build(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """``config`` over DEFAULTS with the sizes and seed checked (``module.check_sizes``; seed
    0..2**32-1, numpy's and torch's seed range: 1.5 ran as seed 1), before any allocation;
    each as a plain int (``np.int64(16)`` passes the check, and TTTLayer takes Python ints)."""
    from neuroedge.config_values import SEED_MAX, integer
    from neuroedge.models.ttt.module import check_sizes

    cfg = {**DEFAULTS, **(config or {})}
    check_sizes(cfg)
    cfg["seed"] = integer(cfg, "seed", 0, SEED_MAX)
    cfg.update({key: integer(cfg, key) for key in ("d_model", "heads", "head_dim")})
    return cfg


def make_layer(config: Mapping[str, Any]) -> Any:
    """The seeded token-level layer described by ``config`` (merged over DEFAULTS)."""
    from neuroedge.models.ttt.module import TTTLayer

    cfg = check_build(config)
    with seeded(cfg["seed"]):
        return TTTLayer(
            cfg["d_model"],
            cfg["heads"],
            cfg["head_dim"],
            str(cfg["variant"]),
            chunk=1,
            order="update_then_apply",
        ).eval()


def build(config: Mapping[str, Any]) -> TorchProgram:
    """The streaming step of the layer; ``config={"smoke": True}`` is already tiny."""
    from neuroedge.models.ttt.module import TTTStreamingStep

    cfg = check_build(config)
    layer = make_layer(cfg)
    step = TTTStreamingStep(layer).eval()
    return TorchProgram(
        step,
        ("x",),
        ("y",),
        step.state_names,
        step.init_state,
        meta={
            "variant": layer.variant.name,
            "trained": False,
            "config": cfg,
            "axes": {"d_model": int(layer.qkv.in_features)},
        },
    )


def example(seed: int = 0, config: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """A (T=16, batch=2, d_model) float32 sequence of Gaussian tokens (d_model from
    ``config``, else the default 32)."""
    rng = np.random.default_rng(seed)
    width = check_build(config)["d_model"]  # before build sees it, and before allocating
    x = rng.standard_normal((EXAMPLE_STEPS, EXAMPLE_BATCH, width))
    return {"x": x.astype(np.float32)}


def _train(config: Mapping[str, Any] | None = None, out: str | None = None) -> dict[str, Any]:
    from neuroedge.atomic import check_writable
    from neuroedge.models.ttt.train import ladder, summary

    folder = "ttt_ladder" if out is None else out
    check_writable(folder, folder=True)  # before any training ('' too: not the default)
    result = ladder(config, folder)
    return {"out": folder, **summary(result)}


SPEC = ModelSpec(
    name="ttt.linear_attention",
    family="ttt",
    summary="TTT layer (LaCT ladder baseline..V6) as learned linear attention; streaming state",
    inputs=(IOSpec("x", ("T", "batch", "d_model")),),
    outputs=(IOSpec("y", ("T", "batch", "d_model")),),
    build=build,
    example=example,
    paper=Paper(
        "Test-Time Training with KV Binding Is Secretly Linear Attention",
        "ICML",
        2026,
        "https://arxiv.org/abs/2602.21204",
    ),
    efficiency=Efficiency("FLOP"),
    tolerance={"onnxrt": 1e-4, "default": 1e-4},
    default_config=DEFAULTS,
    train=_train,
    bench="neuroedge.models.ttt.throughput:bench",
    bench_backends=("host", "onnxrt"),
    exportable=("onnx",),
    # build: DEFAULTS (default_config), and "smoke", accepted and a no-op: the seeded
    # program is always tiny and untrained
    config_keys={
        "build": (*DEFAULTS, "smoke"),
        "train": tuple(TRAIN_DEFAULTS),
        "bench": tuple(BENCH_DEFAULTS),
    },
)
