"""The graph.influence_max benchmark: cumulative regret of UCB, epsilon-greedy and random.

Policies: ``ucb`` (optimistic node-level GLM-UCB at config ``rho``), ``ucb_rho0`` (the same
learner at rho = 0, greedy on the MLE: an ablation showing what optimism does), epsilon-greedy
(epsilon = 0.1) on the MLE, and random; every UCB row's note gives its rho. ``claim`` in
report.json (and its report.md section) reads the issue's thresholds on UCB per graph: log-log
regret slope < 0.6 and regret < 0.25 x random's at the horizon; it holds only if all parts do.

Graphs: a random sparse graph (n = 20, 1-3 in-neighbours, p ~ U(0.05, 0.5), the notes' setting),
networkx's karate club and Les Miserables (both directions, weighted cascade p = 1/indeg(v)), and
any user edge list (``config edges=PATH``; one directed edge per line, ``undirected=true`` adds
each line's reverse; a file read as directed with no edge whose reverse it also lists gets a
note naming ``undirected=true``, on its ucb row). Regret is the pseudo-regret against the
oracle's set on the true probabilities, spreads evaluated on ``eval_worlds`` common live-edge
worlds.

Every graph is loaded and the config checked (``load_all``) before the first simulation, so a bad
``edges`` file or a typo in ``graphs`` fails at once rather than after the other graphs ran.
``graphs`` is a list of built-in names or edge-list paths (a single string counts as a one-element
list); ``k`` must be in 1..n-1 on every graph; ``horizon`` and each of ``horizons`` at least 2
(the slope is fitted over rounds [T/4, T]); a user's ``horizons`` keys must name graphs of
the run; each graph's dense reachability (worlds x n x n) must fit functional.MAX_REACH_BYTES
at ``worlds`` and ``eval_worlds``. regret_vs_random is left out, with a rejection saying why,
when random's own regret is zero (the ratio would be 0/0).

Horizons (``merged``): ``horizons`` gives a graph its own horizon, ``horizon`` every other
graph's. A user's ``horizon`` without ``horizons`` applies to every graph: the default
``horizons`` (Les Mis at 500) holds only when neither key is given; with both, each
``horizons`` entry wins for its graph.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.seeds import VERDICT_WORDS, verdict
from neuroedge.config_values import SEED_MAX, flag, integer, number
from neuroedge.errors import ConfigError
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
    "undirected": False,
}
POLICIES = ("ucb", "ucb_rho0", "epsilon_greedy", "random")
# ucb_rho0: the same learner with rho = 0, greedy on the MLE (no optimism), as an ablation
CLAIM_SLOPE, CLAIM_RATIO = 0.6, 0.25  # UCB: log-log regret slope < 0.6, regret < 0.25 x random
BUILTIN = ("random20", "karate", "lesmis")
MAX_HORIZON = 10**6  # rounds per graph
MIN_HORIZON = 2  # the regret slope is fitted over rounds [T/4, T]: T = 1 leaves one point
HORIZON_HINT = " (the log-log regret slope over rounds [T/4, T] needs at least 2 of them)"
MAX_WORLDS = 10**5  # live-edge worlds drawn at once (reach is worlds x n x n; its memory at a
# graph's n is bounded by functional.MAX_REACH_BYTES)
RATIO_FLOOR = 1e-9  # nodes per round: random's regret at or below this makes the ratio undefined


def merged(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """DEFAULTS under the user's config; a user's ``horizon`` without ``horizons`` drops the
    default per-graph ``horizons`` (it ran Les Mis at 500 whatever ``horizon`` said)."""
    user = dict(config or {})
    cfg = {**DEFAULTS, **user}
    if "horizon" in user and "horizons" not in user:
        cfg["horizons"] = {}
    return cfg


def load_graph(name: str, cfg: Mapping[str, Any]) -> F.ICGraph:
    """A built-in graph (``BUILTIN``) by name, else the edge-list file at path ``name``."""
    if name == "random20":
        return F.random_graph(20, cfg["seed"])
    if name in ("karate", "lesmis"):
        import networkx as nx

        return F.from_networkx(
            nx.karate_club_graph() if name == "karate" else nx.les_miserables_graph()
        )
    from neuroedge.models.influence_max.data import load_edge_list

    return load_edge_list(name, undirected=flag(cfg, "undirected"))


def graph_names(cfg: Mapping[str, Any]) -> list[str]:
    """The graphs to run: ``graphs`` (a list; a single string is taken as a one-element list),
    then ``edges`` (one path, or None/empty for none). Refuses wrong types, and names in
    ``graphs`` that are neither built in nor an existing file, listing the built-in names."""
    graphs, edges = cfg["graphs"], cfg.get("edges")
    if isinstance(graphs, str):
        graphs = [graphs]
    if not isinstance(graphs, (list, tuple)) or not all(isinstance(g, str) for g in graphs):
        raise ConfigError(
            f"config graphs must be a list of graph names ({', '.join(BUILTIN)}) or "
            f"edge-list paths, got {graphs!r}"
        )
    if edges is not None and not isinstance(edges, (str, os.PathLike)):
        raise ConfigError(
            f"config edges must be the path of an edge-list file, got {edges!r} "
            f"({type(edges).__name__})"
        )
    for name in graphs:
        if name not in BUILTIN and not Path(name).is_file():
            raise ConfigError(
                f"config graphs: {name!r} is neither a built-in graph (valid names: "
                f"{', '.join(BUILTIN)}) nor an existing edge-list file"
            )
    names = list(graphs) + ([os.fspath(edges)] if edges else [])
    if not names:
        raise ConfigError("config graphs is empty and no edges=PATH is given: nothing to run")
    return names


def load_all(cfg: Mapping[str, Any]) -> dict[str, F.ICGraph]:
    """Every requested graph, loaded and checked before any simulation starts; the seed budget
    k must be an integer in 1..n-1 on each (k >= n seeds every node: one possible set, zero
    regret for every policy, nothing to learn, and regret_vs_random would be 0/0)."""
    if not isinstance(cfg["horizons"], Mapping):
        raise ConfigError(
            f"config horizons must map graph names to horizons, got {cfg['horizons']!r}"
        )
    # horizon=2.5 ran 2 rounds, horizon=0 failed after the simulations, eval_worlds=2.5 inside
    # numpy, worlds=0 gave NaN rows, rho=-1 and seed=-1 ran, horizon=1 failed in the slope's
    # fit after every policy ran
    integer(cfg, "horizon", MIN_HORIZON, MAX_HORIZON, HORIZON_HINT)
    for name, horizon in cfg["horizons"].items():
        key = f"horizons[{name!r}]"
        integer({key: horizon}, key, MIN_HORIZON, MAX_HORIZON, HORIZON_HINT)
    integer(cfg, "worlds", 1, MAX_WORLDS)
    integer(cfg, "eval_worlds", 1, MAX_WORLDS)
    integer(cfg, "seed", 0, SEED_MAX)
    number(cfg, "rho", 0, 100)
    flag(cfg, "undirected")
    names = graph_names(cfg)
    check_horizon_keys(cfg["horizons"], names)
    graphs = {name: load_graph(name, cfg) for name in names}
    k = integer(cfg, "k", 1, hint=" (the seed budget)")
    for name, graph in graphs.items():
        if k >= graph.n:
            raise ConfigError(
                f"config k={k}: graph {name!r} has only {graph.n} nodes; k must be at most "
                f"{graph.n - 1} (k >= n seeds every node, so no policy has anything to learn)"
            )
        check_memory(name, graph.n, cfg)
    return graphs


def check_horizon_keys(horizons: Mapping[str, Any], names: Sequence[str]) -> None:
    """Every key of a user's ``horizons`` must name a graph of this run (a built-in name or
    an edge-list path exactly as given), else its horizon would be silently ignored; the
    default (``{"lesmis": 500}``) is exempt, as lesmis need not be run."""
    if dict(horizons) == DEFAULTS["horizons"]:
        return
    unknown = [key for key in horizons if key not in names]
    if unknown:
        raise ConfigError(
            f"config horizons: {', '.join(repr(k) for k in unknown)} names no graph of this "
            f"run; valid names: {', '.join(names)}"
        )


def check_memory(name: str, n: int, cfg: Mapping[str, Any]) -> None:
    """Refuse a graph whose dense reachability would not fit (functional.MAX_REACH_BYTES): the
    regret reference builds a reach over ``eval_worlds`` worlds and holds it while each
    policy builds one over ``worlds`` worlds."""
    held, worlds = int(cfg["eval_worlds"]), int(cfg["worlds"])
    peak = max(F.reach_peak_bytes(n, held), F.reach_peak_bytes(n, worlds, held))
    counts = {"worlds": worlds, "eval_worlds": held}
    F.check_reach_memory(n, counts, peak, f"config graphs: graph {name!r}")


def loglog_slope(regret: np.ndarray) -> float:
    """Slope of log R(t) against log t over t in [T/4, T] (all rounds, least squares)."""
    t = np.arange(len(regret) // 4, len(regret)) + 1
    return float(np.polyfit(np.log(t), np.log(np.maximum(regret[t - 1], 1e-9)), 1)[0])


def one_way_note(name: str, graph: F.ICGraph, cfg: Mapping[str, Any]) -> str | None:
    """The note for an edge-list file read as directed (``undirected`` false) none of whose
    edges has its reverse: a file of one line per undirected edge reads so, half its edges."""
    from neuroedge.models.influence_max.data import reads_as_one_way

    if name in BUILTIN or cfg.get("undirected") or not reads_as_one_way(graph):
        return None
    return (
        f"edge list read as directed ({len(graph.src)} one-way edges, none with its reverse); "
        "if each line is an undirected edge, rerun with --config undirected=true"
    )


def run_graph(name: str, graph: F.ICGraph, cfg: Mapping[str, Any]) -> dict[str, Any]:
    horizon = int(cfg["horizons"].get(name, cfg["horizon"]))
    ref = L.RegretReference.build(graph, cfg["k"], cfg["eval_worlds"], cfg["seed"] + 1)
    worlds = F.Worlds.draw(graph, cfg["worlds"], cfg["seed"] + 2)
    policies = {
        "ucb": L.ucb_policy(cfg["k"], worlds, cfg["rho"]),
        "ucb_rho0": L.ucb_policy(cfg["k"], worlds, 0.0),
        "epsilon_greedy": L.epsilon_greedy_policy(cfg["k"], worlds),
        "random": L.random_policy(cfg["k"]),
    }
    curves = {
        p: L.run_online(
            graph, fn, ref, horizon, cfg["seed"] + 3, learn=p != "random", desc=f"{name} {p}"
        ).tolist()
        for p, fn in policies.items()
    }
    out = {
        "n": graph.n,
        "edges": len(graph.src),
        "horizon": horizon,
        "best_set": list(ref.best),
        "best_spread": ref.best_value,
        "rho": {"ucb": float(cfg["rho"]), "ucb_rho0": 0.0},
        "regret": curves,
    }
    note = one_way_note(name, graph, cfg)
    return {**out, "read_note": note} if note else out


def policy_row(name: str, policy: str, res: Mapping[str, Any]) -> Report:
    """One graph/policy row. regret_vs_random is the final regret over random's; when random's
    is not above ``RATIO_FLOOR`` per round (every seed set spreads about as far as S*, e.g. a
    strongly connected graph with p = 1) the ratio is undefined: it is left out and the row's
    rejection says why, rather than writing NaN or a ratio of rounding noise."""
    curve = np.asarray(res["regret"][policy])
    final_random = float(res["regret"]["random"][-1])
    metrics = {
        "regret": Measurement(float(curve[-1]), "nodes (cumulative)"),
        "regret_slope": Measurement(loglog_slope(curve), "d log R / d log T"),
        "regret_per_round": Measurement(float(curve[-1] / len(curve)), "nodes"),
    }
    rejections: tuple[str, ...] = ()
    if final_random > RATIO_FLOOR * len(curve):
        metrics["regret_vs_random"] = Measurement(float(curve[-1] / final_random), "ratio")
    else:
        rejections = (
            f"regret_vs_random undefined: random's cumulative regret is {final_random:.3g} "
            "(every seed set spreads about as far as the oracle's)",
        )
    note = (
        f"n={res['n']} E={res['edges']} T={res['horizon']} "
        f"sigma(S*)={res['best_spread']:.3f} S*={res['best_set']}"
    )
    rho = res.get("rho", {}).get(policy)
    if rho is not None:
        note += f" rho={rho:g}" + (" (greedy on the MLE, no optimism)" if rho == 0 else "")
    notes = (note, res["read_note"]) if policy == "ucb" and res.get("read_note") else (note,)
    return Report(
        NAME, "host", f"{name}/{policy}", metrics=metrics, rejections=rejections, notes=notes
    )


def rows_from(results: Mapping[str, Any]) -> list[Report]:
    return [policy_row(name, p, res) for name, res in results.items() for p in ran(res)]


def ran(res: Mapping[str, Any]) -> list[str]:
    """The policies of ``POLICIES`` that a graph's result holds curves for, in that order."""
    return [p for p in POLICIES if p in res["regret"]]


def claim(results: Mapping[str, Any]) -> dict[str, Any]:
    """The issue's claim per graph, on UCB's curve: log-log regret slope over [T/4, T] below
    CLAIM_SLOPE and final regret below CLAIM_RATIO x random's. The ratio part is None (not
    measured) when random's regret is at or below RATIO_FLOOR per round; ``holds`` is True only
    when every part of every graph holds, False when any fails."""
    graphs: dict[str, Any] = {}
    for name, res in results.items():
        ucb, rnd = np.asarray(res["regret"]["ucb"]), float(res["regret"]["random"][-1])
        slope = loglog_slope(ucb)
        ratio = float(ucb[-1] / rnd) if rnd > RATIO_FLOOR * len(ucb) else None
        cell = {
            "horizon": len(ucb),
            "rho": res.get("rho", {}).get("ucb"),
            "slope": slope,
            "slope_holds": bool(slope < CLAIM_SLOPE),
            "regret_vs_random": ratio,
            "ratio_holds": None if ratio is None else bool(ratio < CLAIM_RATIO),
        }
        cell["holds"] = verdict([cell["slope_holds"], cell["ratio_holds"]])
        graphs[name] = cell
    return {
        "bounds": {"slope_below": CLAIM_SLOPE, "regret_vs_random_below": CLAIM_RATIO},
        "graphs": graphs,
        "holds": verdict([c["holds"] for c in graphs.values()]) if graphs else None,
    }


def claim_section(c: Mapping[str, Any]) -> list[str]:
    """report.md lines: the claim per graph (UCB's slope and ratio to random)."""
    mark = {True: "yes", False: "**no**", None: "not measured"}
    lines = [
        "## Claim",
        "",
        f"UCB per graph: log-log regret slope over [T/4, T] < {CLAIM_SLOPE} and regret < "
        f"{CLAIM_RATIO} x random's at the horizon.",
        "",
        "| graph | T | rho | slope | slope holds | regret / random | ratio holds | holds |",
        "|" + "---|" * 8,
    ]
    for name, g in c["graphs"].items():
        ratio = "undefined" if g["regret_vs_random"] is None else f"{g['regret_vs_random']:.4f}"
        lines.append(
            f"| {name} | {g['horizon']} | {g['rho']} | {g['slope']:.3f} | "
            f"{mark[g['slope_holds']]} | {ratio} | {mark[g['ratio_holds']]} | "
            f"{mark[g['holds']]} |"
        )
    return [*lines, "", f"All: {VERDICT_WORDS[c['holds']]}.", ""]


def regret_plot(doc: dict[str, Any], path: Path) -> Path:
    """Cumulative regret against rounds, log-log, one panel per graph."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    results = doc["results"]
    fig, axes = plt.subplots(1, len(results), figsize=(4.5 * len(results), 3.8), squeeze=False)
    for ax, (name, res) in zip(axes[0], results.items()):
        for policy in ran(res):
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

    cfg = merged(config)
    graphs = load_all(cfg)  # every config error before the first simulation
    if isinstance(cfg["graphs"], str):
        cfg["graphs"] = [cfg["graphs"]]
    results = {name: run_graph(name, graph, cfg) for name, graph in graphs.items()}
    columns = ["regret", "regret_slope", "regret_vs_random", "regret_per_round"]
    claimed = claim(results)
    doc = build_document(
        NAME, rows_from(results), config=cfg, results=results, columns=columns, claim=claimed
    )
    write_report(
        doc,
        out_dir,
        columns=columns,
        sections=claim_section(claimed),
        plots=[regret_plot],
        history=history,
    )
    return doc
