"""The fully parallel (masked) and chunked (prefix-scan) forms of a static-kernel TTT layer.

With a static kernel, no weight norm and the dot-product loss, the update ``G_c`` does not
depend on the state, so the recurrence unrolls (Theorems 5.2-5.3). Writing
``q^ = phi(q)``, ``k^ = phi(k)``, ``v^ = +-eta v`` and ``beta_i^j = prod_{s=i+1..j} alpha_s``::

    O = Q^ W_0 + [(Q^ K^T) * (C (x) 1_{b x b})] V^,
    C[t, i] = sum_{j=i..t'} beta_i^j  for i <= t'   (t' = t update-then-apply, t - 1
                                                      apply-then-update), else 0.

Without momentum ``C`` is the block-causal indicator (and with ``chunk=1``,
update-then-apply, identity kernel, it is plain causal linear attention).

The chunked form cuts the sequence into blocks of ``block`` tokens (a multiple of the chunk),
computes inside every block the masked form above from a zero state, and carries the state
between blocks with the affine map ``(W, M) -> (W + gamma M + dW, P M + dM)``: a cumulative sum
without momentum, a scan over the L/block blocks with it. Muon is not linear, so with Muon the
block is one chunk: all chunk updates ``G_c`` come out of one batched matmul, the momentum
recurrence is scanned, ``Muon(M_c)`` runs batched over chunks, and the states are a cumulative
sum. The momentum mask is built in float64 (``exp`` of differences of cumulative log alphas)
because in float32 a long sequence's cumulative log loses digits past the 1e-5 parity budget;
alphas below 1e-30 are clamped there (products that small are zero in fp32 anyway).
"""

from __future__ import annotations

import torch
from neuroedge.models.ttt.functional import (
    FastWeights,
    TTTInputs,
    check_inputs,
    features,
    newton_schulz,
)
from neuroedge.models.ttt.variants import ORDERS, TTTVariant

DEFAULT_BLOCK = 64  # tokens per block of the chunked form (rounded to a multiple of the chunk)


def _check(
    x: TTTInputs, fast: FastWeights, variant: TTTVariant, chunk: int, order: str, form: str
) -> None:
    check_inputs(x, fast, chunk, variant)
    if order not in ORDERS:
        raise ValueError(f"order {order!r} is not one of {ORDERS}")
    reason = variant.supports(form)
    if reason is not None:
        raise ValueError(reason)


def pad_to(x: TTTInputs, chunk: int, multiple: int, pad: bool) -> TTTInputs:
    """Pad tokens to a multiple of ``multiple`` with zero q, k, v, eta (they add nothing) and
    momentum chunks with alpha = 1; ``pad=False`` refuses a ragged length with the reason."""
    n = x.q.shape[2]
    extra = -n % multiple
    if extra == 0:
        return x
    if not pad:
        raise ValueError(
            f"sequence length {n} is not a multiple of {multiple} (chunk size "
            f"{chunk}); pass pad=True to pad it with inert zero tokens"
        )

    def tok(t: torch.Tensor) -> torch.Tensor:
        shape = (*t.shape[:2], extra, *t.shape[3:])
        return torch.cat([t, t.new_zeros(shape)], dim=2)

    alpha = x.alpha
    if alpha is not None:
        more = -(-(n + extra) // chunk) - alpha.shape[2]
        alpha = torch.cat([alpha, alpha.new_ones((*alpha.shape[:2], more))], dim=2)
    return TTTInputs(tok(x.q), tok(x.k), tok(x.v), tok(x.eta), alpha)


def momentum_masks(
    alpha: torch.Tensor, chunks: int, order: str, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(C_out, C_end)`` of one block with a carried momentum buffer as virtual chunk 0.

    ``C_out`` (..., chunks, chunks + 1): row c weights the chunk updates seen by chunk c's
    outputs (column 0 = the carried buffer, gamma). ``C_end`` (..., 2, chunks + 1): row 0 is the
    block's total weight on each update (for dW), row 1 the momentum left at its end (for dM,
    column 0 = P = prod alpha).
    """
    log_a = alpha.to(torch.float64).clamp_min(1e-30).log()
    cum = torch.cat([log_a.new_zeros((*log_a.shape[:-1], 1)), log_a.cumsum(-1)], dim=-1)
    diff = cum.unsqueeze(-1) - cum.unsqueeze(-2)  # [j, i] = log beta_i^j
    causal = torch.ones(chunks + 1, chunks + 1, dtype=torch.bool, device=alpha.device).tril()
    beta = torch.where(causal, diff, torch.full_like(diff, float("-inf"))).exp()
    crow = beta[..., 1:, :].cumsum(-2)  # rows: local t' = 0..chunks-1
    beta_end = beta[..., -1, :]
    if order == "update_then_apply":
        c_out = crow
    else:
        c_out = torch.cat([torch.zeros_like(crow[..., :1, :]), crow[..., :-1, :]], dim=-2)
    c_end = torch.stack([crow[..., -1, :], beta_end.expand_as(crow[..., -1, :])], dim=-2)
    return c_out.to(dtype), c_end.to(dtype)


def _masked_block(
    qf: torch.Tensor,
    kf: torch.Tensor,
    vh: torch.Tensor,
    alpha: torch.Tensor | None,
    chunk: int,
    order: str,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Intra-block outputs from a zero state, then (with momentum) per-token gamma and the
    per-chunk end weights. Without momentum the mask is the block-causal indicator, built from
    token positions so a traced export keeps the sequence length dynamic."""
    scores = qf @ kf.transpose(-1, -2)
    if alpha is None:
        if chunk == 1 and order == "update_then_apply":
            return scores.tril_() @ vh, None, None  # in place: no second L x L buffer
        pos = torch.arange(qf.shape[-2], device=qf.device) // chunk
        seen = (
            pos[:, None] >= pos[None, :]
            if order == "update_then_apply"
            else pos[:, None] > pos[None, :]
        )
        return (scores * seen) @ vh, None, None
    c_out, c_end = momentum_masks(alpha, qf.shape[-2] // chunk, order, qf.dtype)
    mask = c_out[..., 1:].repeat_interleave(chunk, -2).repeat_interleave(chunk, -1)
    gamma = c_out[..., 0].repeat_interleave(chunk, -1)
    return (scores * mask) @ vh, gamma, c_end


def _values(x: TTTInputs, variant: TTTVariant) -> torch.Tensor:
    sign = -1.0 if variant.ascent else 1.0
    return x.v * (sign * x.eta).unsqueeze(-1)


def ttt_parallel(
    x: TTTInputs,
    fast: FastWeights,
    variant: TTTVariant,
    chunk: int,
    order: str = "update_then_apply",
    pad: bool = True,
) -> torch.Tensor:
    """The fully parallel masked form; outputs (B, H, L, d_v)."""
    _check(x, fast, variant, chunk, order, "parallel")
    n = x.q.shape[2]
    x = pad_to(x, chunk, chunk, pad)
    qf, kf = features(x.q, fast, variant.kernel), features(x.k, fast, variant.kernel)
    alpha = x.alpha if variant.momentum else None
    intra, _, _ = _masked_block(qf, kf, _values(x, variant), alpha, chunk, order)
    return (qf @ fast.w1 + intra)[:, :, :n]


def _blocks(t: torch.Tensor, size: int) -> torch.Tensor:
    """(B, H, L, ...) -> (B, H, L / size, size, ...)."""
    return t.reshape(*t.shape[:2], t.shape[2] // size, size, *t.shape[3:])


def _scan_states(
    w0: torch.Tensor,
    dw: torch.Tensor,
    dm: torch.Tensor | None,
    gamma_end: torch.Tensor | None,
    p: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The (W, M) entering every block: exclusive prefix of the blocks' affine maps."""
    if dm is None:  # exclusive prefix sum as one small matmul (faster than a strided cumsum)
        nb = dw.shape[2]
        before = torch.ones(nb, nb, dtype=dw.dtype, device=dw.device).tril(-1)
        prefix = (before @ dw.flatten(-2)).view_as(dw)
        return w0.unsqueeze(2) + prefix, None
    w, m = w0, torch.zeros_like(w0)
    ws, ms = [], []
    for b in range(dw.shape[2]):
        ws.append(w)
        ms.append(m)
        g, pb = gamma_end[:, :, b, None, None], p[:, :, b, None, None]
        w, m = w + g * m + dw[:, :, b], pb * m + dm[:, :, b]
    return torch.stack(ws, dim=2), torch.stack(ms, dim=2)


def ttt_chunked(
    x: TTTInputs,
    fast: FastWeights,
    variant: TTTVariant,
    chunk: int,
    order: str = "update_then_apply",
    block: int | None = None,
    pad: bool = True,
) -> torch.Tensor:
    """The chunked prefix-scan form; outputs (B, H, L, d_v)."""
    _check(x, fast, variant, chunk, order, "chunked")
    if variant.muon:
        return _muon_chunked(x, fast, variant, chunk, order, pad)
    block = chunk * max(1, (block or DEFAULT_BLOCK) // chunk)
    n = x.q.shape[2]
    block = min(block, chunk * max(1, -(-n // chunk)))  # no block longer than the sequence
    x = pad_to(x, chunk, block, pad)
    qf = _blocks(features(x.q, fast, variant.kernel), block)
    kf = _blocks(features(x.k, fast, variant.kernel), block)
    vh = _blocks(_values(x, variant), block)
    alpha = None
    if variant.momentum:
        alpha = x.alpha.reshape(*x.alpha.shape[:2], -1, block // chunk)
    intra, gamma, c_end = _masked_block(qf, kf, vh, alpha, chunk, order)
    dm = gamma_end = p = None
    if c_end is None:  # no momentum: every update of a block counts fully at its end
        dw = kf.transpose(-1, -2) @ vh
    else:
        tok_end = c_end[..., 1:].repeat_interleave(chunk, -1)  # (..., 2, block)
        dw = kf.transpose(-1, -2) @ (tok_end[..., 0, :, None] * vh)
        dm = kf.transpose(-1, -2) @ (tok_end[..., 1, :, None] * vh)
        gamma_end, p = c_end[..., 0, 0], c_end[..., 1, 0]
    w_in, m_in = _scan_states(fast.w1, dw, dm, gamma_end, p)
    out = qf @ w_in + intra
    if m_in is not None:
        out = out + gamma.unsqueeze(-1) * (qf @ m_in)
    return out.reshape(*out.shape[:2], -1, out.shape[-1])[:, :, :n]


def _muon_chunked(
    x: TTTInputs, fast: FastWeights, variant: TTTVariant, chunk: int, order: str, pad: bool
) -> torch.Tensor:
    """Muon: all chunk updates at once, a momentum scan, batched Muon, a cumulative sum."""
    n = x.q.shape[2]
    x = pad_to(x, chunk, chunk, pad)
    qf = _blocks(features(x.q, fast, variant.kernel), chunk)
    kf = _blocks(features(x.k, fast, variant.kernel), chunk)
    grads = kf.transpose(-1, -2) @ _blocks(_values(x, variant), chunk)  # (B, H, N, dh, dv)
    if variant.momentum:
        mixed, m = [], torch.zeros_like(grads[:, :, 0])
        for c in range(grads.shape[2]):
            m = grads[:, :, c] + x.alpha[:, :, c, None, None] * m
            mixed.append(m)
        grads = torch.stack(mixed, dim=2)
    orth = newton_schulz(grads)
    updates = orth.cumsum(dim=2)
    if order == "apply_then_update":
        updates = updates - orth
    out = qf @ (fast.w1.unsqueeze(2) + updates)
    return out.reshape(*out.shape[:2], -1, out.shape[-1])[:, :, :n]
