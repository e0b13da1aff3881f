"""TTT-KVB fast weights as pure functions: the recurrent (reference) form and its pieces.

Tensors are ``(batch, heads, tokens, dim)``; fast weights ``(batch, heads, rows, cols)``.
The sequence is cut into chunks of ``chunk`` tokens (LaCT's large chunks; ``chunk=1`` is the
token-level recurrence used for streaming). For chunk ``c`` with keys K_c, values V_c and
per-token learning rates eta_c the binding loss is ``L_c = -sum_i eta_i <f(k_i), v_i>`` and
its descent direction for the last layer is (Theorem 5.1)::

    G_c = -dL_c/dW1 = phi(K_c)^T (eta_c * V_c)          (sign flipped for gradient ascent)
    M_c = G_c + alpha_c M_{c-1}                          (momentum; M_c = G_c without it)
    W_{c+1} = Norm(W_c + Muon(M_c))                      (Muon and Norm optional)
    O_c = phi(Q_c) W_{c+1}   (update-then-apply)   or   phi(Q_c) W_c   (apply-then-update)

With a dynamic kernel (the LaCT baseline) W0 and W2 take the same step with their own
gradients of L_c, computed in closed form below so outer training backpropagates through them.

Decisions the paper leaves open, and why:

* Muon runs on the momentum-mixed update M_c (as LaCT's kernel does), with the 5 quintic
  Newton-Schulz coefficients of LaCT / Keller Jordan's Muon, in fp32 (no bf16 on CPU).
* Weight norm rescales every column of a fast weight (over its input rows) back to the column
  norms of the initial weights, as LaCT's ``w / ||w|| * ||w_0||``.
* An unfinished last chunk (tokens % chunk != 0) is a shorter chunk in the recurrence; the
  parallel forms pad it with zero keys, values and learning rates, which contribute exactly
  nothing, so all forms agree (tests check it).
* ``inner_steps > 1`` repeats the update on the same chunk (the "more steps at test time"
  probe); the gradient is re-evaluated at the updated weights each time.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from neuroedge.models.ttt.variants import ORDERS, TTTVariant

NEWTON_SCHULZ = (
    (4.0848, -6.8946, 2.9270),
    (3.9505, -6.3029, 2.6377),
    (3.7418, -5.5913, 2.3037),
    (2.8769, -3.1427, 1.2046),
    (2.8366, -3.0525, 1.2012),
)


class FastWeights(NamedTuple):
    """The fast net's weights; ``w0``/``w2`` are None for the linear kernel."""

    w1: torch.Tensor  # (B, H, d_hidden, d_v): the last, linear, bias-free layer
    w0: torch.Tensor | None = None  # (B, H, d_k, d_hidden): SwiGLU gate
    w2: torch.Tensor | None = None  # (B, H, d_k, d_hidden): SwiGLU value branch


class TTTInputs(NamedTuple):
    """Per-token inputs of a TTT layer (after the slow projections)."""

    q: torch.Tensor  # (B, H, L, d_k) queries
    k: torch.Tensor  # (B, H, L, d_k) keys
    v: torch.Tensor  # (B, H, L, d_v) values
    eta: torch.Tensor  # (B, H, L) learning rate per token
    alpha: torch.Tensor | None  # (B, H, N) momentum per chunk, N = ceil(L / chunk); or None


def check_inputs(x: TTTInputs, fast: FastWeights, chunk: int, variant: TTTVariant) -> None:
    """Raise ValueError naming the mismatched dimension (heads, head dims, lengths)."""
    if chunk < 1:
        raise ValueError(f"chunk size must be >= 1, got {chunk}")
    b, h, n, dk = x.q.shape
    if x.k.shape != x.q.shape:
        raise ValueError(
            f"keys {list(x.k.shape)} and queries {list(x.q.shape)} must have the "
            "same (batch, heads, tokens, head dim)"
        )
    if x.v.shape[:3] != (b, h, n):
        raise ValueError(
            f"values {list(x.v.shape)} do not match queries {list(x.q.shape)} in "
            "(batch, heads, tokens)"
        )
    if x.eta.shape != (b, h, n):
        raise ValueError(
            f"learning rates {list(x.eta.shape)} must be (batch, heads, tokens) = {[b, h, n]}"
        )
    rows = dk if variant.kernel == "linear" else _hidden_rows(fast, dk)
    if fast.w1.shape[-2:] != (rows, x.v.shape[-1]):
        raise ValueError(
            f"fast weight W1 {list(fast.w1.shape)} must be (..., {rows}, "
            f"{x.v.shape[-1]}): head dims of keys {dk} / values {x.v.shape[-1]} "
            f"do not match"
        )
    if variant.momentum:
        chunks = -(-n // chunk)
        if x.alpha is None or x.alpha.shape != (b, h, chunks):
            got = None if x.alpha is None else list(x.alpha.shape)
            raise ValueError(
                f"momentum needs alpha of shape (batch, heads, chunks) = "
                f"{[b, h, chunks]} for {n} tokens in chunks of {chunk}, got {got}"
            )


def _hidden_rows(fast: FastWeights, dk: int) -> int:
    if fast.w0 is None or fast.w2 is None:
        raise ValueError("the SwiGLU kernel needs kernel weights w0 and w2")
    if fast.w0.shape[-2] != dk or fast.w2.shape[-2] != dk:
        raise ValueError(
            f"kernel weights W0 {list(fast.w0.shape)} / W2 {list(fast.w2.shape)} "
            f"must take head dim {dk} inputs"
        )
    return int(fast.w0.shape[-1])


def features(x: torch.Tensor, fast: FastWeights, kernel: str) -> torch.Tensor:
    """phi(x) = silu(x W0) * (x W2) for SwiGLU, x itself for the linear kernel."""
    if kernel == "linear":
        return x
    return F.silu(x @ fast.w0) * (x @ fast.w2)


def newton_schulz(g: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """Muon's orthogonalisation: ``X <- a X + (b A + c A^2) X``, ``A = X X^T``, 5 steps, on the
    last two dims, after scaling X to unit Frobenius norm (so the result is scale-free)."""
    wide = g.shape[-2] <= g.shape[-1]
    x = g if wide else g.transpose(-1, -2)
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + eps)
    for a, b, c in NEWTON_SCHULZ:
        gram = x @ x.transpose(-1, -2)
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x if wide else x.transpose(-1, -2)


def column_norms(w: torch.Tensor) -> torch.Tensor:
    return w.norm(dim=-2, keepdim=True)


def renormalize(w: torch.Tensor, norms: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Rescale each column of ``w`` to the matching entry of ``norms``."""
    return w / (column_norms(w) + eps) * norms


def binding_update(
    k: torch.Tensor, v: torch.Tensor, eta: torch.Tensor, fast: FastWeights, variant: TTTVariant
) -> FastWeights:
    """The descent direction ``-dL/dW`` of ``L = -sum eta_i <f(k_i), v_i>`` for each fast weight
    that is updated (W1 always; W0 and W2 with a dynamic kernel, else None).

    With ``h0 = k W0``, ``h2 = k W2``, ``e = eta v W1^T``: ``-dL/dW2 = k^T (e * silu(h0))`` and
    ``-dL/dW0 = k^T (e * h2 * silu'(h0))``.
    """
    sign = -1.0 if variant.ascent else 1.0
    ev = v * (sign * eta).unsqueeze(-1)
    phi = features(k, fast, variant.kernel)
    g1 = phi.transpose(-1, -2) @ ev
    if not variant.dynamic_kernel:
        return FastWeights(g1)
    h0, h2 = k @ fast.w0, k @ fast.w2
    e = ev @ fast.w1.transpose(-1, -2)
    sig = torch.sigmoid(h0)
    g2 = k.transpose(-1, -2) @ (e * h0 * sig)
    g0 = k.transpose(-1, -2) @ (e * h2 * sig * (1 + h0 * (1 - sig)))
    return FastWeights(g1, g0, g2)


def _zip_map(fn, *items: FastWeights) -> FastWeights:
    return FastWeights(*(None if parts[0] is None else fn(*parts) for parts in zip(*items)))


def chunk_step(
    k: torch.Tensor,
    v: torch.Tensor,
    eta: torch.Tensor,
    alpha: torch.Tensor | None,
    fast: FastWeights,
    mom: FastWeights | None,
    norms: FastWeights | None,
    variant: TTTVariant,
) -> tuple[FastWeights, FastWeights | None]:
    """One TTT update on one chunk: ``(W, M) -> (W', M')``; ``alpha`` is (B, H)."""
    grads = binding_update(k, v, eta, fast, variant)
    if variant.momentum:
        a = alpha[..., None, None]
        mom = grads if mom is None else _zip_map(lambda g, m: g + a * m, grads, mom)
        grads = mom
    if variant.muon:
        grads = _zip_map(newton_schulz, grads)
    fast = (
        _zip_map(lambda w, g: w + g, fast, grads)
        if variant.dynamic_kernel
        else fast._replace(w1=fast.w1 + grads.w1)
    )
    if variant.weight_norm:
        fast = _zip_map(renormalize, fast, norms)
    return fast, mom


def ttt_recurrent(
    x: TTTInputs,
    fast: FastWeights,
    variant: TTTVariant,
    chunk: int,
    order: str = "update_then_apply",
    inner_steps: int = 1,
) -> tuple[torch.Tensor, FastWeights, FastWeights | None]:
    """The reference form: a loop over chunks. Returns (outputs (B,H,L,d_v), W_final, M_final).

    ``fast`` holds the initial fast weights, broadcast to the batch.
    """
    check_inputs(x, fast, chunk, variant)
    if order not in ORDERS:
        raise ValueError(f"order {order!r} is not one of {ORDERS}")
    if inner_steps < 1:
        raise ValueError(f"inner_steps must be >= 1, got {inner_steps}")
    norms = _zip_map(column_norms, fast) if variant.weight_norm else None
    mom: FastWeights | None = None
    outs = []
    for c, start in enumerate(range(0, x.q.shape[2], chunk)):
        sl = slice(start, start + chunk)
        if order == "apply_then_update":
            outs.append(features(x.q[:, :, sl], fast, variant.kernel) @ fast.w1)
        alpha = x.alpha[:, :, c] if variant.momentum else None
        for _ in range(inner_steps):
            fast, mom = chunk_step(
                x.k[:, :, sl], x.v[:, :, sl], x.eta[:, :, sl], alpha, fast, mom, norms, variant
            )
        if order == "update_then_apply":
            outs.append(features(x.q[:, :, sl], fast, variant.kernel) @ fast.w1)
    return torch.cat(outs, dim=2), fast, mom


def linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, s0: torch.Tensor | None = None
) -> torch.Tensor:
    """Plain causal linear attention ``o_t = q_t (S_0 + sum_{i<=t} k_i^T v_i)`` (masked form)."""
    if q.shape != k.shape or q.shape[:-1] != v.shape[:-1]:
        raise ValueError(
            f"linear attention needs q, k of one shape and v with the same leading "
            f"dims: q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}"
        )
    n = q.shape[-2]
    mask = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    out = ((q @ k.transpose(-1, -2)) * mask) @ v
    return out if s0 is None else out + q @ s0


def streaming_step(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    eta: torch.Tensor,
    alpha: torch.Tensor | None,
    state: FastWeights,
    mom: torch.Tensor | None,
    variant: TTTVariant,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One token of the token-level (chunk 1) update-then-apply recurrence with explicit state:
    ``(q_t, k_t, v_t, S_t, M_t) -> (o_t, S_{t+1}, M_{t+1})``; q, k, v are (B, H, d).

    Static-kernel variants without weight norm only (the streaming export's contract).
    """
    reason = variant.supports("chunked")
    if reason is not None:
        raise ValueError(f"streaming step: {reason}")
    prev = None if mom is None else FastWeights(mom)
    fast, new_mom = chunk_step(
        k.unsqueeze(2), v.unsqueeze(2), eta.unsqueeze(2), alpha, state, prev, None, variant
    )
    out = (features(q.unsqueeze(2), fast, variant.kernel) @ fast.w1).squeeze(2)
    return out, fast.w1, None if new_mom is None else new_mom.w1
