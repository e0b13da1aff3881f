"""Plane-wave data, one-step training and rollout evaluation for physics.meshft.

Analytic plane waves (c = 1 by default): k = 2 pi (kx/Lx, ky/Ly), kx in +-{1..kmax},
ky in +-{0..kmax}, omega = c |k|, q = A sin(k.x - omega t + phi), p = V0 * dq/dt. Training pairs
are (z(t0), z(t0 + dt)); the loss is the MSE of the one-step prediction scaled per channel by
the data's (std q, std p). The same loss and data train MeshFT and the MeshGraphNet baseline.

Evaluation uses the *theory* energy for every model (a common yardstick), the relative energy
drift max_t |E_t - E_0| / E_0 over a rollout, and the dispersion error |omega_hat - omega|/omega
of single plane waves (``functional.measured_frequency``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from neuroedge.models.meshft import functional as F
from neuroedge.models.meshft.mesh import Mesh
from neuroedge.seeding import seeded


@dataclass(frozen=True)
class WaveBatch:
    """One-step pairs of plane waves: each tensor [n, N]."""

    q0: torch.Tensor
    p0: torch.Tensor
    q1: torch.Tensor
    p1: torch.Tensor
    dt: float


def wavenumbers(kmax: int) -> list[tuple[int, int]]:
    """The integer (kx, ky) of the training set: kx in +-{1..kmax}, ky in +-{0..kmax}."""
    return [(kx, ky) for kx in range(-kmax, kmax + 1) for ky in range(-kmax, kmax + 1) if kx != 0]


def plane_wave(
    mesh: Mesh, kxy: tuple[int, int], amp: float, phase: float, t: float, c: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """q and p = V0 dq/dt of one analytic plane wave at time ``t``."""
    lx, ly = mesh.period or (1.0, 1.0)
    k = 2 * np.pi * np.array([kxy[0] / lx, kxy[1] / ly])
    omega = c * np.linalg.norm(k)
    arg = mesh.points @ k - omega * t + phase
    return amp * np.sin(arg), -mesh.star0 * omega * amp * np.cos(arg)


def plane_wave_pairs(
    mesh: Mesh, n: int, dt: float, seed: int, kmax: int = 4, c: float = 1.0
) -> WaveBatch:
    """``n`` random one-step pairs (float64)."""
    rng = np.random.default_rng(seed)
    ks = wavenumbers(kmax)
    rows = []
    for _ in range(n):
        kxy = ks[rng.integers(len(ks))]
        amp, phase, t0 = rng.uniform(0.5, 1.5), rng.uniform(0, 2 * np.pi), rng.uniform(0, 2 * np.pi)
        rows.append(
            (
                *plane_wave(mesh, kxy, amp, phase, t0, c),
                *plane_wave(mesh, kxy, amp, phase, t0 + dt, c),
            )
        )
    q0, p0, q1, p1 = (torch.as_tensor(np.stack(col)) for col in zip(*rows))
    return WaveBatch(q0, p0, q1, p1, dt)


def one_step_loss(
    model: torch.nn.Module, batch: WaveBatch, idx: torch.Tensor | None = None
) -> torch.Tensor:
    q0, p0, q1, p1 = batch.q0, batch.p0, batch.q1, batch.p1
    if idx is not None:
        q0, p0, q1, p1 = q0[idx], p0[idx], q1[idx], p1[idx]
    dtype = model.tensors.star0.dtype
    q0, p0, q1, p1 = (t.to(dtype) for t in (q0, p0, q1, p1))
    q, p = model(q0, p0, batch.dt)
    sq, sp = batch.q0.std(), batch.p0.std()
    return (((q - q1) / sq) ** 2).mean() + (((p - p1) / sp) ** 2).mean()


def fit(
    model: torch.nn.Module,
    batch: WaveBatch,
    iters: int,
    lr: float,
    batch_size: int = 64,
    seed: int = 0,
    desc: str = "train",
) -> list[float]:
    """AdamW (weight decay 1e-6, grad-clip 1.0) on the one-step loss; returns the loss trace.
    A MeshFT's CFL sub-steps are bounded in every step's forward (``spec.fit_substep_cap``):
    the learned metric may grow until one step would keep GBs of autograd activations.
    TrainingDiverged at the first NaN or infinite loss (naming ``lr``), before the weights
    are saved or rolled out."""
    from neuroedge.divergence import check_loss
    from neuroedge.models.meshft.module import MeshFT, SubstepCapError
    from neuroedge.models.meshft.spec import fit_substep_cap, fit_substep_refusal
    from tqdm import tqdm

    # any draw from ``seed`` (set where it was), the caller's generator left as it was
    with seeded(seed):
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-6)
        gen = torch.Generator().manual_seed(seed)
        losses: list[float] = []
        meshft = isinstance(model, MeshFT)
        if meshft:
            model.substep_cap = fit_substep_cap(model, batch_size)
        try:
            for _ in tqdm(range(iters), desc=desc, leave=False):
                idx = torch.randint(len(batch.q0), (batch_size,), generator=gen)
                loss = one_step_loss(model, batch, idx)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                where = f"physics.meshft training ({desc}) step {len(losses) + 1}"
                losses.append(check_loss(loss, where, (f"lr (now {lr:g})",)))  # read anyway
        except SubstepCapError as err:
            raise fit_substep_refusal(err, model, batch.dt, lr, len(losses), batch_size) from None
        finally:
            if meshft:
                model.substep_cap = None
        return losses


def model_rollout(
    model: torch.nn.Module, q: np.ndarray, p: np.ndarray, dt: float, steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Roll ``model`` out in float64 from (q, p); returns [steps + 1, ...] arrays."""
    model = model.double()
    qt, pt = torch.as_tensor(q, dtype=torch.float64), torch.as_tensor(p, dtype=torch.float64)
    if hasattr(model, "rollout"):
        qs_t, ps_t = model.rollout(qt, pt, dt, steps)
        return qs_t.numpy(), ps_t.numpy()
    qs, ps = [qt], [pt]
    with torch.no_grad():
        for _ in range(steps):
            qt, pt = model(qt, pt, dt)
            qs.append(qt)
            ps.append(pt)
    return torch.stack(qs).numpy(), torch.stack(ps).numpy()


def theory_energy(mesh: Mesh, q: np.ndarray, p: np.ndarray, c: float = 1.0) -> np.ndarray:
    """The common yardstick: H with the theory metrics M = V0, W = c^2 V1inv."""
    m, w = torch.as_tensor(mesh.star0), torch.as_tensor(c * c * mesh.star1)
    return F.energy(
        torch.as_tensor(q), torch.as_tensor(p), m, w, torch.as_tensor(mesh.edges)
    ).numpy()


def superposed_waves(
    mesh: Mesh, n_waves: int, seed: int, kmax: int = 4
) -> tuple[np.ndarray, np.ndarray]:
    """A sum of ``n_waves`` random plane waves at t = 0 (the rollout initial condition)."""
    rng = np.random.default_rng(seed)
    ks = wavenumbers(kmax)
    q, p = np.zeros(mesh.n_nodes), np.zeros(mesh.n_nodes)
    for _ in range(n_waves):
        dq, dp = plane_wave(
            mesh, ks[rng.integers(len(ks))], rng.uniform(0.5, 1.5), rng.uniform(0, 2 * np.pi), 0.0
        )
        q, p = q + dq, p + dp
    return q, p


def dispersion_errors(
    model: torch.nn.Module,
    mesh: Mesh,
    ks: Sequence[tuple[int, int]],
    dt: float,
    steps: int,
    c: float = 1.0,
) -> np.ndarray:
    """|omega_hat - c|k|| / (c|k|) of single plane waves rolled out by ``model``."""
    lx, ly = mesh.period or (1.0, 1.0)
    waves = [plane_wave(mesh, kxy, 1.0, 0.3, 0.0, c) for kxy in ks]
    qs, _ = model_rollout(
        model, np.stack([w[0] for w in waves]), np.stack([w[1] for w in waves]), dt, steps
    )
    errors = []
    for i, kxy in enumerate(ks):
        k = 2 * np.pi * np.array([kxy[0] / lx, kxy[1] / ly])
        omega = c * np.linalg.norm(k)
        measured = F.measured_frequency(qs[:, i], mesh.points, mesh.star0, k, dt)
        errors.append(abs(measured - omega) / omega)
    return np.array(errors)
