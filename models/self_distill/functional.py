"""Optimal unconstrained self-distillation (SD) in ridge regression: closed forms.

Dang, Patil, Rinaldo, "Optimal Unconstrained Self-Distillation in Ridge Regression", ICML 2026
(arXiv 2602.17565). With Sigma_hat = X^T X / n and S = (Sigma_hat + lambda I)^-1:

* teacher          b_T  = S X^T y / n
* pure-distilled   b_PD = S Sigma_hat b_T            (ridge refit on the teacher's fitted values)
* mixed student    b(xi) = (1 - xi) b_T + xi b_PD = b_T + xi lambda d b_T / d lambda

For any test covariance Sigma and signal beta (risk R = ||b - beta||^2_Sigma + sigma^2):

    R(xi) = R - 2 xi (R - C) + xi^2 D,   C = <b_T - beta, b_PD - beta>_Sigma + sigma^2,
    D = ||b_T - b_PD||^2_Sigma,          xi* = (R - C) / D = -lambda R'(lambda) / (2 D),
    R_sd* = R - (R - C)^2 / D.

One-shot estimator (Eqs 17-19), from training data only: with df = tr(S Sigma_hat) and
df_pd = tr((S Sigma_hat)^2), GCV-corrected residuals r = (y - X b_T) / (1 - df/n) and
r_pd = (y - X b_PD) / (1 - df_pd/n) give R_hat = |r|^2/n, R_pd_hat, C_hat = <r, r_pd>/n and
xi_hat = (R_hat - C_hat) / (R_hat + R_pd_hat - 2 C_hat).

Everything runs from one thin SVD X / sqrt(n) = U diag(s) V^T, so each lambda costs O(min(n, p)).

Design decisions left open, with reasons:

* float64 throughout: the identities are checked to 1e-10.
* sigma^2 cancels in xi* and xi_hat; it is kept in the risk so R is a prediction risk.
* The deterministic equivalents (Theorem 3.1) follow the authors' published transcription, with
  kappa found by bisection (monotone in kappa, so always converges).
* D = 0 (b_PD = b_T, e.g. y = 0 or X = 0; the estimate's D_hat = 0 likewise) makes R(xi) flat:
  every student is the teacher, so xi* (and xi_hat) is defined as 0 and R_sd* = R rather than
  dividing 0 by 0. Data without rows or columns, and NaN/inf, are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from neuroedge.shapes import check_finite


@dataclass(frozen=True)
class RidgeSVD:
    """The thin SVD of X / sqrt(n) and the projected response, reused for every lambda."""

    n: int  # samples
    p: int  # features
    s: np.ndarray  # singular values of X / sqrt(n), [r]
    vt: np.ndarray  # right singular vectors, [r, p]
    uy: np.ndarray  # U^T y / sqrt(n), [r]
    remainder: float  # |y / sqrt(n)|^2 - |uy|^2: response energy outside the column space

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray) -> RidgeSVD:
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.ndim != 2 or y.shape != (x.shape[0],):
            raise ValueError(f"need X [n, p] and y [n]; got X {list(x.shape)}, y {list(y.shape)}")
        if x.shape[0] < 1 or x.shape[1] < 1:
            raise ValueError(
                f"need at least one sample and one feature; got X {list(x.shape)} "
                "(the ridge fit and its risk estimates are undefined without data)"
            )
        check_finite(x, "X")
        check_finite(y, "y")
        n = x.shape[0]
        u, s, vt = np.linalg.svd(x / np.sqrt(n), full_matrices=False)
        uy = u.T @ y / np.sqrt(n)
        with np.errstate(over="ignore"):
            squares = np.concatenate([s**2, uy**2, [y @ y / n]])
        if not np.all(np.isfinite(squares)):
            raise ValueError(
                f"X or y too large for float64: the largest singular value of X / sqrt(n) is "
                f"{float(s.max()):.3g} and max |y| {float(np.abs(y).max()):.3g}, whose squares "
                "(the ridge's s^2 + lambda) overflow; rescale X and y (e.g. standardise)"
            )
        return cls(n, x.shape[1], s, vt, uy, float(max(y @ y / n - uy @ uy, 0.0)))


@dataclass(frozen=True)
class RiskTerms:
    """Conditional risk terms of teacher and pure-distilled student at one lambda."""

    r: float  # teacher risk R
    r_pd: float  # pure-distilled risk
    c: float  # cross term C
    d: float  # D = R + R_pd - 2C = |b_T - b_PD|^2_Sigma

    @property
    def xi_star(self) -> float:
        """(R - C) / D; 0 (keep the teacher) where D = 0, see ``_check_d``."""
        return (self.r - self.c) / self.d if self._check_d() else 0.0

    @property
    def risk_star(self) -> float:
        """R - (R - C)^2 / D; R where D = 0."""
        return self.r - (self.r - self.c) ** 2 / self.d if self._check_d() else self.r

    def _check_d(self) -> bool:
        """True where D > 0. D = |b_T - b_PD|^2_Sigma = 0 means the pure-distilled student
        equals the teacher (e.g. y = 0, or X = 0): then |R - C| <= sqrt((R - s^2) D) = 0 by
        Cauchy-Schwarz, R(xi) = R for every xi, and xi* is defined as 0 (the teacher). A
        negative D (only from equivalents outside their domain) is refused: no minimiser."""
        if self.d < 0:
            raise ValueError(
                f"D = {self.d} < 0: R(xi) = R - 2 xi (R - C) + xi^2 D has no minimiser"
            )
        return self.d > 0

    def risk(self, xi: float | np.ndarray) -> float | np.ndarray:
        """R(xi) = R - 2 xi (R - C) + xi^2 D."""
        return self.r - 2 * xi * (self.r - self.c) + xi**2 * self.d

    def captured_gain(self, xi: float) -> float:
        """(R - R(xi)) / (R - R_sd*): the fraction of the oracle improvement xi achieves;
        1 where there is none to achieve (D = 0: every xi is optimal)."""
        if not self._check_d():
            return 1.0
        return float((self.r - self.risk(xi)) / (self.r - self.risk_star))


def _check_lambda(lam: float) -> float:
    if not 0 < lam < np.inf:
        raise ValueError(f"ridge lambda must be > 0 and finite, got {lam}")
    return float(lam)


def teacher(svd: RidgeSVD, lam: float) -> np.ndarray:
    """b_T = V diag(s / (s^2 + lambda)) U^T y / sqrt(n)."""
    lam = _check_lambda(lam)
    return svd.vt.T @ (svd.s / (svd.s**2 + lam) * svd.uy)


def pure_distilled(svd: RidgeSVD, lam: float) -> np.ndarray:
    """b_PD = S Sigma_hat b_T = V diag(h s / (s^2 + lambda)) U^T y / sqrt(n), h = s^2/(s^2+l)."""
    lam = _check_lambda(lam)
    h = svd.s**2 / (svd.s**2 + lam)
    return svd.vt.T @ (h * svd.s / (svd.s**2 + lam) * svd.uy)


def student(svd: RidgeSVD, lam: float, xi: float) -> np.ndarray:
    """b(xi) = (1 - xi) b_T + xi b_PD."""
    return (1 - xi) * teacher(svd, lam) + xi * pure_distilled(svd, lam)


def teacher_derivative(svd: RidgeSVD, lam: float) -> np.ndarray:
    """d b_T / d lambda = -S b_T = -V diag(s / (s^2 + lambda)^2) uy."""
    return -svd.vt.T @ (svd.s / (svd.s**2 + lam) ** 2 * svd.uy)


def _sigma_dot(a: np.ndarray, b: np.ndarray, sigma: np.ndarray | None) -> float:
    return float(a @ b) if sigma is None else float(a @ sigma @ b)


def risk_terms(
    svd: RidgeSVD,
    lam: float,
    beta: np.ndarray,
    sigma: np.ndarray | None = None,
    noise_var: float = 1.0,
) -> RiskTerms:
    """R, R_pd, C, D for test covariance ``sigma`` (None = identity) and signal ``beta``."""
    et, ep = teacher(svd, lam) - beta, pure_distilled(svd, lam) - beta
    r = _sigma_dot(et, et, sigma) + noise_var
    r_pd = _sigma_dot(ep, ep, sigma) + noise_var
    c = _sigma_dot(et, ep, sigma) + noise_var
    diff = et - ep
    return RiskTerms(r, r_pd, c, _sigma_dot(diff, diff, sigma))


def risk_derivative(
    svd: RidgeSVD, lam: float, beta: np.ndarray, sigma: np.ndarray | None = None
) -> float:
    """R'(lambda) = 2 <b_T - beta, d b_T / d lambda>_Sigma."""
    return 2 * _sigma_dot(teacher(svd, lam) - beta, teacher_derivative(svd, lam), sigma)


def one_shot(svd: RidgeSVD, lam: float) -> RiskTerms:
    """Estimated risk terms (Eqs 17-19) from the training data only; ``.xi_star`` is xi_hat."""
    lam = _check_lambda(lam)
    h = svd.s**2 / (svd.s**2 + lam)
    df, df_pd = h.sum() / svd.n, (h**2).sum() / svd.n
    if df >= 1 or df_pd >= 1:
        raise ValueError(
            f"lambda={lam} interpolates the data (df/n={df:.3f}); the GCV "
            "correction 1/(1 - df/n) is undefined"
        )
    res_t, res_pd = (1 - h) * svd.uy, (1 - h**2) * svd.uy
    r = (svd.remainder + res_t @ res_t) / (1 - df) ** 2
    r_pd = (svd.remainder + res_pd @ res_pd) / (1 - df_pd) ** 2
    c = (svd.remainder + res_t @ res_pd) / ((1 - df) * (1 - df_pd))
    # D = R + R_pd - 2C = |r - r_pd|^2 / n as a sum of squares: >= 0, and exactly 0 when
    # the distilled residuals equal the teacher's (y = 0 or X = 0), not a rounding remainder
    a, b = 1 / (1 - df), 1 / (1 - df_pd)
    diff = a * res_t - b * res_pd
    d = svd.remainder * (a - b) ** 2 + diff @ diff
    return RiskTerms(float(r), float(r_pd), float(c), float(d))


def solve_kappa(eigs: np.ndarray, gamma: float, lam: float) -> float:
    """kappa > 0 solving kappa (1 - gamma mean(s / (s + kappa))) = lambda, by bisection."""

    def f(k: float) -> float:
        return k * (1 - gamma * np.mean(eigs / (eigs + k))) - lam

    lo, hi = 0.0, lam + gamma * float(eigs.max()) + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return 0.5 * (lo + hi)


def deterministic_equivalents(
    eigs: np.ndarray, proj: np.ndarray, gamma: float, lam: float, noise_var: float
) -> RiskTerms:
    """Proportional-asymptotics equivalents (Theorem 3.1) of excess risks A, B and cross C.

    ``eigs`` are the eigenvalues of Sigma; ``proj`` the signal in Sigma's eigenbasis.
    Returned terms include noise_var, like ``risk_terms``.
    """
    kappa = solve_kappa(eigs, gamma, lam)
    g = 1 / (eigs + kappa)
    t2, t3, t4 = (gamma * np.mean(eigs**2 * g**j) for j in (2, 3, 4))
    b = 1 / (1 - t2)
    e = kappa - b * lam + b**2 * kappa * lam * t3
    a4 = b**3 * kappa**2 * lam**2
    a3 = 2 * b**2 * kappa * lam * e
    a2 = b * e**2 + b**4 * kappa**2 * lam**2 * t4 + b**5 * kappa**2 * lam**2 * t3**2
    u2, u3, u4 = t2 / (1 - t2), t3 * b**3, t4 * b**4 + 2 * t3**2 * b**5
    q2, q3, q4 = (float(np.sum(proj**2 * eigs * g**j)) for j in (2, 3, 4))
    big_q2 = kappa**2 * b * q2
    big_q3 = 2 * kappa * b * e * q2 + 2 * kappa**2 * b**2 * lam * q3
    big_q4 = a2 * q2 + a3 * q3 + a4 * q4
    a = big_q2 + noise_var * u2
    bb = (4 * big_q2 - 2 * big_q3 + big_q4) + noise_var * (u2 - 2 * lam * u3 + lam**2 * u4)
    c = (2 * big_q2 - 0.5 * big_q3) + noise_var * (u2 - lam * u3)
    return RiskTerms(a + noise_var, bb + noise_var, c + noise_var, a + bb - 2 * c)
