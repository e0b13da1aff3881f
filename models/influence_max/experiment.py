"""The graph.influence_max benchmark: cumulative regret of UCB, epsilon-greedy and random.

Graphs: a random sparse graph (n = 20, 1-3 in-neighbours, p ~ U(0.05, 0.5), the notes' setting),
networkx's karate club and Les Miserables (both directions, weighted cascade p = 1/indeg(v)), and
any user edge list (``config edges=PATH``). Regret is the pseudo-regret against the oracle's set on
the true probabilities, spreads evaluated on ``eval_worlds`` common live-edge worlds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.models.influence_max import functional as F
from neuroedge.models.influence_max import learner as L
from neuroedge.types import Measurement, Report

NAME = "graph.influence_max"
DEFAULTS: dict[str, Any] = {
    "graphs": ["random20", "karate", "lesmis"],
    "k": 2,
    "horizon": 1500,
    "horizons": {"lesmis": 500},
    "rho": 0.1,
    "worlds": 200,
    "eval_worlds": 2000,
    "seed": 0,
    "edges": None,
}
POLICIES = ("ucb", "epsilon_greedy", "random")


def load_graph(name: str, cfg: Mapping[str, Any]) -> F.ICGraph:
    if name == "random20":
        return F.random_graph(20, cfg["seed"])
    if name in ("karate", "lesmis"):
        import networkx as nx

        return F.from_networkx(
            nx.karate_club_graph() if name == "karate" else nx.les_miserables_graph()
        )
    from neuroedge.models.influence_max.data import load_edge_list

    return load_edge_list(name)


def loglog_slope(regret: np.ndarray) -> float:
    """Slope of log R(t) against log t over t in [T/4, T] (all rounds, least squares)."""
    t = np.arange(len(regret) // 4, len(regret)) + 1
    return float(np.polyfit(np.log(t), np.log(np.maximum(regret[t - 1], 1e-9)), 1)[0])


def run_graph(name: str, cfg: Mapping[str, Any]) -> dict[str, Any]:
    graph = load_graph(name, cfg)
    horizon = int(cfg["horizons"].get(name, cfg["horizon"]))
    ref = L.RegretReference.build(graph, cfg["k"], cfg["eval_worlds"], cfg["seed"] + 1)
    worlds = F.Worlds.draw(graph, cfg["worlds"], cfg["seed"] + 2)
    policies = {
        "ucb": L.ucb_policy(cfg["k"], worlds, cfg["rho"]),
        "epsilon_greedy": L.epsilon_greedy_policy(cfg["k"], worlds),
        "random": L.random_policy(cfg["k"]),
    }
    curves = {
        p: L.run_online(
            graph, fn, ref, horizon, cfg["seed"] + 3, learn=p != "random", desc=f"{name} {p}"
        ).tolist()
        for p, fn in policies.items()
    }
    return {
        "n": graph.n,
        "edges": len(graph.src),
        "horizon": horizon,
        "best_set": list(ref.best),
        "best_spread": ref.best_value,
        "regret": curves,
    }


def rows_from(results: Mapping[str, Any]) -> list[Report]:
    rows = []
    for name, res in results.items():
        final_random = res["regret"]["random"][-1]
        for policy in POLICIES:
            curve = np.asarray(res["regret"][policy])
            rows.append(
                Report(
                    NAME,
                    "host",
                    f"{name}/{policy}",
                    metrics={
                        "regret": Measurement(float(curve[-1]), "nodes (cumulative)"),
                        "regret_slope": Measurement(loglog_slope(curve), "d log R / d log T"),
                        "regret_vs_random": Measurement(float(curve[-1] / final_random), "ratio"),
                        "regret_per_round": Measurement(float(curve[-1] / len(curve)), "nodes"),
                    },
                    notes=(
                        (
                            f"n={res['n']} E={res['edges']} T={res['horizon']} "
                            f"sigma(S*)={res['best_spread']:.3f} S*={res['best_set']}"
                        ),
                    ),
                )
            )
    return rows


def regret_plot(doc: dict[str, Any], path: Path) -> Path:
    """Cumulative regret against rounds, log-log, one panel per graph."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    results = doc["results"]
    fig, axes = plt.subplots(1, len(results), figsize=(4.5 * len(results), 3.8), squeeze=False)
    for ax, (name, res) in zip(axes[0], results.items()):
        for policy in POLICIES:
            curve = np.maximum(np.asarray(res["regret"][policy]), 1e-3)
            ax.loglog(np.arange(1, len(curve) + 1), curve, label=policy)
        t = np.arange(1, res["horizon"] + 1)
        ax.loglog(
            t,
            np.sqrt(t) * res["regret"]["ucb"][-1] / np.sqrt(t[-1]),
            "k:",
            label="sqrt(T) reference",
        )
        ax.set_title(f"{name} (n={res['n']}, K={doc['config']['k']})")
        ax.set_xlabel("round T")
        ax.set_ylabel("cumulative regret (nodes)")
        ax.legend(fontsize=8)
    return finish_figure(fig, path)


def bench(
    out_dir: str,
    backends: Sequence[str] = ("host",),
    config: Mapping[str, Any] | None = None,
    history: str | None = None,
) -> dict[str, Any]:
    """Run every graph and policy; write report.json/report.md/regret.png."""
    from neuroedge.bench.report import build_document, write_report

    cfg = {**DEFAULTS, **(config or {})}
    graphs = list(cfg["graphs"]) + ([cfg["edges"]] if cfg.get("edges") else [])
    results = {name: run_graph(name, cfg) for name in graphs}
    columns = ["regret", "regret_slope", "regret_vs_random", "regret_per_round"]
    doc = build_document(NAME, rows_from(results), config=cfg, results=results, columns=columns)
    write_report(doc, out_dir, columns=columns, plots=[regret_plot], history=history)
    return doc
