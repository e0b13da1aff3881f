"""The random-matrix setting: conjugate kernel (last layer) vs NTK (full) GP free energy.

At random initialisation the last-layer GLM is GP regression with the conjugate kernel (CK) and
the full GLM is GP regression with the neural tangent kernel (NTK). For a two-layer network in
the NTK parametrisation, f(x) = v^T tanh(W x / sqrt(d)) / sqrt(m) with v, W ~ N(0, 1):

    CK(x, x')  = tanh(Wx/sqrt d)^T tanh(Wx'/sqrt d) / m
    NTK(x, x') = CK(x, x') + (v o tanh'(Wx/sqrt d))^T (v o tanh'(Wx'/sqrt d)) x^T x' / (m d)

(the second term is the input-layer Jacobian product; closed form, no n x P Jacobian).
For each kernel K the Bayesian free energy (BFE) is

    -log p(y) = 1/2 y^T (aK + s^2 I)^-1 y + 1/2 log det(aK + s^2 I) + n/2 log 2 pi,

minimised over a (scale a, noise s^2) grid; with K = Q diag(k) Q^T every grid point is O(n).
Data (paper's double-asymptotic regime, n = 2d = m): x ~ N(0, I_d) rescaled to norm sqrt(d),
w ~ N(0, I/d), y = tanh(w^T x) + 0.5 (w^T x)^2 + 0.1 eps.

Design decisions left open, with reasons: the grids a in logspace(-3, 3, 61) and s^2 in
logspace(-3, 1, 41) bracket the optimum for this target scale; the test NLL uses the GP
predictive at the BFE-optimal (a, s^2), the same choice for both kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SCALE_GRID = np.logspace(-3, 3, 61)
NOISE_GRID = np.logspace(-3, 1, 41)


@dataclass(frozen=True)
class KernelFit:
    """GP evidence fit of one kernel."""

    bfe_per_n: float  # min over the grid of -log p(y) / n
    scale: float  # a
    noise: float  # s^2
    test_nll: float  # mean Gaussian NLL of the GP predictive on the test points


def regression_task(n: int, d: int, seed: int) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_test, y_test), n points each."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d) / np.sqrt(d)
    x = rng.standard_normal((2 * n, d))
    x *= np.sqrt(d) / np.linalg.norm(x, axis=1, keepdims=True)
    z = x @ w
    y = np.tanh(z) + 0.5 * z**2 + 0.1 * rng.standard_normal(2 * n)
    return x[:n], y[:n], x[n:], y[n:]


def kernels(x1: np.ndarray, x2: np.ndarray, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(CK, NTK) between x1 and x2 for the random network of width m drawn from ``seed``."""
    rng = np.random.default_rng(seed + 1)
    d = x1.shape[1]
    w = rng.standard_normal((m, d))
    v = rng.standard_normal(m)
    h1, h2 = x1 @ w.T / np.sqrt(d), x2 @ w.T / np.sqrt(d)
    ck = np.tanh(h1) @ np.tanh(h2).T / m
    g1, g2 = v * (1 - np.tanh(h1) ** 2), v * (1 - np.tanh(h2) ** 2)
    return ck, ck + (g1 @ g2.T) * (x1 @ x2.T) / (m * d)


def fit_kernel(
    k_train: np.ndarray,
    k_cross: np.ndarray,
    k_test_diag: np.ndarray,
    y: np.ndarray,
    y_test: np.ndarray,
) -> KernelFit:
    """BFE on the (a, s^2) grid from one eigendecomposition, then the GP predictive NLL."""
    n = len(y)
    lam, q = np.linalg.eigh(k_train)
    lam = np.clip(lam, 0, None)
    qy2 = (q.T @ y) ** 2
    spec = SCALE_GRID[:, None, None] * lam + NOISE_GRID[None, :, None]
    bfe = 0.5 * (qy2 / spec).sum(-1) + 0.5 * np.log(spec).sum(-1) + 0.5 * n * math.log(2 * math.pi)
    i, j = np.unravel_index(int(np.argmin(bfe)), bfe.shape)
    a, s2 = float(SCALE_GRID[i]), float(NOISE_GRID[j])
    inv_diag = 1.0 / (a * lam + s2)
    proj = q.T @ (a * k_cross.T)  # [n, n_test] in the eigenbasis
    mean = proj.T @ (inv_diag * (q.T @ y))
    var = a * k_test_diag - np.einsum("it,i,it->t", proj, inv_diag, proj) + s2
    var = np.clip(var, 1e-12, None)
    nll = float(np.mean(0.5 * np.log(2 * math.pi * var) + (y_test - mean) ** 2 / (2 * var)))
    return KernelFit(float(bfe[i, j] / n), a, s2, nll)


def compare(n: int, d: int, m: int, seed: int = 0) -> dict[str, KernelFit]:
    """CK and NTK fits on one draw of data and network."""
    x, y, xt, yt = regression_task(n, d, seed)
    ck, ntk = kernels(x, x, m, seed)
    ck_x, ntk_x = kernels(xt, x, m, seed)
    ck_t, ntk_t = kernels(xt, xt, m, seed)
    return {
        "ck": fit_kernel(ck, ck_x, np.diag(ck_t), y, yt),
        "ntk": fit_kernel(ntk, ntk_x, np.diag(ntk_t), y, yt),
    }


def relative_gap(fits: dict[str, KernelFit]) -> float:
    """|BFE_CK - BFE_NTK| / |BFE_NTK|."""
    return abs(fits["ck"].bfe_per_n - fits["ntk"].bfe_per_n) / abs(fits["ntk"].bfe_per_n)
