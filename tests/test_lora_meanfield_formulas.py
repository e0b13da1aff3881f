"""lora.meanfield Prop 3.3 pinned on a diagonal V with a hand-made dV."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.models.lora_meanfield import functional as F

V = np.diag([1.0, 0.6, 0.3, 0.1])  # top eigenvector e_1, gap 0.4


def hand_dv(a: float, column: list[float], block: list[float]) -> np.ndarray:
    """Symmetric dV with dV[0, 0] = a, dV[1:, 0] = column, dV[1:, 1:] = diag(block)."""
    dv = np.diag([a, *block])
    dv[1:, 0] = dv[0, 1:] = column
    return dv


@pytest.mark.parametrize(
    "a, column, block, applies",
    [
        # b = 0.2, E = 0.1: gap + a = 0.45 <= 2b + E = 0.5, yet > b + E (the factor 2 decides)
        (0.05, [0.12, 0.16, 0.0], [0.1, -0.05, 0.02], False),
        # b = 0.05, E = 0.08: gap + a = 0.42 > 2b + E = 0.18
        (0.02, [0.03, 0.0, 0.04], [-0.08, 0.03, 0.01], True),
    ],
)
def test_spectral_bound_on_a_diagonal_v(a, column, block, applies):
    """a = dV[0,0], b = ||dV[1:,0]||, E = ||dV[1:,1:]||_2, gap = lambda_1 - lambda_2;
    bound (2b + E) / (gap + a), condition gap + a > 2b + E."""
    sb = F.spectral_bound(V, hand_dv(a, column, block))
    b, e, gap = float(np.hypot.reduce(column)), float(np.abs(block).max()), 0.4
    assert (sb.a, sb.b, sb.e, sb.gap) == pytest.approx((a, b, e, gap), abs=1e-12)
    assert sb.bound == pytest.approx((2 * b + e) / (gap + a), rel=1e-12)
    assert sb.applies is applies
