"""stats.self_distill: the deterministic equivalents (Theorem 3.1) term by term, D included.

* Sigma = c I (c != 1, so eigenvalue powers s, s^2, s^k differ): against the closed form, the
  Marchenko-Pastur integrals of the ridge risk terms, to 1e-9;
* Sigma AR(1) (as the bench): the excess terms R - sigma^2, R_pd - sigma^2, C - sigma^2 and D
  against Monte-Carlo averages over fresh designs (the sigma^2 offset would hide their gaps).
"""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.models.self_distill import functional as F
from scipy.integrate import quad


def _mp_mean(f, gamma: float) -> float:
    """E f(s) for s from the Marchenko-Pastur law of ratio gamma (unit variance), with its atom
    of mass 1 - 1/gamma at 0 when gamma > 1."""
    lo, hi = (1 - np.sqrt(gamma)) ** 2, (1 + np.sqrt(gamma)) ** 2

    def density(s: float) -> float:
        return f(s) * np.sqrt((hi - s) * (s - lo)) / (2 * np.pi * gamma * s)

    value = quad(density, lo, hi, epsabs=1e-14, epsrel=1e-13, limit=200)[0]
    return value + max(1 - 1 / gamma, 0.0) * f(0.0)


def _isotropic_closed_form(c: float, gamma: float, lam: float, signal: float, noise: float):
    """Excess R, R_pd, C and D for Sigma = c I, |beta|^2 = signal: with t = c s the sample
    eigenvalues and h = t / (t + lam), the teacher's error is (h - 1) beta + noise and the
    pure-distilled student's (h^2 - 1) beta + h * noise, in the sample eigenbasis."""

    def h(s: float) -> float:
        return c * s / (c * s + lam)

    def term(bias, var) -> float:
        signal_part = c * signal * _mp_mean(lambda s: bias(h(s)), gamma)
        spread = _mp_mean(lambda s: var(h(s)) * c * s / (c * s + lam) ** 2, gamma)
        return signal_part + c * noise * gamma * spread

    return np.array(
        [
            term(lambda u: (1 - u) ** 2, lambda u: 1.0),
            term(lambda u: (1 - u * u) ** 2, lambda u: u * u),
            term(lambda u: (1 - u) * (1 - u * u), lambda u: u),
            term(lambda u: (u - u * u) ** 2, lambda u: (1 - u) ** 2),
        ]
    )


def _excess(t: F.RiskTerms, noise: float) -> np.ndarray:
    return np.array([t.r - noise, t.r_pd - noise, t.c - noise, t.d])


@pytest.mark.parametrize("c", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_equivalents_equal_the_isotropic_closed_form(c: float, gamma: float) -> None:
    p, noise = 50, 0.5
    beta = np.random.default_rng(0).standard_normal(p)
    beta /= np.linalg.norm(beta)
    for lam in (0.1, 1.0, 5.0):
        de = F.deterministic_equivalents(np.full(p, c), beta, gamma, lam, noise)
        want = _isotropic_closed_form(c, gamma, lam, 1.0, noise)
        assert np.allclose(_excess(de, noise), want, rtol=1e-9, atol=0), (c, gamma, lam)


def test_equivalents_match_monte_carlo_excess_terms_on_ar1_covariance() -> None:
    p, n, rho, reps = 200, 400, 0.5, 10
    sigma = rho ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    eigs, vecs = np.linalg.eigh(sigma)
    chol = np.linalg.cholesky(sigma)
    rng = np.random.default_rng(0)
    beta = rng.standard_normal(p) / np.sqrt(p)
    for lam in (0.1, 1.0, 5.0):
        de = _excess(F.deterministic_equivalents(eigs, vecs.T @ beta, p / n, lam, 1.0), 1.0)
        sample = []
        for _ in range(reps):
            x = rng.standard_normal((n, p)) @ chol.T
            svd = F.RidgeSVD.fit(x, x @ beta + rng.standard_normal(n))
            sample.append(_excess(F.risk_terms(svd, lam, beta, sigma), 1.0))
        gap = np.abs(np.mean(sample, 0) - de) / np.abs(de)
        # over 8 draws of beta and designs the correct equivalents stayed within 0.05 (excess
        # terms) and 0.09 (D); a wrong power of s or a wrong weight of Q3 is off by >= 0.2
        # in some term at some lambda
        assert (gap[:3] < 0.08).all() and gap[3] < 0.15, (lam, gap.round(3).tolist())
