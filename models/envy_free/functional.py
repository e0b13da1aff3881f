"""Envy-free allocation of indivisible goods from noisy value queries (two agents).

Li, Ling, Scarlett, Suksompong, "Envy-Free Allocation of Indivisible Goods via Noisy Queries",
ICML 2026 (arXiv 2602.06361). Model (Sec. 2):

* agents a, b; m items; additive utilities u_i^a, u_i^b in [0, 1];
* a query (agent, i) returns y ~ N(u_i^agent, sigma^2);
* Envy(A) = max{u^a(A_b) - u^a(A_a), u^b(A_a) - u^b(A_b)}; A is envy-free (EF) iff Envy <= 0;
* Delta = -min_A Envy(A) > 0, the negative envy of the best allocation.

Algorithm (non-adaptive, polynomial time): query every item tau times per agent, average, then
allocate with a single threshold on the ratio v_b / v_a: item i goes to a iff c * v_i^a > v_i^b.
Sorting items by that ratio, every threshold gives a a prefix of the order, so the best c is the
prefix k* = argmin_k max(E_a(k), E_b(k)) of the estimated envies (prefix sums, O(m log m)):

    E_a(k) = sum v^a - 2 prefix_a(k),   E_b(k) = 2 prefix_b(k) - sum v^b.

Design decisions the paper (as available here) leaves open, with reasons:

* The rule choosing c is not stated in the abstract; minimising the larger estimated envy over
  all m + 1 prefixes is the natural "balance the two envies" choice and costs O(m log m).
* tau counts queries per item per agent (the total is 2 m tau); the budget of Thm 5 is
  tau* = ceil(sigma^2 (15 m^1.5 ln m / Delta^2 + ln^2 m)).
* The mean of tau i.i.d. N(u, sigma^2) queries is exactly N(u, sigma^2 / tau), so sweeps draw the
  mean directly (and allow fractional tau to bisect the 90% point smoothly); `query_means`
  with ``exact=True`` draws the individual queries instead.
* Estimates are clipped to [1e-6, 1] before taking ratios, since utilities are known to lie in
  [0, 1] and a non-positive estimate would flip the ratio order.
* On exact values, items with equal ratios cannot be split by one threshold; ties are broken by a
  seeded random jitter of 1e-9 so brute-force checks use generic values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

BRUTE_FORCE_MAX_ITEMS = 20  # 2^20 allocations is about a second of numpy


@dataclass(frozen=True)
class Allocation:
    """An allocation of m items to agents a (0) and b (1)."""

    to_b: np.ndarray  # bool [m]: True where the item goes to agent b
    envy: float  # Envy(A) under the values it was evaluated with (<= 0 means envy-free)


def check_valuations(
    values: np.ndarray, what: str = "valuations", lines: np.ndarray | None = None
) -> np.ndarray:
    """``values`` as float64 ``[m, 2]`` with entries in [0, 1].

    Errors name the bad value and where it is: ``lines[row]`` (the 1-based line of a file the
    rows were read from) where given, else the 0-based row of the array.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] < 1:
        raise ValueError(
            f"{what}: expected shape [m, 2] (one column per agent), got {list(arr.shape)}"
        )
    if lines is not None and len(lines) != arr.shape[0]:
        raise ValueError(f"{what}: {len(lines)} line numbers for {arr.shape[0]} rows")

    def where(row: int, col: int) -> str:
        agent = f"agent {'ab'[col]}"
        if lines is None:
            return f"row {row} (0-based) {agent}"
        return f"line {int(lines[row])} column {col} (0-based, {agent})"

    bad = ~np.isfinite(arr)
    if bad.any():
        row, col = map(int, np.argwhere(bad)[0])
        raise ValueError(f"{what}: {where(row, col)} value {arr[row, col]} is not finite")
    out = (arr < 0) | (arr > 1)
    if out.any():
        row, col = map(int, np.argwhere(out)[0])
        raise ValueError(f"{what}: {where(row, col)} value {arr[row, col]} is outside [0, 1]")
    return arr


def envy(values: np.ndarray, to_b: np.ndarray) -> np.ndarray:
    """Envy(A) for allocations ``to_b`` (bool ``[..., m]``) under ``values`` ``[..., m, 2]``.

    Envy_a = u^a(A_b) - u^a(A_a), Envy_b = u^b(A_a) - u^b(A_b); returns the larger.
    """
    sign = np.where(to_b, 1.0, -1.0)  # +1 for items of b, -1 for items of a
    envy_a = (sign * values[..., 0]).sum(-1)
    envy_b = (-sign * values[..., 1]).sum(-1)
    return np.maximum(envy_a, envy_b)


def threshold_allocation(estimates: np.ndarray) -> np.ndarray:
    """The threshold rule on ``estimates`` ``[..., m, 2]``: bool ``to_b`` ``[..., m]``.

    Items sorted by v_b / v_a ascending; agent a takes the prefix k* minimising the larger
    estimated envy. Vectorised over leading axes (independent trials).
    """
    v = np.clip(estimates, 1e-6, 1.0)
    order = np.argsort(v[..., 1] / v[..., 0], axis=-1, kind="stable")
    va = np.take_along_axis(v[..., 0], order, -1)
    vb = np.take_along_axis(v[..., 1], order, -1)
    zero = np.zeros((*va.shape[:-1], 1))
    prefix_a = np.concatenate([zero, np.cumsum(va, -1)], -1)
    prefix_b = np.concatenate([zero, np.cumsum(vb, -1)], -1)
    envy_a = prefix_a[..., -1:] - 2 * prefix_a
    envy_b = 2 * prefix_b - prefix_b[..., -1:]
    k = np.argmin(np.maximum(envy_a, envy_b), axis=-1)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(order.shape[-1]) * np.ones_like(order), -1)
    return rank >= k[..., None]


def brute_force_allocation(values: np.ndarray) -> Allocation:
    """The envy-minimising allocation over all 2^m allocations (m <= 20)."""
    vals = check_valuations(values)
    m = vals.shape[0]
    if m > BRUTE_FORCE_MAX_ITEMS:
        raise ValueError(
            f"brute force enumerates 2^m allocations; m={m} exceeds {BRUTE_FORCE_MAX_ITEMS}"
        )
    masks = ((np.arange(2**m)[:, None] >> np.arange(m)) & 1).astype(bool)
    envies = envy(vals, masks)
    best = int(np.argmin(envies))
    return Allocation(masks[best], float(envies[best]))


def query_means(
    values: np.ndarray,
    tau: float,
    sigma: float,
    rng: np.random.Generator,
    trials: int = 1,
    exact: bool = False,
) -> np.ndarray:
    """Sample means of ``tau`` noisy queries per item and agent: ``[trials, m, 2]``.

    ``exact`` draws each of the (integer) tau queries; otherwise the mean is drawn directly from
    its exact law N(u, sigma^2 / tau).
    """
    if not tau > 0 or sigma < 0:
        raise ValueError(f"need tau > 0 and sigma >= 0, got tau={tau}, sigma={sigma}")
    if exact:
        reps = round(tau)
        if reps != tau:
            raise ValueError(f"exact queries need an integer tau, got {tau}")
        draws = rng.normal(values, sigma, size=(trials, reps, *values.shape))
        return draws.mean(axis=1)
    return values + (sigma / math.sqrt(tau)) * rng.standard_normal((trials, *values.shape))


def theorem_budget(m: int, delta: float, sigma: float = 1.0) -> int:
    """Queries per item and agent of Thm 5: ceil(sigma^2 (15 m^1.5 ln m / Delta^2 + ln^2 m))."""
    return math.ceil(sigma**2 * (15 * m**1.5 * math.log(m) / delta**2 + math.log(m) ** 2))


def hard_instance(
    m: int, delta: float, rng: np.random.Generator, gamma: float = 0.25
) -> np.ndarray:
    """The lower-bound family (Sec. 5): m/2 items (1/2 + eps s, 1/2 - eps s), eps = 2 Delta / m,
    and m/2 common items (1/2 + gamma t, 1/2 + gamma t); s, t = +-1. OptEnvy is about -Delta."""
    if m < 2 or m % 2:
        raise ValueError(f"the hard instance needs an even m >= 2, got {m}")
    eps = 2.0 * delta / m
    if not 0 < eps <= 0.5:
        raise ValueError(f"Delta={delta} gives eps=2 Delta/m={eps}, outside (0, 0.5]")
    s = rng.choice([-1.0, 1.0], m // 2)
    t = rng.choice([-1.0, 1.0], m // 2)
    opposite = np.stack([0.5 + eps * s, 0.5 - eps * s], 1)
    common = np.stack([0.5 + gamma * t, 0.5 + gamma * t], 1)
    return np.concatenate([opposite, common])


def hard_instances(m: int, delta: float, rng: np.random.Generator, trials: int) -> np.ndarray:
    """``trials`` independent hard instances, ``[trials, m, 2]``."""
    return np.stack([hard_instance(m, delta, rng) for _ in range(trials)])


def success_rate(
    values: np.ndarray, tau: float, sigma: float, rng: np.random.Generator, trials: int = 200
) -> float:
    """Fraction of trials where the threshold allocation of noisy means is envy-free.

    ``values`` is one instance ``[m, 2]`` or one per trial ``[trials, m, 2]``."""
    if values.ndim == 3:  # one instance per trial
        means = query_means(values, tau, sigma, rng)[0]
    else:
        means = query_means(values, tau, sigma, rng, trials)
    return float((envy(values, threshold_allocation(means)) <= 0).mean())


def tau_for_success(
    values_fn: Callable[[np.random.Generator, int], np.ndarray],
    target: float = 0.9,
    sigma: float = 1.0,
    trials: int = 200,
    seed: int = 0,
    lo: float = 0.01,
    hi: float = 1e5,
    steps: int = 18,
    lo_min: float = 1e-6,
) -> float:
    """Smallest tau reaching ``target`` success, by bisection on log tau.

    ``values_fn(rng, trials)`` draws one instance per trial ``[trials, m, 2]``; common random
    numbers (the same seed at every probe) keep the success curve monotone for bisection.
    The means are N(u, sigma^2 / tau), so success depends on tau / sigma^2 only: the bracket
    ``[lo, hi]`` (and the floor ``lo_min``) are in units of sigma^2, which makes tau_90 scale as
    sigma^2 exactly. Where success already reaches ``target`` at ``lo``, the bracket moves down
    (by 100x, to ``lo_min`` sigma^2 at most: noise of 1000 sigma per mean, far beyond values in
    [0, 1]); a bound is never returned as a measurement: ValueError when success stays at or
    above ``target`` there, as when it stays below at ``hi``.
    """
    if not sigma > 0 or not 0 < lo_min <= lo < hi:
        raise ValueError(
            f"need sigma > 0 and 0 < lo_min <= lo < hi, got sigma={sigma}, lo_min={lo_min}, "
            f"lo={lo}, hi={hi}"
        )

    def rate(tau: float) -> float:
        rng = np.random.default_rng(seed)
        return success_rate(values_fn(rng, trials), tau, sigma, rng, trials)

    scale = sigma**2
    lo, hi, floor = lo * scale, hi * scale, lo_min * scale
    if rate(hi) < target:
        raise ValueError(f"success stays below {target} even at tau={hi:g} (sigma={sigma:g})")
    while rate(lo) >= target:
        if lo <= floor:
            raise ValueError(
                f"success is already >= {target} at tau={lo:g} (sigma={sigma:g}, {trials} trials),"
                f" the lowest probed ({lo_min:g} sigma^2): tau_{round(100 * target)} is not "
                "measurable here (too few trials?)"
            )
        lo, hi = max(lo / 100, floor), lo
    for _ in range(steps):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if rate(mid) >= target else (mid, hi)
    return hi


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])
