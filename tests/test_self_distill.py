"""stats.self_distill: exact identities, one-shot consistency, equivalents, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.models.self_distill import functional as F
from neuroedge.models.self_distill.data import load_regression_csv
from neuroedge.models.self_distill.experiment import isotropic_problem


@pytest.fixture(scope="module")
def small():
    x, y, beta = isotropic_problem(300, 11)
    return x, y, beta, F.RidgeSVD.fit(x, y)


def test_svd_forms_match_explicit_matrix_inverses(small):
    x, y, _, svd = small
    n, p = x.shape
    lam = 0.7
    s_inv = np.linalg.inv(x.T @ x / n + lam * np.eye(p))
    b_t = s_inv @ x.T @ y / n
    b_pd = s_inv @ (x.T @ x / n) @ b_t
    assert np.abs(F.teacher(svd, lam) - b_t).max() < 1e-10
    assert np.abs(F.pure_distilled(svd, lam) - b_pd).max() < 1e-10
    # the student is a first-order step in lambda: b(xi) = b_T + xi lambda d b_T / d lambda
    xi = -1.3
    step = F.teacher(svd, lam) + xi * lam * F.teacher_derivative(svd, lam)
    assert np.abs(F.student(svd, lam, xi) - step).max() < 1e-10


def test_xi_star_equals_minus_lambda_risk_slope_over_2d(small):
    _, _, beta, svd = small
    for lam in (0.05, 0.3, 1.0, 4.0):
        terms, slope = F.risk_terms(svd, lam, beta), F.risk_derivative(svd, lam, beta)
        assert abs(terms.xi_star + lam * slope / (2 * terms.d)) < 1e-10
        assert np.sign(terms.xi_star) == -np.sign(slope)
        assert terms.risk_star < terms.r


def test_risk_derivative_matches_finite_difference(small):
    _, _, beta, svd = small
    lam, h = 0.8, 1e-6
    numeric = (F.risk_terms(svd, lam + h, beta).r - F.risk_terms(svd, lam - h, beta).r) / (2 * h)
    assert F.risk_derivative(svd, lam, beta) == pytest.approx(numeric, rel=1e-6)


def test_closed_form_xi_star_is_the_grid_minimiser(small):
    _, _, beta, svd = small
    terms = F.risk_terms(svd, 2.0, beta)
    grid = np.linspace(-10, 10, 400_001)
    direct = [np.sum((F.student(svd, 2.0, xi) - beta) ** 2) + 1 for xi in (-1.0, 0.5)]
    assert np.allclose(direct, [terms.risk(-1.0), terms.risk(0.5)], atol=1e-10)
    assert abs(grid[np.argmin(terms.risk(grid))] - terms.xi_star) <= 5e-5


def test_xi_star_positive_under_and_negative_over_regularised(small):
    _, _, beta, svd = small  # lambda* = gamma sigma^2 / |beta|^2 = 0.5
    assert F.risk_terms(svd, 0.1, beta).xi_star > 0
    assert F.risk_terms(svd, 2.0, beta).xi_star < 0
    assert F.risk_terms(svd, 5.0, beta).xi_star < 0


def test_one_shot_matches_gcv_residuals_computed_directly(small):
    x, y, _, svd = small
    n, lam = len(y), 1.5
    hat = x @ np.linalg.solve(x.T @ x / n + lam * np.eye(x.shape[1]), x.T) / n
    r = (y - hat @ y) / (1 - np.trace(hat) / n)
    r_pd = (y - hat @ hat @ y) / (1 - np.trace(hat @ hat) / n)
    est = F.one_shot(svd, lam)
    assert est.r == pytest.approx(r @ r / n, rel=1e-10)
    assert est.r_pd == pytest.approx(r_pd @ r_pd / n, rel=1e-10)
    assert est.c == pytest.approx(r @ r_pd / n, rel=1e-10)


def test_one_shot_captures_the_oracle_gain_at_n2000():
    x, y, beta = isotropic_problem(2000, 3)
    svd = F.RidgeSVD.fit(x, y)
    for lam in (0.1, 2.0, 5.0):
        oracle, xi_hat = F.risk_terms(svd, lam, beta), F.one_shot(svd, lam).xi_star
        assert np.sign(xi_hat) == np.sign(oracle.xi_star)
        assert oracle.captured_gain(xi_hat) >= 0.85
        assert abs(xi_hat - oracle.xi_star) / abs(oracle.xi_star) <= 0.35


def test_deterministic_equivalents_match_seed_average_isotropic():
    p, n, lam = 200, 400, 1.0
    rng = np.random.default_rng(5)
    beta = rng.standard_normal(p) / np.sqrt(p)
    de = F.deterministic_equivalents(np.ones(p), beta, p / n, lam, 1.0)
    sample = []
    for _ in range(6):
        x = rng.standard_normal((n, p))
        t = F.risk_terms(F.RidgeSVD.fit(x, x @ beta + rng.standard_normal(n)), lam, beta)
        sample.append([t.r, t.r_pd, t.c])
    assert np.allclose(np.mean(sample, 0), [de.r, de.r_pd, de.c], rtol=0.05)


def test_bad_inputs_are_refused(tmp_path):
    with pytest.raises(ValueError, match="lambda must be > 0"):
        F.teacher(F.RidgeSVD.fit(np.eye(3), np.ones(3)), 0.0)
    with pytest.raises(ValueError, match="need X"):
        F.RidgeSVD.fit(np.zeros((4, 2)), np.zeros(5))
    path = tmp_path / "data.csv"
    path.write_text("x1,x2,y\n1,2,3\n4,,6\n")
    with pytest.raises(ValueError, match=r"line 3 column 1 \(0-based\): '' is not a number"):
        load_regression_csv(path)
    path.write_text("1,2,3\n4,5\n")
    with pytest.raises(ValueError, match="line 2 has 2 fields, expected 3"):
        load_regression_csv(path)
    path.write_text("1,2,3\n4,5,inf\n")
    with pytest.raises(ValueError, match="line 2 column 2.*not finite"):
        load_regression_csv(path)
