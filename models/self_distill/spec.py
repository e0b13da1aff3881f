"""The registered ModelSpec of stats.self_distill (a HostProgram)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.self_distill.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper


def distill(x: np.ndarray, y: np.ndarray, lam: np.ndarray) -> dict[str, np.ndarray]:
    """Ridge teacher, one-shot xi_hat and the optimally mixed student for ``lam[0]``.

    xi_hat is 0 (the student is the teacher) where the estimated D is 0, e.g. for y = 0."""
    from neuroedge.models.self_distill import functional as F

    lam_value = float(np.asarray(lam).reshape(-1)[0])
    svd = F.RidgeSVD.fit(x, y)
    xi_hat = F.one_shot(svd, lam_value).xi_star
    return {
        "xi_hat": np.asarray([xi_hat]),
        "teacher": F.teacher(svd, lam_value),
        "student": F.student(svd, lam_value, xi_hat),
    }


def build(config: Mapping[str, Any]) -> HostProgram:
    return HostProgram(distill, meta={"estimator": "one-shot GCV-corrected (Eqs 17-19)"})


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """An isotropic problem with n = 80, p = 40, at the over-regularised lambda = 2."""
    from neuroedge.models.self_distill.experiment import isotropic_problem

    x, y, _ = isotropic_problem(80, seed)
    return {"x": x, "y": y, "lam": np.asarray([2.0])}


SPEC = ModelSpec(
    name="stats.self_distill",
    family="algorithm",
    summary="ridge self-distillation with the optimal (possibly negative) mixing weight, one-shot",
    inputs=(
        IOSpec("x", ("n", "p"), "float64"),
        IOSpec("y", ("n",), "float64"),
        IOSpec("lam", (1,), "float64"),
    ),
    outputs=(
        IOSpec("xi_hat", (1,), "float64"),
        IOSpec("teacher", ("p",), "float64"),
        IOSpec("student", ("p",), "float64"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "Optimal Unconstrained Self-Distillation in Ridge Regression",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2602.17565",
    ),
    efficiency=Efficiency("FLOP"),
    tolerance={"default": 1e-10},
    bench="neuroedge.models.self_distill.experiment:bench",
    config_keys={"build": (), "bench": tuple(BENCH_DEFAULTS)},
)
