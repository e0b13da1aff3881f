"""physics.meshft formulas pinned independently: KDK damping, the cotangent Hodge star."""

from __future__ import annotations

import math

import numpy as np
import torch
from neuroedge.models.meshft import functional as F
from neuroedge.models.meshft import mesh as M


def test_undamped_springs_free_momentum_decays_as_exp_minus_r_t():
    """With W = 0 the KDK step only damps: dp/dt = -r p, so p(t) = p(0) exp(-r t) exactly
    (two half-step factors exp(-r dt / 2) per step)."""
    grid = M.periodic_grid(4, 4)
    edges = torch.tensor(grid.edges)
    m = torch.tensor(grid.star0)
    w = torch.zeros(len(grid.edges), dtype=torch.float64)
    r = torch.linspace(0.1, 2.0, 16, dtype=torch.float64)
    q = torch.zeros(16, dtype=torch.float64)
    p0 = torch.linspace(-1.0, 1.0, 16, dtype=torch.float64)
    p, dt, steps = p0, 0.01, 100
    for _ in range(steps):
        q, p = F.kdk_step(q, p, m, w, edges, dt, r)
    t = dt * steps
    assert torch.allclose(p, p0 * torch.exp(-r * t), rtol=1e-12, atol=1e-15)
    assert math.isclose(float(p[-1]), math.exp(-2.0) * float(p0[-1]), rel_tol=1e-12)


def lattice_mesh(nx: int = 5, ny: int = 4, jitter: float = 0.05):
    """A jittered equilateral lattice: every angle near 60 degrees (no obtuse angle)."""
    h = math.sqrt(3) / 2
    rng = np.random.default_rng(0)
    pts = np.array([[i + 0.5 * (j % 2), j * h] for j in range(ny) for i in range(nx)])
    pts = pts + jitter * rng.uniform(-1, 1, pts.shape)

    def node(i: int, j: int) -> int:
        return j * nx + i

    tris = []
    for j in range(ny - 1):
        for i in range(nx - 1):
            if j % 2 == 0:
                tris += [[node(i, j), node(i + 1, j), node(i, j + 1)]]
                tris += [[node(i, j + 1), node(i + 1, j + 1), node(i + 1, j)]]
            else:
                tris += [[node(i, j), node(i + 1, j), node(i + 1, j + 1)]]
                tris += [[node(i, j + 1), node(i + 1, j + 1), node(i, j)]]
    return pts, np.array(tris)


def p1_stiffness(pts: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """sum over triangles of area * grad(phi_i) . grad(phi_j), hat-function gradients from
    the inverse of [1 x y] (no cotangents)."""
    k = np.zeros((len(pts), len(pts)))
    for tri in tris:
        corners = np.c_[np.ones(3), pts[tri]]
        grads = np.linalg.inv(corners)[1:]  # [2, 3]
        k[np.ix_(tri, tri)] += 0.5 * abs(np.linalg.det(corners)) * grads.T @ grads
    return k


def max_angle(pts: np.ndarray, tris: np.ndarray) -> float:
    worst = 0.0
    for tri in tris:
        for k in range(3):
            u, v = pts[tri[(k + 1) % 3]] - pts[tri[k]], pts[tri[(k + 2) % 3]] - pts[tri[k]]
            worst = max(worst, math.acos(u @ v / np.linalg.norm(u) / np.linalg.norm(v)))
    return math.degrees(worst)


def test_cotangent_star_gives_the_p1_fem_stiffness():
    """B^T diag(star1) B equals the P1 finite-element stiffness on a mesh with no obtuse angle
    (where the documented clamp of star1 at 0 never acts)."""
    pts, tris = lattice_mesh()
    assert max_angle(pts, tris) < 80.0
    mesh = M.mesh_from_arrays(pts, tris)
    incidence = np.zeros((mesh.n_edges, mesh.n_nodes))
    rows = np.arange(mesh.n_edges)
    incidence[rows, mesh.edges[:, 1]], incidence[rows, mesh.edges[:, 0]] = 1.0, -1.0
    fem = p1_stiffness(pts, tris)
    assert np.allclose(incidence.T @ np.diag(mesh.star1) @ incidence, fem, atol=1e-12)


def test_cotangent_star_is_the_clamped_fem_coupling_on_a_delaunay_mesh():
    """Any mesh: star1 of edge (i, j) = max(-K_fem[i, j], 0) (the documented clamp)."""
    from scipy.spatial import Delaunay

    pts = np.random.default_rng(1).uniform(0, 1, (30, 2))
    tris = Delaunay(pts).simplices
    mesh = M.mesh_from_arrays(pts, tris)
    fem = p1_stiffness(pts, tris)
    coupling = -fem[mesh.edges[:, 0], mesh.edges[:, 1]]
    assert (coupling < -1e-9).any()  # some boundary edge is clamped here
    assert np.allclose(mesh.star1, np.maximum(coupling, 0.0), atol=1e-12)
