"""causal.cadre: the Jacobian graph identity, penalties, metrics, generator, readers and a
short CaDRe-vs-beta-VAE training run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from neuroedge.models.cadre import functional as F
from neuroedge.models.cadre.data import (
    generate,
    random_dag,
    read_csv_series,
    read_netcdf_series,
    windows,
)
from neuroedge.models.cadre.spec import identity_check
from torch.func import jacrev


def test_jacobian_graph_equals_b_on_linear_additive_sems() -> None:
    assert identity_check(trials=20) < 1e-10


def test_jacobian_graph_identity_on_nonlinear_sem() -> None:
    rng = np.random.default_rng(1)
    b = torch.as_tensor(random_dag(6, 0.5, rng))
    order = _topological_order(b.numpy())
    mixing = torch.as_tensor(rng.standard_normal((6, 2)))
    z, s = torch.as_tensor(rng.standard_normal(2)), torch.as_tensor(rng.standard_normal(6))
    j_m = jacrev(lambda ss: F.nonlinear_sem(ss, z, b, mixing, order))(s)
    j_g = F.jacobian_graph(j_m)
    d_m = torch.diag(torch.diagonal(j_m))
    assert torch.allclose(j_g @ j_m, j_m - d_m, atol=1e-12)
    assert torch.equal(j_g.abs() > 1e-12, b != 0)  # support of J_g is the true graph


def _topological_order(b: np.ndarray) -> list[int]:
    order, left = [], set(range(len(b)))
    while left:
        ready = [i for i in sorted(left) if not any(b[i, j] != 0 for j in left)]
        order += ready
        left -= set(ready)
    return order


def test_dag_penalty_zero_iff_acyclic() -> None:
    b = torch.as_tensor(random_dag(8, 0.4, np.random.default_rng(2)))
    assert float(F.dag_penalty(b)) == pytest.approx(0.0, abs=1e-12)
    cyc = torch.zeros(3, 3, dtype=torch.float64)
    cyc[0, 1] = cyc[1, 2] = cyc[2, 0] = 1.0
    assert float(F.dag_penalty(cyc)) > 1e-3


def test_sparsity_transform_vanishes_at_zero() -> None:
    assert torch.equal(F.sparsity_transform(torch.zeros(4, 4)), torch.zeros(4, 4))


def test_mcc_is_one_under_permutation_and_scaling() -> None:
    z = np.random.default_rng(3).standard_normal((500, 3))
    assert F.mcc(-2 * z[:, [2, 0, 1]] + 1, z) == pytest.approx(1.0, abs=1e-12)
    assert F.mcc(np.random.default_rng(4).standard_normal((500, 3)), z) < 0.2


def test_graph_scores_count_reversals_once() -> None:
    truth = np.zeros((3, 3))
    truth[1, 0] = truth[2, 1] = 1.0
    est = np.zeros((3, 3))
    est[0, 1] = est[2, 1] = 0.9  # one reversed, one correct
    sc = F.graph_scores(est, truth)
    assert (sc.shd, sc.tpr, sc.f1, sc.skeleton_f1) == (1, 0.5, 0.5, 1.0)


def test_generator_shapes_and_acyclic_graph() -> None:
    data = generate(n=50, length=5, dx=8, dz=2, domains=4, seed=0)
    assert data.x.shape == (50, 5, 8) and data.z.shape == (50, 5, 2)
    assert set(np.unique(data.domain)) <= set(range(4))
    assert float(F.dag_penalty(torch.as_tensor(data.graph))) == pytest.approx(0.0, abs=1e-12)
    assert np.isfinite(data.x).all()


def test_csv_gaps_and_ragged_rows_name_the_row(tmp_path: object) -> None:
    path = tmp_path / "s.csv"
    path.write_text("time,a,b\n0,1,2\n1,3,\n2,5,6\n")
    with pytest.raises(ValueError, match="row 3, column 'b'"):
        read_csv_series(path, time_column="time")
    path.write_text("time,a,b\n0,1,2\n1,3,4,5\n")
    with pytest.raises(ValueError, match="row 3 has 4 fields"):
        read_csv_series(path)
    path.write_text("time,a,b\n0,1,2\n1,3,4\n3,5,6\n")
    with pytest.raises(ValueError, match="row 4: time step 2"):
        read_csv_series(path, time_column="time")
    path.write_text("time,a,b\n0,1,2\n1,3,4\n2,5,6\n")
    values, names = read_csv_series(path, time_column="time")
    assert names == ["a", "b"] and values.shape == (3, 2)
    x, domain = windows(values, 3, period=2)
    assert x.shape == (1, 3, 2) and domain.tolist() == [0]


def test_netcdf_gap_names_the_time_index(tmp_path: object) -> None:
    import xarray as xr

    sst = np.random.default_rng(0).standard_normal((24, 2, 3))
    sst[5, 1, 2] = np.nan
    ds = xr.Dataset({"sst": (("time", "lat", "lon"), sst)})
    ds.to_netcdf(tmp_path / "sst.nc", engine="h5netcdf")
    with pytest.raises(ValueError, match="'sst' has a gap .* time index 5, element 5"):
        read_netcdf_series(tmp_path / "sst.nc")
    ds["sst"][5, 1, 2] = 0.0
    ds.to_netcdf(tmp_path / "ok.nc", engine="h5netcdf")
    values, labels = read_netcdf_series(tmp_path / "ok.nc")
    assert values.shape == (24, 6) and labels[0] == "sst[0]"


def test_short_training_lowers_the_loss_and_keeps_the_graph_finite() -> None:
    from neuroedge.models.cadre import train as TR
    from neuroedge.models.cadre.module import CaDRe

    data = generate(n=400, length=5, dx=8, dz=2, domains=4, seed=5)
    fit = TR.fit(CaDRe(8, 2, 4, hidden=32), data, {"steps": 60, "batch": 64, "jac_batch": 8})
    assert np.mean(fit.losses[-10:]) < np.mean(fit.losses[:10])
    graph = TR.estimated_graph(fit.model, data, n=32)
    assert graph.shape == (8, 8) and np.isfinite(graph).all()


def test_mcc_matches_each_true_latent_to_one_estimated_dim() -> None:
    """One estimated dim mixing two true latents may match only one of them (Hungarian);
    matching with replacement scored it for both (0.811 against 0.584)."""
    z = np.random.default_rng(3).standard_normal((4000, 3))
    noise = np.random.default_rng(5).standard_normal(4000)
    est = np.column_stack([z[:, 0] + z[:, 1], noise, z[:, 2]])
    assert F.mcc(est, z) == pytest.approx((np.sqrt(0.5) + 0 + 1) / 3, abs=0.03)
