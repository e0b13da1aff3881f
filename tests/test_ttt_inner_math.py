"""The baseline's inner update is the true gradient of the binding loss, and it moves and
renormalises every fast weight (W0 and W2 too, not only W1)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from neuroedge.models.ttt.functional import (
    FastWeights,
    binding_update,
    chunk_step,
    column_norms,
)
from neuroedge.models.ttt.variants import LADDER

B, H, N, DK, DH, DV = 2, 2, 5, 8, 16, 8
BASELINE = LADDER["baseline"]


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, FastWeights]:
    g = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    k, v = F.normalize(rand(B, H, N, DK), dim=-1), rand(B, H, N, DV)
    eta = 0.05 + torch.rand(B, H, N, generator=g, dtype=torch.float64)
    # columns of unequal norms, so that a renormalisation to the wrong norms shows
    scale = 0.5 + torch.rand(B, H, 1, DH, generator=g, dtype=torch.float64)
    fast = FastWeights(rand(B, H, DH, DV) / DH**0.5, rand(B, H, DK, DH) * scale, rand(B, H, DK, DH))
    return k, v, eta, fast


@pytest.mark.parametrize("variant", [BASELINE, replace(BASELINE, name="ascent", ascent=True)])
def test_binding_update_is_minus_the_autograd_gradient_of_the_binding_loss(variant):
    k, v, eta, fast = _inputs()
    w1, w0, w2 = (w.clone().requires_grad_(True) for w in fast)
    f = (F.silu(k @ w0) * (k @ w2)) @ w1
    loss = -(eta.unsqueeze(-1) * f * v).sum()
    if variant.ascent:
        loss = -loss  # ascent: the update climbs L, i.e. descends -L
    g1, g0, g2 = torch.autograd.grad(loss, (w1, w0, w2))
    got = binding_update(k, v, eta, fast, variant)
    for name, mine, ref in (("W1", got.w1, g1), ("W0", got.w0, g0), ("W2", got.w2, g2)):
        assert mine.shape == ref.shape, name
        assert torch.allclose(mine, -ref, rtol=1e-10, atol=1e-12), (
            f"{name}: max err {float((mine + ref).abs().max()):.2e}"
        )


def test_a_static_kernel_updates_only_w1():
    k, v, eta, fast = _inputs()
    got = binding_update(k, v, eta, fast, LADDER["v1"])
    assert got.w0 is None and got.w2 is None
    phi = F.silu(k @ fast.w0) * (k @ fast.w2)
    assert torch.allclose(got.w1, phi.transpose(-1, -2) @ (eta.unsqueeze(-1) * v))


def test_a_baseline_chunk_step_moves_w0_w2_and_keeps_their_column_norms():
    k, v, eta, fast = _inputs(1)
    alpha = torch.full((B, H), 0.5, dtype=torch.float64)
    norms = FastWeights(*(column_norms(w) for w in fast))
    new, mom = chunk_step(k, v, eta, alpha, fast, None, norms, BASELINE)
    assert mom is not None and mom.w0 is not None and mom.w2 is not None
    for name, before, after, norm in zip(("W1", "W0", "W2"), fast, new, norms):
        moved = float((after - before).abs().max())
        assert moved > 1e-2, f"{name} was not updated (max change {moved:.1e})"
        err = float((column_norms(after) - norm).abs().max())
        assert err < 1e-5, f"{name} column norms drifted from the initial ones by {err:.1e}"
    # a second step from the first one's state keeps the initial norms too
    again, _ = chunk_step(k, v, eta, alpha, new, mom, norms, BASELINE)
    for after, norm in zip(again, norms):
        assert float((column_norms(after) - norm).abs().max()) < 1e-5
