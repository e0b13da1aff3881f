"""Recurrent, fully parallel and chunked TTT forms agree (fp32, 1e-5), and bad input is refused."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from neuroedge.models.ttt.forms import ttt_chunked, ttt_parallel
from neuroedge.models.ttt.functional import (
    FastWeights,
    TTTInputs,
    linear_attention,
    newton_schulz,
    ttt_recurrent,
)
from neuroedge.models.ttt.variants import LADDER, ORDERS, VARIANTS

TOL = 1e-5
B, H, DK, DH, DV = 2, 2, 8, 16, 8


def make(variant, chunk: int, tokens: int = 37, seed: int = 0):
    """Random layer inputs at the layer's scales: unit-norm q, k (as the module makes them)."""
    g = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(B, H, tokens, DK, generator=g), dim=-1)
    k = F.normalize(torch.randn(B, H, tokens, DK, generator=g), dim=-1)
    v = torch.randn(B, H, tokens, DV, generator=g)
    eta = 0.05 + 0.3 * torch.rand(B, H, tokens, generator=g)
    alpha = 0.05 + 0.9 * torch.rand(B, H, -(-tokens // chunk), generator=g)
    rows = DK if variant.kernel == "linear" else DH
    fast = FastWeights(
        torch.randn(B, H, rows, DV, generator=g) / rows**0.5,
        torch.randn(B, H, DK, DH, generator=g) / DK**0.5,
        torch.randn(B, H, DK, DH, generator=g) / DK**0.5,
    )
    return TTTInputs(q, k, v, eta, alpha), fast


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


NO_MUON = [(name, mom) for name in ("v6", "la_momentum") for mom in (False, True)]
# Muon variants: chunks of 16 tokens make each update full rank (Muon amplifies rounding noise
# in the null space of a rank-deficient update by up to 4^5, see test_muon_rank_deficient).
MUON = [(name, mom) for name in ("v2", "v3", "v4", "v5") for mom in (False, True)]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("chunk", [1, 4])
@pytest.mark.parametrize("name,momentum", NO_MUON)
def test_parallel_and_chunked_match_recurrent(name, momentum, chunk, order):
    variant = replace(VARIANTS[name], momentum=momentum)
    x, fast = make(variant, chunk)
    ref, _, _ = ttt_recurrent(x, fast, variant, chunk, order)
    assert ref.abs().max() > 0.1
    assert max_err(ttt_parallel(x, fast, variant, chunk, order), ref) < TOL
    assert max_err(ttt_chunked(x, fast, variant, chunk, order, block=8), ref) < TOL


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("name,momentum", MUON)
def test_muon_chunked_matches_recurrent(name, momentum, order):
    variant = replace(VARIANTS[name], momentum=momentum)
    x, fast = make(variant, 16, tokens=70)
    ref, _, _ = ttt_recurrent(x, fast, variant, 16, order)
    assert max_err(ttt_chunked(x, fast, variant, 16, order), ref) < TOL


def test_muon_rank_deficient_updates_agree_in_float64():
    variant = LADDER["v2"]
    x, fast = make(variant, 1)
    x = TTTInputs(*(t.double() for t in x))
    fast = FastWeights(*(t.double() for t in fast))
    ref, _, _ = ttt_recurrent(x, fast, variant, 1)
    assert max_err(ttt_chunked(x, fast, variant, 1), ref) < 1e-10


def test_ascent_flips_the_update_in_every_form():
    variant = replace(VARIANTS["la_momentum"], ascent=True)
    x, fast = make(variant, 4)
    ref, _, _ = ttt_recurrent(x, fast, variant, 4)
    descent, _, _ = ttt_recurrent(x, fast, VARIANTS["la_momentum"], 4)
    assert max_err(ref, descent) > 0.1
    assert max_err(ttt_parallel(x, fast, variant, 4), ref) < TOL


def test_v6_token_level_is_plain_linear_attention():
    variant = LADDER["v6"]
    x, fast = make(variant, 1)
    ones = TTTInputs(x.q, x.k, x.v, torch.ones_like(x.eta), None)
    expected = linear_attention(x.q, x.k, x.v, fast.w1)
    for out in (
        ttt_recurrent(ones, fast, variant, 1)[0],
        ttt_parallel(ones, fast, variant, 1),
        ttt_chunked(ones, fast, variant, 1, block=8),
    ):
        assert max_err(out, expected) < TOL


def test_recurrent_final_state_is_the_sum_of_outer_products():
    variant = LADDER["v6"]
    x, fast = make(variant, 1)
    _, final, _ = ttt_recurrent(x, fast, variant, 1)
    expected = fast.w1 + x.k.transpose(-1, -2) @ (x.eta.unsqueeze(-1) * x.v)
    assert max_err(final.w1, expected) < TOL


def test_newton_schulz_makes_singular_values_near_one():
    g = torch.randn(16, 8, generator=torch.Generator().manual_seed(1))
    s = torch.linalg.svdvals(newton_schulz(g))
    assert s.min() > 0.6 and s.max() < 1.3
    assert max_err(newton_schulz(3.0 * g), newton_schulz(g)) < 1e-5


@pytest.mark.parametrize("name", ["baseline", "v1"])
def test_non_associative_variants_refuse_parallel_forms_with_reason(name):
    variant = LADDER[name]
    x, fast = make(variant, 4)
    with pytest.raises(ValueError, match="only the recurrent form"):
        ttt_chunked(x, fast, variant, 4)
    with pytest.raises(ValueError, match="only the recurrent form"):
        ttt_parallel(x, fast, variant, 4)


def test_muon_refuses_masked_form():
    x, fast = make(LADDER["v5"], 4)
    with pytest.raises(ValueError, match="Muon"):
        ttt_parallel(x, fast, LADDER["v5"], 4)


def test_ragged_length_refused_without_padding():
    x, fast = make(LADDER["v6"], 4, tokens=37)
    with pytest.raises(ValueError, match="37 is not a multiple of 4"):
        ttt_parallel(x, fast, LADDER["v6"], 4, pad=False)


def test_mismatched_head_dims_name_both():
    x, fast = make(LADDER["v6"], 1)
    bad = fast._replace(w1=torch.zeros(B, H, DK + 1, DV))
    with pytest.raises(ValueError, match="head dims of keys 8"):
        ttt_recurrent(x, bad, LADDER["v6"], 1)
    with pytest.raises(ValueError, match="same"):
        ttt_parallel(x._replace(k=x.k[..., :4]), fast, LADDER["v6"], 1)


def test_momentum_needs_one_alpha_per_chunk():
    variant = VARIANTS["la_momentum"]
    x, fast = make(variant, 4)
    with pytest.raises(ValueError, match="chunks"):
        ttt_chunked(x._replace(alpha=x.alpha[..., :-1]), fast, variant, 4)


def test_a_block_far_longer_than_the_sequence_is_capped():
    """block=2**20 padded 37 tokens to a million-token block (terabytes at bench sizes)."""
    variant = VARIANTS["v6"]
    x, fast = make(variant, 1)
    ref, _, _ = ttt_recurrent(x, fast, variant, 1, "update_then_apply")
    assert max_err(ttt_chunked(x, fast, variant, 1, block=2**20), ref) < TOL
