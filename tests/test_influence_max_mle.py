"""graph.influence_max: the node-level MLE reaches the box-constrained optimum (scipy's L-BFGS-B
as the reference), from any start in the box, including a warm start the old fit stalled at."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.models.influence_max import learner as L
from scipy.optimize import minimize


def reference_mle(start: np.ndarray, x: np.ndarray, trials: np.ndarray, succ: np.ndarray):
    """scipy's L-BFGS-B on the same objective and box, with tight tolerances."""
    return minimize(
        lambda t: -L.node_loglik(t, x, trials, succ),
        start,
        jac=lambda t: -L.node_grad_curv(t, x, trials, succ)[0],
        method="L-BFGS-B",
        bounds=[(L.THETA_MIN, L.THETA_MAX)] * len(start),
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000},
    ).x


def test_gradient_and_curvature_match_finite_differences():
    rng = np.random.default_rng(0)
    x = np.array([[1, 1, 0], [1, 0, 1], [0, 0, 1]], float)
    trials, succ = np.array([30.0, 8.0, 5.0]), np.array([4.0, 3.0, 5.0])
    theta, h = rng.uniform(0.2, 1.5, 3), 1e-6
    grad, curv = L.node_grad_curv(theta, x, trials, succ)
    for i in range(3):
        e = np.eye(3)[i] * h
        up = L.node_loglik(theta + e, x, trials, succ)
        down = L.node_loglik(theta - e, x, trials, succ)
        assert grad[i] == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-6)
        g_up = L.node_grad_curv(theta + e, x, trials, succ)[0]
        g_down = L.node_grad_curv(theta - e, x, trials, succ)[0]
        assert -(g_up - g_down) / (2 * h) == pytest.approx(curv[:, i], rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("start", [[5.0, 1e-4, 1e-4], [0.1, 0.1, 0.1], [0.4551, 1e-4, 4.66]])
def test_few_successes_reach_the_box_mle(start):
    """Pattern {0,1}: 60 tries, 5 activations; {0,2}: 1 try, 1 activation. The old projected
    Newton step (clipped, no free set) stopped at loglik -30.08 from [5, 1e-4, 1e-4] (P(act |
    {0,1}) = 0.366, not 5/60), and a warm start at that point (the third start) never moved."""
    x = np.array([[1, 1, 0], [1, 0, 1]], float)
    trials, succ = np.array([60.0, 1.0]), np.array([5.0, 1.0])
    start = np.asarray(start)
    fit = L.node_mle(start, x, trials, succ)
    ref = reference_mle(start, x, trials, succ)
    assert L.node_loglik(fit, x, trials, succ) == pytest.approx(
        L.node_loglik(ref, x, trials, succ), abs=1e-6
    )
    assert L.node_loglik(ref, x, trials, succ) == pytest.approx(-17.2289, abs=1e-3)
    assert -np.expm1(-(fit[0] + fit[1])) == pytest.approx(5 / 60, abs=1e-3)
    assert fit[1] == L.THETA_MIN and fit[2] == L.THETA_MAX  # failures only / success only


def random_node(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A node with 1-7 in-edges, up to 9 distinct patterns and binomial activations."""
    d, rows = int(rng.integers(1, 8)), int(rng.integers(1, 10))
    x = (rng.random((rows, d)) < 0.4).astype(float)
    x[np.arange(rows), rng.integers(0, d, rows)] = 1.0
    x = np.unique(x, axis=0)
    theta = rng.exponential(0.5, d)
    trials = rng.integers(1, 80, len(x)).astype(float)
    succ = rng.binomial(trials.astype(int), -np.expm1(-x @ theta)).astype(float)
    return x, trials, succ


def test_random_nodes_match_the_scipy_reference_from_any_start():
    """Random small nodes, started at random corners/interior points of the box: the fit is
    never below the start's log-likelihood and within 1e-6 of L-BFGS-B's optimum (the old fit
    stalled up to tens of nats below it)."""
    rng = np.random.default_rng(1)
    for _ in range(150):
        x, trials, succ = random_node(rng)
        start = rng.choice([L.THETA_MIN, L.THETA_MAX, 0.1, 1.0], x.shape[1])
        fit = L.node_mle(start, x, trials, succ)
        best = L.node_loglik(reference_mle(start, x, trials, succ), x, trials, succ)
        ours = L.node_loglik(fit, x, trials, succ)
        assert ours >= L.node_loglik(start, x, trials, succ)
        assert ours >= best - 1e-6
        assert np.all((fit >= L.THETA_MIN) & (fit <= L.THETA_MAX))


def test_mle_is_deterministic_and_a_fixed_point():
    rng = np.random.default_rng(2)
    x, trials, succ = random_node(rng)
    start = np.full(x.shape[1], 0.1)
    fit = L.node_mle(start, x, trials, succ)
    assert np.array_equal(fit, L.node_mle(start, x, trials, succ))
    again = L.node_mle(fit, x, trials, succ)
    assert L.node_loglik(again, x, trials, succ) == pytest.approx(
        L.node_loglik(fit, x, trials, succ), abs=1e-9
    )
