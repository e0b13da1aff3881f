"""The registered ModelSpec of uq.last_layer (a HostProgram around a trained MLP + GLM)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.config_values import integer
from neuroedge.models.uq_last_layer.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.models.uq_last_layer.experiment import MAX_SEED, MAX_STEPS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

IN_FEATURES = 8  # the synthetic regression task of data.synthetic_regression


def check_inputs(x: Any) -> np.ndarray:
    """``x`` as float64 ``[batch, IN_FEATURES]``; ValueError naming the shape, or the row,
    column (0-based) and value of the first NaN/inf (which would give NaN outputs)."""
    arr = np.asarray(x, np.float64)
    if arr.ndim != 2 or arr.shape[1] != IN_FEATURES:
        raise ValueError(f"x: expected shape [batch, {IN_FEATURES}], got {list(arr.shape)}")
    from neuroedge.shapes import check_finite

    return check_finite(arr, "x:", hint="; the predictive of a NaN/inf input is NaN")


def build(config: Mapping[str, Any]) -> HostProgram:
    """Train the MAP MLP on the synthetic regression task and fit the GLM predictive.

    ``subset`` picks "last_layer" (default) or "full"; ``smoke`` trains a tiny model briefly.
    """
    from neuroedge.models.uq_last_layer import functional as F
    from neuroedge.models.uq_last_layer.data import load_split

    subset = str(config.get("subset", "last_layer"))
    if subset not in F.SUBSETS:
        raise ValueError(f"subset {subset!r} is not one of {', '.join(F.SUBSETS)}")
    smoke = bool(config.get("smoke"))
    cfg = {"seed": 0, "steps": 30 if smoke else 1000, **config}
    seed, steps = integer(cfg, "seed", 0, MAX_SEED), integer(cfg, "steps", 1, MAX_STEPS)
    split = load_split("synthetic", seed, 200 if smoke else 2000)
    net = F.make_mlp(IN_FEATURES, 8 if smoke else 32, 1, seed)
    F.train_map(net, split.x_train, split.y_train, "regression", steps=steps, lr=5e-3)
    f, jac = F.jacobians(net, split.x_train, subset)
    post = F.fit_glm(f, jac, split.y_train, F.theta_of(net, subset), "regression")

    def predictive(x: np.ndarray) -> dict[str, np.ndarray]:
        pred = F.predict(post, *F.jacobians(net, check_inputs(x), subset))
        return {
            "mean": pred.mean[:, None],
            "variance": pred.total_var[:, None],
            "epistemic_var": pred.variance[:, None],
        }

    return HostProgram(
        predictive,
        meta={
            "subset": subset,
            "prior_prec": post.prior_prec,
            "noise_var": post.noise_var,
            "params": int(post.eigvals.size),
        },
    )


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """Four standardised inputs of the synthetic task, the last one far out (OOD)."""
    x = np.random.default_rng(seed).standard_normal((4, IN_FEATURES))
    x[-1] *= 3.0
    return {"x": x}


SPEC = ModelSpec(
    name="uq.last_layer",
    family="ann",
    summary="linearised-Laplace GLM predictive over the last layer vs the full network",
    inputs=(IOSpec("x", ("batch", IN_FEATURES), "float64"),),
    outputs=(
        IOSpec("mean", ("batch", 1), "float64"),
        IOSpec("variance", ("batch", 1), "float64"),
        IOSpec("epistemic_var", ("batch", 1), "float64"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "Is the Last Layer Sufficient for Uncertainty Quantification?",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2605.30741",
    ),
    efficiency=Efficiency("FLOP"),
    tolerance={"default": 1e-8},
    bench="neuroedge.models.uq_last_layer.experiment:bench",
    seed_sweep=True,
    # bench: its DEFAULTS plus the seed list and worker processes (bench.seeds)
    config_keys={
        "build": ("subset", "smoke", "seed", "steps"),
        "bench": (*BENCH_DEFAULTS, "seeds", "workers"),
    },
)
