"""The registered ModelSpec of alloc.envy_free (a HostProgram)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.envy_free.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.shapes import check_finite
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper


def allocate(query_means: np.ndarray) -> dict[str, np.ndarray]:
    """Threshold allocation of averaged query answers ``[items, 2]`` (columns: agents a, b)."""
    from neuroedge.models.envy_free import functional as F

    means = np.asarray(query_means, dtype=np.float64)
    if means.ndim != 2 or means.shape[1] != 2:
        raise ValueError(f"query_means: expected shape [items, 2], got {list(means.shape)}")
    check_finite(means, "query_means", columns=("agent a", "agent b"))
    to_b = F.threshold_allocation(means)
    return {"to_b": to_b, "estimated_envy": np.asarray([F.envy(np.clip(means, 0, 1), to_b)])}


def load_valuations(path: str | os.PathLike[str]) -> np.ndarray:
    """A user's valuation matrix CSV ``[m, 2]`` (values in [0, 1], UTF-8, an optional header
    row); errors name the file, its 1-based line, the column and the value."""
    from neuroedge.models.envy_free.functional import check_valuations
    from neuroedge.models.self_distill.data import read_numeric_csv_lines

    values, lines = read_numeric_csv_lines(path, columns=2, what="valuation matrix")
    return check_valuations(values, what=f"valuation matrix {path}", lines=lines)


def build(config: Mapping[str, Any]) -> HostProgram:
    return HostProgram(allocate, meta={"algorithm": "threshold on v_b / v_a, O(m log m)"})


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """Noisy means (tau = 50 queries, sigma = 1) of a 40-item hard instance with Delta = 6."""
    from neuroedge.models.envy_free import functional as F

    rng = np.random.default_rng(seed)
    values = F.hard_instance(40, 6.0, rng)
    return {"query_means": F.query_means(values, 50, 1.0, rng)[0]}


SPEC = ModelSpec(
    name="alloc.envy_free",
    family="algorithm",
    summary="two-agent envy-free allocation from noisy queries: non-adaptive threshold rule",
    inputs=(IOSpec("query_means", ("items", 2), "float64"),),
    outputs=(IOSpec("to_b", ("items",), "bool"), IOSpec("estimated_envy", (1,), "float64")),
    build=build,
    example=example,
    paper=Paper(
        "Envy-Free Allocation of Indivisible Goods via Noisy Queries",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2602.06361",
    ),
    efficiency=Efficiency("step"),
    tolerance={"default": 0.0},
    bench="neuroedge.models.envy_free.experiment:bench",
    config_keys={"build": (), "bench": tuple(BENCH_DEFAULTS)},
)
