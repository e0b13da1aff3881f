"""uq.last_layer's classification predictives: the Monte Carlo one the GLMs report and the
mean-field one the validation-NLL search scores with."""

from __future__ import annotations

import math

import numpy as np
from neuroedge.models.uq_last_layer import functional as F


def test_mc_predictive_matches_quadrature_and_ignores_common_logit_shifts():
    rng = np.random.default_rng(4)
    f = rng.standard_normal((6, 2)) * 2
    a = rng.standard_normal((6, 2, 2))
    cov = a @ np.swapaxes(a, -1, -2)
    # two classes: p_0 = E[sigmoid(d)], d = f_0 - f_1 ~ N(m, v), by Gauss-Hermite quadrature
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    m, v = f[:, 0] - f[:, 1], cov[:, 0, 0] + cov[:, 1, 1] - 2 * cov[:, 0, 1]
    exact = (
        weights / weights.sum() / (1 + np.exp(-(m[:, None] + np.sqrt(v)[:, None] * nodes)))
    ).sum(-1)
    probs = F.expected_softmax(f, cov, samples=20000)
    assert np.allclose(probs[:, 0], exact, atol=0.01)
    # a common shift of all logits changes no probability: its variance must change nothing
    f3, a3 = rng.standard_normal((5, 3)), rng.standard_normal((5, 3, 3))
    cov3 = a3 @ np.swapaxes(a3, -1, -2)
    shifted = cov3 + 5.0 * np.ones((3, 3))
    assert np.allclose(F.expected_softmax(f3, shifted), F.expected_softmax(f3, cov3), atol=1e-9)

    # (the probit softmax(f / sqrt(1 + pi/8 diag S)) is not invariant: it flattens)
    def probit(s):
        return F.softmax(f3 / np.sqrt(1 + math.pi / 8 * np.diagonal(s, axis1=1, axis2=2)))

    assert np.abs(probit(shifted) - probit(cov3)).max() > 0.01


def test_mean_field_softmax_is_the_binary_probit_shift_free_and_near_monte_carlo():
    rng = np.random.default_rng(4)
    f, a = rng.standard_normal((6, 2)) * 2, rng.standard_normal((6, 2, 2))
    cov = a @ np.swapaxes(a, -1, -2)
    m, v = f[:, 0] - f[:, 1], cov[:, 0, 0] + cov[:, 1, 1] - 2 * cov[:, 0, 1]
    binary = 1 / (1 + np.exp(-m / np.sqrt(1 + math.pi / 8 * v)))
    assert np.allclose(F.mean_field_softmax(f, cov)[:, 0], binary, atol=1e-12)
    assert np.allclose(F.mean_field_softmax(f, 0 * cov), F.softmax(f), atol=1e-12)
    f3, a3 = rng.standard_normal((200, 4)), 0.7 * rng.standard_normal((200, 4, 4))
    cov3 = a3 @ np.swapaxes(a3, -1, -2)
    shifted = cov3 + 5.0 * np.ones((4, 4))
    mf = F.mean_field_softmax(f3 + 3.0, shifted)
    assert np.allclose(mf, F.mean_field_softmax(f3, cov3), atol=1e-12)
    assert np.allclose(mf.sum(-1), 1.0)
    # an approximation, not the integral: near the Monte Carlo predictive (logit-difference
    # variances ~2.3 (median) here; measured mean / max gap 0.027 / 0.113)
    gap = np.abs(mf - F.expected_softmax(f3, cov3, samples=20000))
    assert 1e-4 < gap.mean() < 0.04 and gap.max() < 0.15
