"""The registered ModelSpec of graph.influence_max (a HostProgram: the standard oracle)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.config_values import SEED_MAX, integer
from neuroedge.models.influence_max.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.models.influence_max.experiment import MAX_WORLDS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper


BUILD_DEFAULTS: dict[str, Any] = {"k": 2, "worlds": 200, "seed": 0}


def check_config(config: Mapping[str, Any]) -> tuple[int, int, int]:
    """(k, worlds, seed) of the run config, checked before any work: k (the seed budget; at
    most the graph's node count, checked when the edges are given) and worlds in 1..10^5
    integers, seed an integer in 0..2^32-1 (the bench's, numpy's seeds). ConfigError names the
    key and the value."""
    cfg = {**BUILD_DEFAULTS, **config}
    k, worlds = integer(cfg, "k", 1), integer(cfg, "worlds", 1, MAX_WORLDS)
    return k, worlds, integer(cfg, "seed", 0, SEED_MAX)


def build(config: Mapping[str, Any]) -> HostProgram:
    """The offline oracle on given edges: seeds maximising the Monte-Carlo spread."""
    from neuroedge.models.influence_max import functional as F
    from neuroedge.models.influence_max.data import check_edges

    k, worlds, seed = check_config(config)

    def oracle(src: np.ndarray, dst: np.ndarray, prob: np.ndarray) -> dict[str, np.ndarray]:
        """Checks the edges as the edge-list loader does (non-empty, integer ids, no self-loop,
        no repeated edge, ids 0..n-1 each in some edge), errors naming the edge index, and the
        reach's memory at this n (functional.MAX_REACH_BYTES) before drawing any world."""
        src, dst, prob = (np.asarray(a) for a in (src, dst, prob))
        n = check_edges(src, dst, prob)
        peak = F.reach_peak_bytes(n, worlds)
        F.check_reach_memory(n, {"worlds": worlds}, peak, f"graph of {len(src)} edges")
        graph = F.ICGraph(n, src, dst, prob)
        reach = F.Worlds.draw(graph, worlds, seed).reach(graph)
        best = F.best_seed_set(reach, k)
        return {"seeds": np.asarray(best, np.int64), "spread": np.asarray([F.spread(reach, best)])}

    # the seeds output is [k]: backends resolve the spec's "k" axis from the built program
    return HostProgram(oracle, meta={"k": k, "worlds": worlds, "axes": {"k": k}})


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """A random 20-node graph with 1-3 in-neighbours per node."""
    from neuroedge.models.influence_max.functional import random_graph

    g = random_graph(20, seed)
    return {"src": g.src, "dst": g.dst, "prob": g.prob}


SPEC = ModelSpec(
    name="graph.influence_max",
    family="algorithm",
    summary="online influence maximisation (IC, node-level feedback, standard oracle, GLM-UCB)",
    inputs=(
        IOSpec("src", ("edges",), "int64"),
        IOSpec("dst", ("edges",), "int64"),
        IOSpec("prob", ("edges",), "float64"),
    ),
    outputs=(IOSpec("seeds", ("k",), "int64"), IOSpec("spread", (1,), "float64")),
    build=build,
    example=example,
    paper=Paper(
        "Efficient Online Influence Maximization under Independent Cascade with "
        "Node-Level Feedback",
        "ICML 2026",
        2026,
    ),
    efficiency=Efficiency("step"),
    tolerance={"default": 0.0},
    bench="neuroedge.models.influence_max.experiment:bench",
    config_keys={"build": tuple(BUILD_DEFAULTS), "bench": tuple(BENCH_DEFAULTS)},
)
