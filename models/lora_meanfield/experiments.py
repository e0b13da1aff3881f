"""The three experiments behind theory.lora_meanfield's claims (numpy only, seeded).

1. ``stability``: random symmetric rank-2 tied adapters; the cluster drift never exceeds
   Prop 3.3's bound (2||b|| + ||E||)/(gap + a) where the proposition applies.
2. ``phase_transition``: random per-layer adapters with eta = c sqrt(L); W2 between the base and
   adapted clouds is a function of c alone (collapse across depths L).
3. ``time_to_deviation``: a tied adapter that swaps the top eigenvector; the measured time the
   tokens take to leave the base cluster against ln(1/eps_0)/(lambda~_1 - lambda~_2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from neuroedge.models.lora_meanfield.functional import (
    cluster_direction,
    deviation_trace,
    first_crossing,
    predicted_deviation_time,
    random_adapters,
    run_flow,
    spectral_bound,
    sphere_tokens,
    tied_adapter,
    wasserstein2,
)

BASE_SPECTRUM = (1.0, 0.7, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05)  # gap 0.3, A = V >= 0


def base_value() -> np.ndarray:
    """V = A = diag(1, .7, .5, .4, .3, .2, .1, .05) (Assumption 3.2, spectral gap 0.3)."""
    return np.diag(BASE_SPECTRUM)


@dataclass(frozen=True)
class StabilityResult:
    drifts: tuple[float, ...]  # ||u_1 - u~|| per adapter where the bound applies
    bounds: tuple[float, ...]  # Prop 3.3's bound for the same adapters
    skipped: int  # adapters outside the proposition's condition
    # ||u_1 - top eigenvector of V + dV|| (sign of the flow's cluster): where the adapted flow
    # must land, so a flow that ignored the adapter (drift ~0, far under any bound) shows here
    eigen_drifts: tuple[float, ...] = ()

    @property
    def violations(self) -> int:
        return sum(d > b for d, b in zip(self.drifts, self.bounds))

    @property
    def max_ratio(self) -> float:
        return max((d / b for d, b in zip(self.drifts, self.bounds)), default=float("nan"))


def stability(
    n_adapters: int = 30,
    n_tokens: int = 32,
    horizon: float = 60.0,
    layers: int = 1200,
    seed: int = 0,
) -> StabilityResult:
    """Prop 3.3 on random symmetric rank-2 tied adapters of scale 0.03-0.15."""
    from tqdm import tqdm

    v = base_value()
    x0 = sphere_tokens(n_tokens, len(v), seed)
    u1 = np.eye(len(v))[0]
    rng = np.random.default_rng(seed + 1)
    drifts, bounds, eigen, skipped = [], [], [], 0
    for k in tqdm(range(n_adapters), desc="stability", leave=False):
        dv = tied_adapter(len(v), 2, float(rng.uniform(0.03, 0.15)), seed + 100 + k)
        sb = spectral_bound(v, dv)
        if not sb.applies:
            skipped += 1
            continue
        u_tilde = cluster_direction(run_flow(x0, v, v + dv, horizon, layers))
        drifts.append(float(np.linalg.norm(u1 - u_tilde)))
        bounds.append(sb.bound)
        top = np.linalg.eigh(v + dv)[1][:, -1]
        eigen.append(float(np.linalg.norm(u1 - top * np.sign(top @ u_tilde))))
    return StabilityResult(tuple(drifts), tuple(bounds), skipped, tuple(eigen))


@dataclass(frozen=True)
class PhaseResult:
    cs: tuple[float, ...]
    depths: tuple[int, ...]
    w2: np.ndarray = field(repr=False)  # [len(depths), len(cs)] mean W2 over seeds


def phase_transition(
    cs: Sequence[float] = (0.03, 0.1, 0.3, 1.0, 3.0),
    depths: Sequence[int] = (16, 64, 256),
    seeds: int = 3,
    n_tokens: int = 32,
    horizon: float = 5.0,
    rank: int = 2,
) -> PhaseResult:
    """Mean W2(base, adapted) at time ``horizon`` with eta = c sqrt(L), per (L, c)."""
    from tqdm import tqdm

    v = base_value()
    d = len(v)
    w2 = np.zeros((len(depths), len(cs)))
    cells = [(i, j, s) for i in range(len(depths)) for j in range(len(cs)) for s in range(seeds)]
    bases = {
        (L, s): run_flow(sphere_tokens(n_tokens, d, s), v, v, horizon, L)
        for L in depths
        for s in range(seeds)
    }
    for i, j, s in tqdm(cells, desc="phase diagram", leave=False):
        L = depths[i]
        adapters = random_adapters(d, rank, L, cs[j] * np.sqrt(L), seed=1000 * s + 7 * i + j)
        adapted = run_flow(
            sphere_tokens(n_tokens, d, s), v, [v + dv for dv in adapters], horizon, L
        )
        w2[i, j] += wasserstein2(bases[(L, s)], adapted) / seeds
    return PhaseResult(tuple(cs), tuple(depths), w2)


@dataclass(frozen=True)
class DeviationResult:
    eps0: float  # initial overlap with the adapted top eigenvector
    predicted: float  # ln(1/eps0) / (lambda~_1 - lambda~_2)
    measured: float  # first time the mean overlap exceeds 0.5
    times: np.ndarray = field(repr=False)
    overlap: np.ndarray = field(repr=False)

    @property
    def ratio(self) -> float:
        return self.measured / self.predicted

    def overlap_at(self, t: float) -> float:
        return float(np.interp(t, self.times, self.overlap))


def time_to_deviation(
    strength: float = 0.3,
    settle: float = 80.0,
    h: float = 0.05,
    kick: float = 0.0,
    n_tokens: int = 32,
    seed: int = 0,
) -> DeviationResult:
    """Settle the base flow into u_1 = e_1, then apply dV = strength (e_2 e_2^T - e_1 e_1^T).

    ``kick`` > 0 adds that much e_2 to every settled token (then renormalises), to vary eps_0.
    """
    v = base_value()
    d = len(v)
    x = run_flow(sphere_tokens(n_tokens, d, seed), v, v, settle, round(settle / h))
    e1, e2 = np.eye(d)[0], np.eye(d)[1]
    if kick > 0:
        x = x + kick * e2
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    v_adapted = v + strength * (np.outer(e2, e2) - np.outer(e1, e1))
    predicted = predicted_deviation_time(x, v_adapted)
    times, overlap = deviation_trace(x, v, v_adapted, e2, 2.0 * predicted, h)
    eps0 = float(np.abs(x @ e2).mean())
    return DeviationResult(eps0, predicted, first_crossing(times, overlap, 0.5), times, overlap)
