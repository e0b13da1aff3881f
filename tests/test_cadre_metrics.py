"""causal.cadre: SHD per node pair (bidirected and reversed edges) and the model's own graph path
(decoder_jacobian -> jacobian_graph, and estimated_graph) on a decoder built as a known SEM."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from neuroedge.models.cadre import functional as F
from neuroedge.models.cadre.data import CausalSeries, random_dag
from neuroedge.models.cadre.module import CaDRe


def _chain(n: int) -> np.ndarray:
    """x0 -> x1 -> ... -> x_{n-1}: B[i, i - 1] = 1."""
    b = np.zeros((n, n))
    b[np.arange(1, n), np.arange(n - 1)] = 1.0
    return b


def test_a_true_edge_estimated_in_both_directions_counts_one() -> None:
    truth = np.zeros((3, 3))
    truth[1, 0] = 1.0  # x0 -> x1
    both = truth.copy()
    both[0, 1] = 0.9  # and x1 -> x0
    sc = F.graph_scores(both, truth)
    assert (sc.shd, sc.n_true, sc.n_pred) == (1, 1, 2)
    assert (sc.tpr, sc.fdr, sc.f1) == (1.0, 0.5, pytest.approx(2 / 3))
    assert sc.skeleton_f1 == 1.0
    assert F.graph_scores(truth, truth).shd == 0


@pytest.mark.parametrize("n", [2, 4, 7])
def test_every_true_edge_bidirected_counts_each_pair_once(n: int) -> None:
    truth = _chain(n)
    sc = F.graph_scores(truth + truth.T, truth)
    assert sc.shd == n - 1  # n - 1 true edges, each also estimated backwards
    assert (sc.tpr, sc.fdr) == (1.0, 0.5)


def test_reversal_missing_and_extra_edges_count_one_each() -> None:
    truth = _chain(4)  # 0 -> 1 -> 2 -> 3
    reversed_ = truth.copy()
    reversed_[1, 0], reversed_[0, 1] = 0.0, 1.0
    assert F.graph_scores(reversed_, truth).shd == 1
    missing = truth.copy()
    missing[2, 1] = 0.0
    assert F.graph_scores(missing, truth).shd == 1
    extra = truth.copy()
    extra[3, 0] = 1.0
    assert F.graph_scores(extra, truth).shd == 1
    assert F.graph_scores(np.zeros((4, 4)), truth).shd == 3
    assert F.graph_scores(np.ones((4, 4)), truth).shd == 6  # every pair wrong, diagonal ignored
    combined = truth.copy()
    combined[1, 0], combined[0, 1] = 0.0, 1.0  # reversed
    combined[2, 1] = 0.0  # missing
    combined[3, 0] = 1.0  # extra
    combined[2, 3] = 1.0  # true edge 2 -> 3 plus its reverse
    assert F.graph_scores(combined, truth).shd == 4
    extra[0, 3] = 1.0  # an extra edge in both directions: one node pair
    assert F.graph_scores(extra, truth).shd == 1


def test_shd_matches_a_pairwise_count_on_random_graphs() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        truth = rng.random((6, 6)) < 0.3
        est = rng.random((6, 6)) < 0.3
        pairs = [(i, j) for i in range(6) for j in range(i + 1, 6)]
        want = sum((est[i, j], est[j, i]) != (truth[i, j], truth[j, i]) for i, j in pairs)
        assert F.graph_scores(est.astype(float), truth.astype(float), 0.5).shd == want


def _sem_decoder(model: CaDRe, b: np.ndarray, rng: np.random.Generator) -> None:
    """Set the decoder so that decode(z, s) = (I - B)^-1 s + f(z), f nonlinear in z alone.

    decode = s + m'([z, s]); m' is Linear-LeakyReLU(a)-Linear-LeakyReLU(a)-Linear. Linear in s
    through the leaky units: leaky(u) - leaky(-u) = (1 + a) u. Hidden units [0, 2dx) carry
    +-M s with M = (I - B)^-1 - I; units [2dx, hidden) read z only."""
    dx, dz = model.dx, model.dz
    lin1, act, lin2, _, lin3 = model.decoder
    a = act.negative_slope
    m = torch.as_tensor(np.linalg.inv(np.eye(dx) - b) - np.eye(dx))
    eye = torch.eye(dx, dtype=torch.float64)
    nz = lin1.out_features - 2 * dx
    with torch.no_grad():
        for layer in (lin1, lin2, lin3):
            layer.weight.zero_()
            layer.bias.zero_()
        lin1.weight[:dx, dz:], lin1.weight[dx : 2 * dx, dz:] = m, -m
        lin1.weight[2 * dx :, :dz] = torch.as_tensor(rng.standard_normal((nz, dz)))
        lin1.bias[2 * dx :] = torch.as_tensor(rng.standard_normal(nz))
        unit = torch.cat([eye, -eye], 1) / (1 + a)  # [h+, h-] -> u
        lin2.weight[:dx, : 2 * dx], lin2.weight[dx : 2 * dx, : 2 * dx] = unit, -unit
        lin2.weight[2 * dx :, 2 * dx :] = torch.as_tensor(rng.standard_normal((nz, nz)))
        lin3.weight[:, : 2 * dx] = unit
        lin3.weight[:, 2 * dx :] = torch.as_tensor(rng.standard_normal((dx, nz)))


def test_model_path_graph_is_b_for_a_linear_sem_decoder() -> None:
    from neuroedge.models.cadre import train as TR

    dx, dz = 8, 2
    rng = np.random.default_rng(7)
    b = random_dag(dx, 0.4, rng)
    assert not np.allclose(b, b.T)  # a transposed Jacobian would show
    torch.manual_seed(0)
    model = CaDRe(dx, dz, 4, hidden=2 * dx + 5).double()
    _sem_decoder(model, b, rng)
    z = torch.as_tensor(rng.standard_normal((5, dz)))
    s = torch.as_tensor(rng.standard_normal((5, dx)))
    want = torch.linalg.solve(torch.eye(dx, dtype=torch.float64) - torch.as_tensor(b), s.T).T
    assert not torch.allclose(model.decode(z, s), want)  # f(z) is there
    j_m = model.decoder_jacobian(z, s)  # [batch, i, j] = dx_i / ds_j
    assert torch.allclose(j_m, torch.as_tensor(np.linalg.inv(np.eye(dx) - b)), atol=1e-10)
    j_g = F.jacobian_graph(j_m)
    assert float((j_g.detach() - torch.as_tensor(b)).abs().max()) < 1e-8
    x = rng.standard_normal((6, 5, dx))
    data = CausalSeries(x, np.zeros((6, 5, dz)), np.zeros(6, dtype=np.int64), b)
    graph = TR.estimated_graph(model, data)
    assert np.abs(graph - b).max() < 1e-8
    assert F.graph_scores(graph, b).shd == 0
