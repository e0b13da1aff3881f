"""uq.last_layer formulas pinned by independent computations: the OOD score, the NTK."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from neuroedge.models.uq_last_layer import functional as F
from neuroedge.models.uq_last_layer import rmt
from neuroedge.models.uq_last_layer.data import make_split
from neuroedge.models.uq_last_layer.glm_comparison import evaluate_subset, fit_posterior


def pairwise_auroc(scores_in: np.ndarray, scores_out: np.ndarray) -> float:
    """P(out > in), ties half, by counting every pair."""
    diff = scores_out[None, :] - scores_in[:, None]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


def tiny_setting(task: str):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((60, 3))
    if task == "regression":
        y, classes = np.sin(x[:, 0]) + 0.3 * x[:, 1] + 0.1 * rng.standard_normal(60), 1
    else:
        y = (x[:, 0] + 0.5 * x[:, 1] ** 2 > 0.5).astype(int) + (x[:, 2] > 0.7)
        classes = 3
    split = make_split(x, y, task, "tiny", 0)
    net = F.make_mlp(3, 5, classes, 0)
    F.train_map(net, split.x_train, split.y_train, task, steps=60, lr=1e-2)
    return split, net


@pytest.mark.parametrize("subset", F.SUBSETS)
def test_classification_ood_auroc_scores_by_predictive_entropy(subset):
    """glm_comparison.evaluate_subset: the classification OOD score is the entropy of the
    predictive probabilities (not their variance, which ood_auroc_var reports)."""
    split, net = tiny_setting("classification")
    post = fit_posterior(net, split, subset)
    metrics, _ = evaluate_subset(net, split, post, subset)
    probs = {
        part: F.predict(post, *F.jacobians(net, x, subset)).mean
        for part, x in (("in", split.x_test), ("out", split.x_ood))
    }
    entropy = {k: -(p * np.log(p)).sum(-1) for k, p in probs.items()}
    expected = pairwise_auroc(entropy["in"], entropy["out"])
    assert metrics["ood_auroc"].value == pytest.approx(expected, abs=1e-12)
    # the setting tells the two scores apart, so a swap to the variance would show
    assert abs(metrics["ood_auroc_var"].value - expected) > 0.01


@pytest.mark.parametrize("subset", F.SUBSETS)
def test_regression_ood_auroc_scores_by_functional_variance(subset):
    """Regression: the score is tr S_f = J H^-1 J^T with H = J^T J / sigma^2 + lambda I."""
    split, net = tiny_setting("regression")
    post = fit_posterior(net, split, subset)
    metrics, _ = evaluate_subset(net, split, post, subset)
    _, jac = F.jacobians(net, split.x_train, subset)
    jac = jac[:, 0]
    hess = jac.T @ jac / post.noise_var + post.prior_prec * np.eye(jac.shape[1])
    var = {}
    for part, x in (("in", split.x_test), ("out", split.x_ood)):
        j = F.jacobians(net, x, subset)[1][:, 0]
        var[part] = np.einsum("np,np->n", j, np.linalg.solve(hess, j.T).T)
    expected = pairwise_auroc(var["in"], var["out"])
    assert metrics["ood_auroc"].value == pytest.approx(expected, abs=1e-12)


def test_rmt_ntk_equals_the_autograd_jacobian_gram():
    """rmt.kernels: CK = J_v J_v^T and NTK = J J^T for f(x) = v^T tanh(W x / sqrt d) / sqrt m,
    J the autograd Jacobian in (W, v) of the network ``kernels`` draws from its seed."""
    n, d, m, seed = 6, 4, 5, 3
    x = np.random.default_rng(0).standard_normal((n, d))
    ck, ntk = rmt.kernels(x, x, m, seed)
    draw = np.random.default_rng(seed + 1)  # the network of ``kernels``: W first, then v
    w = torch.tensor(draw.standard_normal((m, d)), requires_grad=True)
    v = torch.tensor(draw.standard_normal(m), requires_grad=True)
    rows = []
    for xi in torch.tensor(x):
        out = v @ torch.tanh(w @ xi / math.sqrt(d)) / math.sqrt(m)
        grads = torch.autograd.grad(out, [w, v])
        rows.append(torch.cat([g.reshape(-1) for g in grads]).numpy())
    jac = np.array(rows)
    assert np.allclose(jac[:, -m:] @ jac[:, -m:].T, ck, atol=1e-12)
    assert np.allclose(jac @ jac.T, ntk, atol=1e-12)
    # the input-layer term is not negligible here, so a wrong scale on it would show
    assert np.abs(ntk - ck).max() > 0.05
