"""Independent cascade (IC): the graph record, the cascade simulator and a standard oracle.

Agarwal, Deolankar, Ghuge, "Efficient Online Influence Maximization under Independent Cascade
with Node-Level Feedback", ICML 2026. IC model: seeds S are active at step 0; a node that became
active at step s - 1 gets one chance at step s to activate each inactive out-neighbour v, with
probability p_uv, independently. The spread sigma(S; p) is the expected number of active nodes.

Live-edge view used by the oracle: flip every edge once (live iff U_e < p_e); then sigma(S) is
the expected size of the set reachable from S. With R presampled uniform matrices U (common random
numbers), reachability of every node is the transitive closure of each live graph, computed by
ceil(log2 n) boolean squarings; sigma(S) = mean over worlds of |union of reach(s), s in S|.

Standard offline oracle: exact argmax over all C(n, K) seed sets when that is small
(``EXACT_LIMIT``), else greedy, which is (1 - 1/e)-optimal for the monotone submodular sigma.
Design decisions left open, with reasons: R = 200 worlds inside the online loop (the notes' CI
budget), 2000 for the regret reference; ties in the oracle go to the lowest index.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

EXACT_LIMIT = 1000  # enumerate every seed set when C(n, K) is at most this
# Memory of the dense live-edge reachability (``Worlds.reach``): per (world, u, v) entry the
# closure holds three float32 [R, n, n] arrays at once (the adjacency, its square and the
# clamped square, 12 bytes) and returns a bool one (1 byte); the greedy oracle adds a bool
# [R, n, n] temporary (1 byte): 14 bytes per entry while a reach is built and searched, and a
# reach that is kept (the regret reference's) holds 1 byte per entry. A run whose estimated
# peak exceeds MAX_REACH_BYTES (4 GiB, a share of a laptop's or CI runner's memory) is refused
# before any work, naming n, the world counts and the estimate.
REACH_BYTES_PER_ENTRY = 14
MAX_REACH_BYTES = 4 * 2**30


def reach_peak_bytes(n: int, worlds: int, held_worlds: int = 0) -> int:
    """Estimated peak bytes of building and searching a reach over ``worlds`` worlds on ``n``
    nodes while a reach over ``held_worlds`` worlds is held (the bench's regret reference)."""
    return n * n * (REACH_BYTES_PER_ENTRY * worlds + held_worlds)


def check_reach_memory(n: int, counts: dict[str, int], peak: int, where: str) -> None:
    """Refuse (ConfigError) a ``peak`` estimate above MAX_REACH_BYTES, naming ``where`` (the
    graph), n, the world-count config keys ``counts`` and what each may be at this n."""
    from neuroedge.errors import ConfigError

    if peak <= MAX_REACH_BYTES:
        return
    fits = MAX_REACH_BYTES // (n * n * (REACH_BYTES_PER_ENTRY + 1))
    given = " and ".join(f"{key}={value}" for key, value in counts.items())
    raise ConfigError(
        f"{where}: n={n} nodes with {given}: the dense live-edge reachability (worlds x n x n "
        f"entries, {REACH_BYTES_PER_ENTRY} bytes each while built) needs about "
        f"{peak / 2**30:.1f} GiB, above the {MAX_REACH_BYTES / 2**30:.0f} GiB cap "
        f"(MAX_REACH_BYTES); lower {' and '.join(counts)} (at n={n} at most about {fits} "
        "worlds fit) or use a smaller graph"
    )


@dataclass(frozen=True)
class ICGraph:
    """A directed graph with one activation probability per edge."""

    n: int  # nodes, ids 0..n-1
    src: np.ndarray  # int64 [E]
    dst: np.ndarray  # int64 [E]
    prob: np.ndarray  # float64 [E], p_uv in [0, 1]

    def __post_init__(self) -> None:
        e = len(self.src)
        if len(self.dst) != e or len(self.prob) != e:
            raise ValueError(
                f"src, dst and prob need one entry per edge; got {len(self.src)}, "
                f"{len(self.dst)}, {len(self.prob)}"
            )
        for name, ids in (("src", self.src), ("dst", self.dst)):
            bad = (ids < 0) | (ids >= self.n)
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(f"edge {i}: {name} id {int(ids[i])} is outside 0..{self.n - 1}")
        bad = ~np.isfinite(self.prob) | (self.prob < 0) | (self.prob > 1)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(
                f"edge {i} ({int(self.src[i])}->{int(self.dst[i])}): probability "
                f"{self.prob[i]} is not in [0, 1]"
            )

    def with_prob(self, prob: np.ndarray) -> ICGraph:
        return ICGraph(self.n, self.src, self.dst, np.asarray(prob, np.float64))


def weighted_cascade(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The weighted-cascade convention p_uv = 1 / indeg(v)."""
    indeg = np.bincount(dst, minlength=n)
    return 1.0 / indeg[dst]


def from_networkx(graph: object) -> ICGraph:
    """An IC graph from a networkx graph (undirected edges in both directions), nodes relabelled
    0..n-1 in sorted order; weighted-cascade probabilities."""
    nodes = sorted(graph.nodes())  # type: ignore[attr-defined]
    index = {v: i for i, v in enumerate(nodes)}
    pairs = [(index[u], index[v]) for u, v in graph.edges() if u != v]  # type: ignore[attr-defined]
    if not graph.is_directed():  # type: ignore[attr-defined]
        pairs += [(v, u) for u, v in pairs]
    src, dst = (np.asarray(a, np.int64) for a in zip(*sorted(set(pairs))))
    return ICGraph(len(nodes), src, dst, weighted_cascade(len(nodes), src, dst))


def random_graph(
    n: int, seed: int, max_in: int = 3, p_range: tuple[float, float] = (0.05, 0.5)
) -> ICGraph:
    """Each node gets 1..max_in random in-neighbours; p ~ U(p_range)."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for v in range(n):
        others = np.delete(np.arange(n), v)
        for u in rng.choice(others, rng.integers(1, max_in + 1), replace=False):
            src.append(u)
            dst.append(v)
    return ICGraph(n, np.asarray(src), np.asarray(dst), rng.uniform(*p_range, len(src)))


def simulate_cascade(graph: ICGraph, seeds: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Activation step of every node (-1: never active) for one IC cascade from ``seeds``."""
    when = np.full(graph.n, -1, np.int64)
    when[seeds] = 0
    frontier = np.zeros(graph.n, bool)
    frontier[seeds] = True
    step = 0
    while frontier.any():
        step += 1
        tried = frontier[graph.src] & (when[graph.dst] < 0)
        fired = tried & (rng.random(len(graph.src)) < graph.prob)
        frontier = np.zeros(graph.n, bool)
        frontier[graph.dst[fired]] = True
        when[frontier] = step
    return when


@dataclass(frozen=True)
class Worlds:
    """R presampled uniforms per edge: common random numbers for every spread estimate."""

    uniforms: np.ndarray  # float64 [R, E]

    @classmethod
    def draw(cls, graph: ICGraph, count: int, seed: int) -> Worlds:
        return cls(np.random.default_rng(seed).random((count, len(graph.src))))

    def reach(self, graph: ICGraph, prob: np.ndarray | None = None) -> np.ndarray:
        """bool [R, n, n]: reach[r, u, v] iff v is reachable from u in live graph r."""
        p = graph.prob if prob is None else prob
        live = self.uniforms < p
        r = len(self.uniforms)
        adj = np.zeros((r, graph.n, graph.n), np.float32)
        world, edge = np.nonzero(live)
        adj[world, graph.src[edge], graph.dst[edge]] = 1.0
        adj[:, np.arange(graph.n), np.arange(graph.n)] = 1.0
        for _ in range(max(1, math.ceil(math.log2(max(graph.n, 2))))):
            adj = np.minimum(adj @ adj, 1.0)
        return adj > 0


def spread(reach: np.ndarray, seeds: np.ndarray | list[int] | tuple[int, ...]) -> float:
    """Mean over worlds of the number of nodes reachable from ``seeds``."""
    return float(reach[:, list(seeds), :].any(axis=1).sum(-1).mean())


def best_seed_set(reach: np.ndarray, k: int) -> tuple[int, ...]:
    """The standard oracle: exact argmax over C(n, k) sets when small, else greedy."""
    n = reach.shape[1]
    if not 1 <= k <= n:
        raise ValueError(f"seed budget K={k} must be in 1..{n}")
    if math.comb(n, k) <= EXACT_LIMIT:
        sets = np.asarray(list(itertools.combinations(range(n), k)), np.int64)
        values = np.concatenate(
            [
                reach[:, chunk, :].any(axis=2).sum(-1).mean(0)
                for chunk in np.array_split(sets, max(1, len(sets) // 128))
            ]
        )
        return tuple(int(i) for i in sets[int(np.argmax(values))])
    chosen: list[int] = []
    covered = np.zeros((reach.shape[0], n), bool)
    for _ in range(k):
        gains = (covered[:, None, :] | reach).sum(-1).mean(0)
        gains[chosen] = -1
        best = int(np.argmax(gains))
        chosen.append(best)
        covered |= reach[:, best, :]
    return tuple(sorted(chosen))
