"""nn.Module wrappers: the TTT layer (slow projections + fast weights), its streaming step and
parallel exports, and the small causal language model used for associative recall.

Decisions the paper leaves open, and why:

* q and k are l2-normalised per head (LaCT does so for its fast-weight inputs): it bounds the
  fast-weight updates, which keeps the un-normalised variants (V2-V6) trainable.
* The layer output is RMS-normalised per head before the output projection (LaCT's output
  norm), so variants whose update scale differs (Muon or not) see the same output scale.
* Without a per-token learning rate eta is the constant ``base_lr``: a constant scale is
  absorbed by the learnable v projection (the paper's step 4).
* The momentum of chunk c is ``sigmoid(w . mean(x_c) + b)``, one per head and chunk.
* Fast weights start from learned parameters (W1_0 is the linear-attention state S_0), so the
  streaming export's initial state is a learned, nonzero tensor.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from neuroedge.models.ttt.forms import ttt_chunked, ttt_parallel
from neuroedge.models.ttt.functional import (
    FastWeights,
    TTTInputs,
    streaming_step,
    ttt_recurrent,
)
from neuroedge.models.ttt.variants import ORDERS, TTTVariant, get_variant
from torch import nn

# The largest layer built: 2**28 fp32 weights (1 GiB), far above any shape the SDK runs (the
# registered layer has 8k); a larger d_model / heads / head_dim is refused before allocating.
MAX_LAYER_PARAMETERS = 2**28


def layer_parameters(
    d_model: int, heads: int, head_dim: int, kernel: str = "linear", hidden: int | None = None
) -> int:
    """Weights of a TTTLayer of these sizes (projections and fast weights; the small per-token
    lr and momentum gates aside)."""
    hidden = hidden or 2 * head_dim
    rows = head_dim if kernel == "linear" else hidden
    count = 4 * d_model * heads * head_dim + heads * rows * head_dim
    return count + (2 * heads * head_dim * hidden if kernel == "swiglu" else 0)


def check_layer_size(
    d_model: int, heads: int, head_dim: int, kernel: str = "linear", hidden: int | None = None
) -> None:
    """ValueError naming d_model, heads and head_dim when the layer would exceed
    MAX_LAYER_PARAMETERS weights."""
    count = layer_parameters(d_model, heads, head_dim, kernel, hidden)
    if count > MAX_LAYER_PARAMETERS:
        raise ValueError(
            f"TTT layer d_model={d_model}, heads={heads}, head_dim={head_dim} needs {count:,} "
            f"weights ({4 * count / 2**30:.1f} GiB fp32); at most {MAX_LAYER_PARAMETERS:,} "
            "(MAX_LAYER_PARAMETERS, 1 GiB) are allowed: make them smaller"
        )


# The widest d_model a config may ask for: 128x the registered layer's 32, and the one size the
# layer's weight cap (MAX_LAYER_PARAMETERS) leaves near-unbounded (heads = head_dim = 1 allows
# 6.7e7), while the example input and the bench's stream hold T x batch x d_model values.
MAX_D_MODEL = 4096


def check_sizes(cfg: Any, kernel: str = "linear") -> None:
    """ConfigError naming ``d_model``, ``heads`` or ``head_dim`` of the config ``cfg``: each an
    integer >= 1, d_model <= MAX_D_MODEL, the layer within MAX_LAYER_PARAMETERS weights;
    before anything is allocated (d_model=99999999999 was a 23 TiB example input)."""
    from neuroedge.config_values import integer
    from neuroedge.errors import ConfigError

    hint = " (MAX_D_MODEL: 128x the registered layer's 32; inputs grow with it)"
    integer(cfg, "d_model", 1, MAX_D_MODEL, hint)
    integer(cfg, "heads", 1)
    integer(cfg, "head_dim", 1)  # both bounded by the weight count, next
    try:
        check_layer_size(cfg["d_model"], cfg["heads"], cfg["head_dim"], kernel)
    except ValueError as err:
        raise ConfigError(f"config: {err}") from None


class TTTLayer(nn.Module):
    """A multi-head TTT-KVB layer in one of the ladder's variants, computed in any exact form."""

    def __init__(
        self,
        d_model: int,
        heads: int,
        head_dim: int,
        variant: str | TTTVariant = "v6",
        chunk: int = 1,
        order: str = "update_then_apply",
        hidden: int | None = None,
        base_lr: float = 0.1,
        q_as_k: bool = False,
        block: int | None = None,
    ) -> None:
        super().__init__()
        if order not in ORDERS:
            raise ValueError(f"order {order!r} is not one of {ORDERS}")
        sizes = {"d_model": d_model, "heads": heads, "head_dim": head_dim, "chunk": chunk}
        if hidden is not None:
            sizes["hidden"] = hidden
        if block is not None:
            sizes["block"] = block
        for key, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TTT layer {key} must be a positive integer, got {value!r}")
        self.variant, self.chunk, self.order = get_variant(variant), int(chunk), order
        check_layer_size(d_model, heads, head_dim, self.variant.kernel, hidden)
        self.block = block  # tokens per block of the chunked form (None: forms.DEFAULT_BLOCK)
        self.heads, self.head_dim, self.base_lr, self.q_as_k = heads, head_dim, base_lr, q_as_k
        hidden = hidden or 2 * head_dim
        rows = head_dim if self.variant.kernel == "linear" else hidden
        self.qkv = nn.Linear(d_model, 3 * heads * head_dim, bias=False)
        self.lr = nn.Linear(d_model, heads) if self.variant.per_token_lr else None
        self.mom = nn.Linear(d_model, heads) if self.variant.momentum else None
        self.w1 = nn.Parameter(torch.randn(heads, rows, head_dim) / math.sqrt(rows))
        self.w0 = self.w2 = None
        if self.variant.kernel == "swiglu":
            self.w0 = nn.Parameter(torch.randn(heads, head_dim, hidden) / math.sqrt(head_dim))
            self.w2 = nn.Parameter(torch.randn(heads, head_dim, hidden) / math.sqrt(head_dim))
        self.out = nn.Linear(heads * head_dim, d_model, bias=False)

    def project(self, x: torch.Tensor) -> TTTInputs:
        """Slow projections of ``x`` (B, L, d_model) into per-head q, k, v, eta, alpha."""
        if x.dim() != 3 or x.shape[-1] != self.qkv.in_features:
            raise ValueError(
                f"TTT layer input must be (batch, tokens, {self.qkv.in_features}), "
                f"got {list(x.shape)}"
            )
        b, n, _ = x.shape
        qkv = self.qkv(x).view(b, n, 3, self.heads, self.head_dim)
        qk = F.normalize(qkv[:, :, :2], dim=-1)  # normalise before the permute: contiguous rows
        q, k = qk.permute(2, 0, 3, 1, 4).contiguous()
        v = qkv[:, :, 2].transpose(1, 2).contiguous()
        if self.q_as_k:
            q = k
        offset = math.log(math.expm1(self.base_lr))  # softplus^-1(base_lr)
        if self.lr is not None:
            eta = F.softplus(self.lr(x) + offset).transpose(1, 2)
        else:
            eta = x.new_full((b, self.heads, n), self.base_lr)
        alpha = None
        if self.mom is not None:
            alpha = torch.sigmoid(self.mom(chunk_means(x, self.chunk))).transpose(1, 2)
        return TTTInputs(q, k, v, eta, alpha)

    def fast_weights(self, batch: int) -> FastWeights:
        def grow(p: torch.Tensor | None) -> torch.Tensor | None:
            return None if p is None else p.unsqueeze(0).expand(batch, *p.shape)

        return FastWeights(grow(self.w1), grow(self.w0), grow(self.w2))

    def readout(self, o: torch.Tensor) -> torch.Tensor:
        """Per-head RMS norm, heads concatenated, output projection: (B,H,L,d) -> (B,L,D)."""
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-6)  # opset 17 has no RMSNorm
        return self.out(o.transpose(1, 2).reshape(o.shape[0], o.shape[2], -1))

    def default_form(self) -> str:
        return "chunked" if "chunked" in self.variant.forms else "recurrent"

    def forward(
        self, x: torch.Tensor, form: str | None = None, inner_steps: int = 1
    ) -> torch.Tensor:
        """``x`` (B, L, d_model) -> (B, L, d_model) computed in ``form`` (default: fastest)."""
        form = form or self.default_form()
        inputs, fast = self.project(x), self.fast_weights(x.shape[0])
        if inner_steps != 1 and form != "recurrent":
            raise ValueError("inner_steps != 1 is a probe of the recurrent form only")
        if form == "recurrent":
            o = ttt_recurrent(inputs, fast, self.variant, self.chunk, self.order, inner_steps)[0]
        elif form == "parallel":
            o = ttt_parallel(inputs, fast, self.variant, self.chunk, self.order)
        elif form == "chunked":
            o = ttt_chunked(inputs, fast, self.variant, self.chunk, self.order, self.block)
        else:
            raise ValueError(f"form {form!r} is not one of recurrent, parallel, chunked")
        return self.readout(o)


def chunk_means(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """Mean of ``x`` (B, L, D) over each chunk (the last one may be shorter): (B, N, D)."""
    b, n, d = x.shape
    chunks = -(-n // chunk)
    padded = F.pad(x, (0, 0, 0, chunks * chunk - n))
    counts = torch.full((chunks,), float(chunk), dtype=x.dtype, device=x.device)
    counts[-1] = n - (chunks - 1) * chunk
    return padded.view(b, chunks, chunk, d).sum(2) / counts[:, None]


class TTTStreamingStep(nn.Module):
    """One token with explicit state: ``(x_t, S_t[, M_t]) -> (y_t, S_t+1[, M_t+1])``.

    Needs a token-level (chunk 1), update-then-apply layer with a static kernel and no weight
    norm; S is (batch, heads, d_hidden, d_v), M (momentum) the same shape.
    """

    def __init__(self, layer: TTTLayer) -> None:
        super().__init__()
        if layer.chunk != 1 or layer.order != "update_then_apply":
            raise ValueError(
                f"the streaming step is token-level update-then-apply; this layer "
                f"has chunk {layer.chunk} and order {layer.order!r}"
            )
        reason = layer.variant.supports("chunked")
        if reason is not None:
            raise ValueError(f"streaming step: {reason}")
        self.layer = layer

    @property
    def state_names(self) -> tuple[str, ...]:
        return ("S", "M") if self.layer.variant.momentum else ("S",)

    def init_state(self, batch: int) -> tuple[torch.Tensor, ...]:
        s0 = self.layer.w1.detach().unsqueeze(0).expand(batch, *self.layer.w1.shape).clone()
        return (s0, torch.zeros_like(s0)) if self.layer.variant.momentum else (s0,)

    def forward(self, x: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        layer = self.layer
        inp = layer.project(x.unsqueeze(1))
        fast = layer.fast_weights(x.shape[0])._replace(w1=state[0])
        alpha = None if inp.alpha is None else inp.alpha[:, :, 0]
        mom = state[1] if len(state) > 1 else None
        o, s, m = streaming_step(
            inp.q[:, :, 0],
            inp.k[:, :, 0],
            inp.v[:, :, 0],
            inp.eta[:, :, 0],
            alpha,
            fast,
            mom,
            layer.variant,
        )
        y = layer.readout(o.unsqueeze(2))[:, 0]
        return (y, s) if m is None else (y, s, m)


class TTTParallelForm(nn.Module):
    """The whole sequence at once, ``x`` (B, L, d_model) -> y, in the masked parallel form."""

    def __init__(self, layer: TTTLayer, form: str = "parallel") -> None:
        super().__init__()
        self.layer, self.form = layer, form

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x, form=self.form)


class SlidingWindowAttention(nn.Module):
    """Causal softmax attention over the last ``window`` tokens (LaCT's intra-chunk context)."""

    def __init__(self, d_model: int, heads: int, window: int) -> None:
        super().__init__()
        self.heads, self.window = heads, window
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        pos = torch.arange(n, device=x.device)
        band = (pos[:, None] >= pos[None, :]) & (pos[:, None] - pos[None, :] < self.window)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=band)
        return self.out(o.transpose(1, 2).reshape(b, n, d))


class TTTBlock(nn.Module):
    """``x + TTT(n(x)) + SWA(n(x))``, then ``+ SwiGLU-MLP(n(x))`` (pre-norm, LaCT's layout)."""

    def __init__(self, d_model: int, heads: int, layer: TTTLayer, window: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(d_model), nn.RMSNorm(d_model)
        self.ttt, self.swa = layer, SlidingWindowAttention(d_model, heads, window)
        self.up = nn.Linear(d_model, 4 * d_model, bias=False)
        self.down = nn.Linear(2 * d_model, d_model, bias=False)

    def forward(
        self, x: torch.Tensor, form: str | None = None, inner_steps: int = 1
    ) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.ttt(h, form, inner_steps) + self.swa(h)
        gate, value = self.up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * value)


class TTTLanguageModel(nn.Module):
    """Token embedding, TTT blocks, final norm and a linear head: (B, L) ids -> (B, L, vocab)."""

    def __init__(
        self,
        vocab: int,
        d_model: int,
        layers: int,
        heads: int,
        head_dim: int,
        variant: str | TTTVariant,
        chunk: int,
        order: str,
        window: int,
        q_as_k: bool = False,
        block: int | None = None,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(
            TTTBlock(
                d_model,
                heads,
                TTTLayer(d_model, heads, head_dim, variant, chunk, order, q_as_k=q_as_k),
                window,
            )
            for _ in range(layers)
        )
        self.norm, self.head = nn.RMSNorm(d_model), nn.Linear(d_model, vocab, bias=False)

    def forward(
        self, tokens: torch.Tensor, form: str | None = None, inner_steps: int = 1
    ) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, form, inner_steps)
        return self.head(self.norm(x))
