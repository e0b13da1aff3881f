"""The classification predictive E[softmax(z)], z ~ N(f, S) per point: Monte Carlo on the
centred logits (what the GLMs report) and the pairwise mean-field approximation (what the
validation-NLL search scores each grid point with; see functional.py)."""

from __future__ import annotations

import math

import numpy as np

MC_SAMPLES = 1000  # draws of the Monte Carlo predictive


def softmax(f: np.ndarray) -> np.ndarray:
    z = f - f.max(-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(-1, keepdims=True)
    return z


def expected_softmax(
    f: np.ndarray,
    cov: np.ndarray,
    samples: int = MC_SAMPLES,
    seed: int = 0,
    block: int | None = None,
) -> np.ndarray:
    """E[softmax(z)], z ~ N(f, cov) per point [n, C], by Monte Carlo on the centred logits.

    With P = I - 11^T / C, softmax(f + e) = softmax(f + P e) for every e, and P e ~ N(0, P S P),
    so sampling N(f, P S P) is exact in expectation and blind to any common-shift variance.
    The square root is the symmetric one, Q diag(sqrt w) Q^T from ``eigh`` (P S P is singular
    along 1), a function of P S P alone (no eigenvector sign choice reaches the draws). The same
    standard-normal draws (from ``seed``) are used for every point, ``block`` draws at a time
    (default: as many as keep the [block, n, C] array near 4 MB).
    """
    c = f.shape[1]
    block = block or max(1, min(samples, 500_000 // f.size))
    proj = np.eye(c) - 1.0 / c
    w, q = np.linalg.eigh(proj @ cov @ proj)
    root = (q * np.sqrt(np.clip(w, 0, None))[:, None, :]) @ np.swapaxes(q, -1, -2)
    z = np.random.default_rng(seed).standard_normal((samples, c))
    total = np.zeros_like(f)
    for start in range(0, samples, block):
        draws = np.tensordot(z[start : start + block], root, axes=(1, 2))  # [s, n, c]
        draws += f
        total += softmax(draws).sum(0)
    return total / samples


def mean_field_softmax(f: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """E[softmax(z)], z ~ N(f, cov) per point [..., n, C], by the pairwise mean-field probit
    (Lu, Ie, Sha 2020, "Mean-field approximation to Gaussian-softmax integral"):

        p_c ~ 1 / sum_k exp(-(f_c - f_k) / sqrt(1 + pi/8 var(z_c - z_k))),  renormalised.

    It reads f and cov only through differences of logits, so, like the softmax, it ignores
    the common shift that the last layer's null direction carries (the plain probit
    softmax(f / sqrt(1 + pi/8 diag S)) does not); for C = 2 it is the binary probit
    sigmoid(d / sqrt(1 + pi/8 v)) of the logit difference d exactly. Deterministic, O(n C^2).
    """
    diff = f[..., :, None] - f[..., None, :]
    diag = np.diagonal(cov, axis1=-2, axis2=-1)
    var = np.clip(diag[..., :, None] + diag[..., None, :] - 2 * cov, 0, None)
    probs = 1.0 / np.exp(-diff / np.sqrt(1 + math.pi / 8 * var)).sum(-1)
    return probs / probs.sum(-1, keepdims=True)
