"""Port-Hamiltonian wave physics on a mesh (MeshFT-Net, Noguchi & Kawahara, ICML 2026).

State z = (q, p) on nodes: q a potential, p = M dq/dt its canonical momentum. With the signed
incidence B (discrete d0, fixed by the mesh topology) and diagonal SPD metrics M (nodes) and W
(edges)::

    H(q, p) = 1/2 p^T M^-1 p + 1/2 (B q)^T W (B q),    K = B^T W B,
    dq/dt = M^-1 p,    dp/dt = -K q - r * p         (Rayleigh damping, r >= 0).

Only M and W are learned; the interconnection J = [[0, I], [-I, 0]] with B inside K is fixed.

KDK (Strang) step of size dt: p -= dt/2 K q; p *= exp(-r dt/2); q += dt M^-1 p;
p -= dt/2 K q; p *= exp(-r dt/2). Undamped, it conserves exactly (up to round-off) the modified
energy H_dt = 1/2 p^T M^-1 p + 1/2 q^T K q - dt^2/8 (K q)^T M^-1 (K q), and the total
momentum sum(p) because B 1 = 0 (so 1^T K = 0). Damped, H_dt never rises.

CFL guard: omega_max = sqrt(lambda_max(M^-1 K)) by power iteration on the symmetric
M^-1/2 K M^-1/2; a step dt is split into ceil(omega_max dt / cfl) sub-steps (leapfrog is stable
for omega dt < 2; cfl = 1 keeps a margin and the modified energy positive). A rollout's steps x
sub-steps is bounded by MAX_KDK_STEPS (a huge dt would otherwise turn one step into billions).

B products use index_add (scatter), never a dense E x N matrix.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np


def gradient(q: Any, edges: Any) -> Any:
    """(B q)_e = q_dst - q_src along the last axis of ``q`` [..., N] -> [..., E]."""
    return q[..., edges[:, 1]] - q[..., edges[:, 0]]


def divergence_t(e: Any, edges: Any, n_nodes: int) -> Any:
    """B^T e: scatter-add +e to dst and -e to src; [..., E] -> [..., N]."""
    import torch

    out = torch.zeros((*e.shape[:-1], n_nodes), dtype=e.dtype, device=e.device)
    out.index_add_(-1, edges[:, 1], e)
    out.index_add_(-1, edges[:, 0], -e)
    return out


def stiffness(q: Any, w: Any, edges: Any) -> Any:
    """K q = B^T W B q."""
    return divergence_t(w * gradient(q, edges), edges, q.shape[-1])


def kdk_step(
    q: Any, p: Any, m: Any, w: Any, edges: Any, dt: float, r: Any = None
) -> tuple[Any, Any]:
    """One kick-(damp)-drift-kick-(damp) step; ``r`` is the per-node Rayleigh rate or None."""
    import torch

    decay = None if r is None else torch.exp(-0.5 * dt * r)
    p = p - 0.5 * dt * stiffness(q, w, edges)
    if decay is not None:
        p = p * decay
    q = q + dt * p / m
    p = p - 0.5 * dt * stiffness(q, w, edges)
    if decay is not None:
        p = p * decay
    return q, p


def omega_max(m: Any, w: Any, edges: Any, iters: int = 20, seed: int = 0) -> float:
    """sqrt(lambda_max(M^-1 K)) by power iteration on M^-1/2 K M^-1/2 (no gradient)."""
    import torch

    with torch.no_grad():
        m = m.detach().double()
        w = w.detach().double()
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(m.shape[-1], generator=gen, dtype=torch.float64)
        lam = torch.tensor(0.0, dtype=torch.float64)
        root = m.sqrt()
        for _ in range(iters):
            x = x / x.norm()
            y = stiffness(x / root, w, edges) / root
            lam = (x * y).sum()
            x = y
    # power iteration approaches lambda_max from below: 5% margin
    return math.sqrt(max(float(lam), 0.0)) * 1.05


def substeps(omega: float, dt: float, cfl: float = 1.0) -> int:
    """The CFL guard's number of sub-steps: ceil(omega_max dt / cfl), at least 1."""
    return max(1, math.ceil(omega * dt / cfl))


# KDK sub-steps one rollout may take in all (steps x the CFL guard's sub-steps per step): the
# cost is in the sub-steps, not the steps, and 1e6 of them on the 16 x 16 grid already take
# minutes (spec.MAX_STEPS bounds the steps alone by the same reasoning).
MAX_KDK_STEPS = 10**6


def check_substeps(
    omega: float,
    dt: float,
    steps: int,
    most: int = MAX_KDK_STEPS,
    what: str = "steps",
    cfl: float = 1.0,
) -> int:
    """The sub-steps per step at ``dt`` (``substeps``), after refusing with ConfigError a run
    of ``steps`` steps (config key ``what``) whose steps x sub-steps exceeds ``most`` KDK
    steps; the message names dt, the sub-steps it implies, the bound and the largest dt."""
    from neuroedge.errors import ConfigError

    ratio = omega * dt / cfl
    n_sub = substeps(omega, dt, cfl) if ratio <= most else None  # also refuses inf
    if n_sub is not None and steps * n_sub <= most:
        return n_sub
    implied = f"{n_sub:,}" if n_sub is not None else f"about {ratio:.3g}"
    per_step = most // steps
    fix = f"fewer {what}"
    if per_step and omega > 0:
        fix = f"dt <= {per_step * cfl / omega:.3g} or {fix}"
    raise ConfigError(
        f"dt={dt!r}: the CFL guard (omega_max {omega:.4g}, sub-steps ceil(omega_max dt / "
        f"{cfl:g})) splits each step into {implied} KDK sub-steps, {what}={steps} x {implied} "
        f"in all, above the bound of {most:,} KDK steps; use {fix}"
    )


def step_size(
    m: Any, w: Any, edges: Any, dt: float, steps: int, cfl: float = 1.0
) -> tuple[int, float]:
    """(sub-steps per step, sub-step h) of ``steps`` steps of size dt under the CFL guard,
    after ``check_substeps`` bounds the work."""
    n_sub = check_substeps(omega_max(m, w, edges), dt, steps, cfl=cfl)
    return n_sub, dt / n_sub


def trajectory(
    q: Any, p: Any, m: Any, w: Any, edges: Any, h: float, n_sub: int, steps: int, r: Any = None
) -> Iterator[tuple[Any, Any]]:
    """The state after each of ``steps`` steps of ``n_sub`` KDK sub-steps of size h; nothing
    is kept."""
    for _ in range(steps):
        for _ in range(n_sub):
            q, p = kdk_step(q, p, m, w, edges, h, r)
        yield q, p


def rollout(
    q: Any,
    p: Any,
    m: Any,
    w: Any,
    edges: Any,
    dt: float,
    steps: int,
    r: Any = None,
    cfl: float = 1.0,
) -> tuple[Any, Any]:
    """``steps`` steps of size dt (each CFL-split); returns q, p stacked [steps + 1, ..., N]."""
    import torch

    n_sub, h = step_size(m, w, edges, dt, steps, cfl)
    qs, ps = [q], [p]
    for q_t, p_t in trajectory(q, p, m, w, edges, h, n_sub, steps, r):
        qs.append(q_t)
        ps.append(p_t)
    return torch.stack(qs), torch.stack(ps)


def rollout_conservation(
    q: Any,
    p: Any,
    m: Any,
    w: Any,
    edges: Any,
    dt: float,
    steps: int,
    r: Any = None,
    cfl: float = 1.0,
) -> tuple[Any, Any, Any, Any]:
    """The ``rollout`` of q, p [batch, N] without keeping its trajectory: (final q, final p,
    max |H_h / H_h(0) - 1| and max |sum p - sum p(0)| per sample over the steps), with the
    shadow energy at the sub-step the rollout integrates with. Where H_h(0) = 0 (a rest state:
    p = 0 and q constant on each connected part, which the step keeps at rest) the energy error
    is the absolute max |H_h|, 0 there, not 0/0. Memory stays O(batch x N) whatever ``steps``
    (a stacked 1e6-step trajectory is GBs per sample)."""
    import torch

    n_sub, h = step_size(m, w, edges, dt, steps, cfl)
    e0, mom0 = modified_energy(q, p, m, w, edges, h), p.sum(-1)
    rest = e0 == 0
    e0_or_1 = torch.where(rest, torch.ones_like(e0), e0)
    e_err, mom_err = torch.zeros_like(mom0), torch.zeros_like(mom0)
    q_t, p_t = q, p
    for q_t, p_t in trajectory(q, p, m, w, edges, h, n_sub, steps, r):
        e = modified_energy(q_t, p_t, m, w, edges, h)
        e_err = torch.maximum(e_err, torch.where(rest, e, e / e0_or_1 - 1).abs())
        mom_err = torch.maximum(mom_err, (p_t.sum(-1) - mom0).abs())
    return q_t, p_t, e_err, mom_err


def energy(q: Any, p: Any, m: Any, w: Any, edges: Any) -> Any:
    """H = 1/2 p^T M^-1 p + 1/2 (Bq)^T W (Bq) over the last axis."""
    return 0.5 * (p * p / m).sum(-1) + 0.5 * (w * gradient(q, edges) ** 2).sum(-1)


def modified_energy(q: Any, p: Any, m: Any, w: Any, edges: Any, dt: float) -> Any:
    """The KDK shadow energy H_dt = H - dt^2/8 (K q)^T M^-1 (K q)."""
    kq = stiffness(q, w, edges)
    return energy(q, p, m, w, edges) - dt * dt / 8.0 * (kq * kq / m).sum(-1)


def relative_drift(values: Any) -> float:
    """max_t |E_t - E_0| / |E_0| of an energy trace; max_t |E_t| (absolute) where E_0 = 0."""
    v = np.asarray(values, dtype=np.float64)
    return float(np.max(np.abs(v - v[0])) / (abs(v[0]) or 1.0))


def plane_wave_phase(
    q: np.ndarray, points: np.ndarray, star0: np.ndarray, k: np.ndarray
) -> np.ndarray:
    """Complex projections c_t = sum_i V0_i q_t,i exp(-i k.x_i) of q [T, N]."""
    basis = np.exp(-1j * (points @ k))
    return (q * star0) @ basis


def measured_frequency(
    q: np.ndarray, points: np.ndarray, star0: np.ndarray, k: np.ndarray, dt: float
) -> float:
    """omega_hat = sum_t w_t dphi_t / (dt sum_t w_t), w_t = min(|c_t|, |c_t+1|).

    For q = A sin(k.x - omega t + phi) the projection turns at -omega; the sign is dropped.
    """
    c = plane_wave_phase(q, points, star0, k)
    dphi = np.angle(c[1:] * np.conj(c[:-1]))
    weight = np.minimum(np.abs(c[1:]), np.abs(c[:-1]))
    return float(abs((weight * dphi).sum() / (dt * weight.sum())))
