"""ttt Muon orthogonalisation against a reference written out here.

The 5 quintic Newton-Schulz steps of LaCT / Keller Jordan's Muon (per-step coefficients of
You Jiacheng; research notes section 4 list the first and the last):
``X <- a X + (b A + c A^2) X``, ``A = X X^T``, after scaling X to unit Frobenius norm, on the
wide orientation. A last tuple of (3, -3, 1) passed every ttt test before (2026-12 audit)."""

from __future__ import annotations

import pytest
import torch
from neuroedge.models.ttt.functional import NEWTON_SCHULZ, newton_schulz

MUON_COEFFICIENTS = [
    (4.0848, -6.8946, 2.9270),
    (3.9505, -6.3029, 2.6377),
    (3.7418, -5.5913, 2.3037),
    (2.8769, -3.1427, 1.2046),
    (2.8366, -3.0525, 1.2012),
]


def _reference(g: torch.Tensor) -> torch.Tensor:
    """One 2-D matrix, float64, the Muon reference loop."""
    tall = g.shape[0] > g.shape[1]
    x = g.T if tall else g
    x = x / (x.norm() + 1e-7)
    for a, b, c in MUON_COEFFICIENTS:
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def _fixed(rows: int, cols: int) -> torch.Tensor:
    """A fixed, full-rank matrix with spread singular values (no random state)."""
    i = torch.arange(rows, dtype=torch.float64)[:, None]
    j = torch.arange(cols, dtype=torch.float64)[None, :]
    return torch.sin(1.3 * i + 0.7 * j * j + 0.1) + 0.5 * torch.cos(2.1 * i * j)


def test_coefficients_are_the_muon_ones() -> None:
    assert [tuple(t) for t in NEWTON_SCHULZ] == MUON_COEFFICIENTS


@pytest.mark.parametrize("shape", [(4, 6), (6, 4), (5, 5)])
def test_newton_schulz_matches_the_reference_loop_on_a_fixed_matrix(shape) -> None:
    g = _fixed(*shape)
    assert torch.allclose(newton_schulz(g), _reference(g), rtol=0, atol=1e-10)
    batched = torch.stack([g, 2.0 * g.flip(0)]).unsqueeze(0)  # (1, 2, rows, cols)
    got = newton_schulz(batched)
    assert torch.allclose(got[0, 1], _reference(2.0 * g.flip(0)), rtol=0, atol=1e-10)


def test_newton_schulz_maps_each_singular_value_through_the_quintic_chain() -> None:
    """Independent of matrix products: with G = U diag(s) V^T each step maps a singular value
    sigma to a sigma + b sigma^3 + c sigma^5, starting from s / (||s||_2 + 1e-7) (the
    Frobenius norm, with the function's eps: the chain's slope, ~4^5, would show it)."""
    u, _ = torch.linalg.qr(_fixed(5, 5))
    v, _ = torch.linalg.qr(_fixed(7, 5) + 1.0)
    s = torch.tensor([3.0, 1.5, 0.6, 0.2, 0.05], dtype=torch.float64)
    sigma = s / (s.norm() + 1e-7)
    for a, b, c in MUON_COEFFICIENTS:
        sigma = a * sigma + b * sigma**3 + c * sigma**5
    g = u @ torch.diag(s) @ v.T  # (5, 7), wide
    expected = u @ torch.diag(sigma) @ v.T
    assert torch.allclose(newton_schulz(g), expected, rtol=0, atol=1e-8)
    assert torch.allclose(newton_schulz(g.T), expected.T, rtol=0, atol=1e-8)
