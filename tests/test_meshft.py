"""physics.meshft: exact invariants of the KDK integrator, passivity, metric learning against
the theory metric, and the unstructured baseline's drift."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
import torch
from neuroedge.models.meshft import functional as F
from neuroedge.models.meshft import train as T
from neuroedge.models.meshft.bench import conservation, passivity
from neuroedge.models.meshft.mesh import (
    MeshError,
    mesh_from_arrays,
    periodic_delaunay,
    periodic_grid,
    read_fields,
    read_mesh,
)
from neuroedge.models.meshft.module import MeshFT, MeshGraphNet

DT = 0.002


@pytest.fixture(scope="module")
def grid12() -> object:
    return periodic_grid(12, 12)


def random_metric_model(mesh: object, seed: int) -> MeshFT:
    """A learn-mode model with random (SPD) per-node and per-edge metrics."""
    model = MeshFT(mesh, "learn").double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in (model.hodge.raw_m, model.hodge.raw_w):
            param.add_(torch.randn(param.shape, generator=gen, dtype=torch.float64))
    return model


def test_incidence_annihilates_constants_and_is_adjoint() -> None:
    mesh = periodic_delaunay(64, seed=1)
    edges = torch.as_tensor(mesh.edges)
    assert torch.equal(
        F.gradient(torch.ones(64, dtype=torch.float64), edges),
        torch.zeros(mesh.n_edges, dtype=torch.float64),
    )
    q, e = torch.randn(64, dtype=torch.float64), torch.randn(mesh.n_edges, dtype=torch.float64)
    lhs = (F.gradient(q, edges) * e).sum()
    assert lhs == pytest.approx(float((q * F.divergence_t(e, edges, 64)).sum()), rel=1e-12)


def test_delaunay_hodge_stars_sum_to_domain_area() -> None:
    mesh = periodic_delaunay(128, seed=2)
    assert mesh.star0.sum() == pytest.approx(1.0, rel=1e-4)  # V0 floored at its 0.1% quantile
    assert (mesh.star1 >= 0).all()
    assert len(mesh.triangles) == 2 * 128  # Euler characteristic of the torus


@pytest.mark.parametrize("which", ["grid", "delaunay"])
def test_modified_energy_and_momentum_conserved_1e4_steps(which: str) -> None:
    mesh = periodic_grid(16, 16) if which == "grid" else periodic_delaunay(256, seed=0)
    cons = conservation(random_metric_model(mesh, seed=3), steps=10_000)
    assert cons["modified"] < 1e-10
    assert cons["momentum"] < 1e-10
    assert cons["energy"] < 0.05  # the plain energy only oscillates at O((omega dt)^2)


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.1])
def test_damped_modified_energy_never_rises(rate: float) -> None:
    assert passivity(periodic_delaunay(64, seed=3), rate, steps=3000) == 0


def test_cfl_guard_splits_large_steps(grid12: object) -> None:
    model = MeshFT(grid12, "theory").double()
    m, w = model.hodge()
    omega = F.omega_max(m, w, model.tensors.edges)
    root = np.sqrt(grid12.star0)
    exact = np.sqrt(np.linalg.eigvalsh(_dense_stiffness(grid12) / np.outer(root, root)).max())
    assert exact <= omega <= 1.05 * exact  # conservative: never below the true omega_max
    assert F.substeps(omega, 5.0 / omega) == 5


def _dense_stiffness(mesh: object) -> np.ndarray:
    b = np.zeros((mesh.n_edges, mesh.n_nodes))
    b[np.arange(mesh.n_edges), mesh.edges[:, 1]] = 1
    b[np.arange(mesh.n_edges), mesh.edges[:, 0]] = -1
    return b.T @ (mesh.star1[:, None] * b)


def test_learned_metric_beats_theory_dispersion_and_baseline_drift(grid12: object) -> None:
    data = T.plane_wave_pairs(grid12, 128, DT, seed=0)
    model = MeshFT(grid12, "scalar").float()
    losses = T.fit(model, data, 40, 0.1, batch_size=32)
    assert losses[-1] < 0.5 * losses[0]
    ks = T.wavenumbers(4)[::5]
    learned = T.dispersion_errors(model, grid12, ks, DT, 100).mean()
    theory = T.dispersion_errors(MeshFT(grid12, "theory"), grid12, ks, DT, 100).mean()
    assert learned < theory
    mgn = MeshGraphNet(
        grid12,
        16,
        2,
        (float(data.q0.std()), float(data.p0.std())),
        (float(((data.q1 - data.q0) / DT).std()), float(((data.p1 - data.p0) / DT).std())),
    ).float()
    T.fit(mgn, data, 100, 1e-3, batch_size=8)
    q0, p0 = T.superposed_waves(grid12, 3, seed=1)
    drifts = {}
    for name, net in (("meshft", model), ("mgn", mgn)):
        qs, ps = T.model_rollout(net, q0, p0, DT, 300)
        drifts[name] = F.relative_drift(T.theory_energy(grid12, qs, ps))
    assert drifts["meshft"] * 10 < drifts["mgn"], drifts


def test_plane_wave_frequency_is_measured_exactly(grid12: object) -> None:
    k = 2 * np.pi * np.array([2.0, 1.0])
    times = np.arange(50) * DT
    q = np.stack([np.sin(grid12.points @ k - np.linalg.norm(k) * t) for t in times])
    omega = F.measured_frequency(q, grid12.points, grid12.star0, k, DT)
    assert omega == pytest.approx(np.linalg.norm(k), rel=1e-9)


def test_bad_meshes_name_the_element() -> None:
    pts = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [2, 2]], dtype=float)
    with pytest.raises(MeshError, match="triangle 1 .* degenerate"):
        mesh_from_arrays(pts, [[0, 1, 2], [0, 3, 4]])
    with pytest.raises(MeshError, match=r"edge .* \[0, 1\] is non-manifold"):
        mesh_from_arrays(np.vstack([pts, [[0.5, -1]]]), [[0, 1, 2], [0, 1, 3], [0, 1, 5]])
    nan_pts = pts.copy()
    nan_pts[2, 1] = np.nan
    with pytest.raises(MeshError, match="node 2 has a NaN"):
        mesh_from_arrays(nan_pts, [[0, 1, 2]])


def test_reads_user_mesh_and_fields(tmp_path: object) -> None:
    import meshio
    from scipy.spatial import Delaunay

    xy = np.stack(np.meshgrid(np.linspace(0, 1, 6), np.linspace(0, 1, 6)), -1).reshape(-1, 2)
    path = tmp_path / "square.vtk"
    meshio.write_points_cells(
        path, np.c_[xy, np.zeros(len(xy))], [("triangle", Delaunay(xy).simplices)]
    )
    mesh = read_mesh(path)
    assert mesh.n_nodes == 36 and mesh.period is None
    assert mesh.star0.sum() == pytest.approx(1.0, rel=1e-9)
    fields = np.zeros((3, 36, 2))
    fields[1, 7, 0] = np.nan
    np.savez(tmp_path / "f.npz", fields=fields)
    with pytest.raises(ValueError, match=r"fields\[1, 7, 0\]"):
        read_fields(tmp_path / "f.npz", 36)
    good = np.zeros((3, 36, 2))
    np.savez(tmp_path / "e.npz", fields=good, meta=np.array([{"a": 1}], dtype=object))
    with zipfile.ZipFile(tmp_path / "e.npz", "a") as zf:
        zf.writestr("README.txt", "other members are the user's business")
    assert read_fields(tmp_path / "e.npz", 36).shape == (3, 36, 2)  # only 'fields' is read
    np.savez(tmp_path / "g.npz", other=fields)
    with pytest.raises(ValueError, match=r"g.npz: no 'fields' array \(found \['other'\]\)"):
        read_fields(tmp_path / "g.npz", 36)
    np.savez_compressed(tmp_path / "h.npz", fields=np.zeros((3, 36, 2)))
    raw = bytearray((tmp_path / "h.npz").read_bytes())
    name_len, extra_len = int.from_bytes(raw[26:28], "little"), int.from_bytes(raw[28:30], "little")
    raw[30 + name_len + extra_len] ^= 0xFF  # the deflate stream's first byte (zlib.error)
    (tmp_path / "h.npz").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="h.npz: member 'fields.npy': error: Error -3"):
        read_fields(tmp_path / "h.npz", 36)


def test_bench_models_are_the_same_in_every_run_whatever_the_rng_state() -> None:
    from neuroedge.models.meshft.bench import _train_models

    mesh = periodic_grid(8, 8)
    data = T.plane_wave_pairs(mesh, 16, 0.002, seed=0)
    cfg = {"iters": 3, "mgn_iters": 3}
    first = _train_models(mesh, data, cfg)
    torch.rand(7)  # the caller's generator moved on: the models must not follow it
    again = _train_models(mesh, data, cfg)
    for name, model in first.items():
        pairs = zip(model.state_dict().values(), again[name].state_dict().values(), strict=True)
        assert all(torch.equal(a, b) for a, b in pairs), name


@pytest.mark.parametrize("cfl", [1.0, 0.5])
def test_streamed_conservation_reads_the_shadow_energy_at_the_sub_step(grid12, cfl) -> None:
    model = MeshFT(grid12, "theory").double()
    m, w = model.hodge()
    edges = model.tensors.edges
    dt = 3.0 / F.omega_max(m, w, edges)  # 3 (cfl 1) or 6 (cfl 0.5) CFL sub-steps per step
    gen = torch.Generator().manual_seed(0)
    q, p = (torch.randn(2, grid12.n_nodes, generator=gen, dtype=torch.float64) for _ in "qp")
    n_sub, _ = F.step_size(m, w, edges, dt, 50, cfl)
    assert n_sub == round(3 / cfl)
    *_, e_err, _ = F.rollout_conservation(q, p, m, w, edges, dt, 50, None, cfl)
    assert float(e_err.max()) < 1e-12  # at dt instead of the sub-step it drifts by ~0.8
