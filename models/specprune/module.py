"""A small VLA policy with the OpenVLA-OFT shape, and the in-graph token pruning.

Token sequence (positions in brackets), as in OpenVLA-OFT with the proprio token after the
patches::

    [primary patches 0..63][wrist patches 64..127][proprio 128][instruction 129..136]
    [action queries 137..140]

* Vision: each 64x64 view is cut into 8x8 patches, embedded linearly with learned position and
  view embeddings, then ``vit_depth`` pre-norm ViT blocks per view (shared weights). The trained
  policy uses 0 (a light patch embedding): the decoder then holds most of the compute, as the
  7B Llama does in OpenVLA-OFT, which is the regime token pruning is meant for.
* Decoder: Llama-style blocks (RMSNorm, rotary position embedding, SwiGLU MLP). Attention is
  causal over the prefix; the action queries attend to everything, each other included
  (OFT's parallel decoding): allowed(q, k) = pos_k <= pos_q or q is an action query.
* Head: an MLP regresses one action (dx, dy, dz, grip) from each action query (L1 loss).
* Attention is written out (softmax(QK^T/sqrt(d) + bias) V) rather than the fused kernel: at
  L <= 141 tokens it is faster on a CPU, its cost falls with L^2 as tokens are pruned, and the
  task score reads the same probabilities.

Pruning runs inside ``forward`` with static sizes (TopK + Gather), so one exported graph per
controller mode has fixed token budgets. Retained tokens keep their original positions for
RoPE and the mask. ``method`` selects the rule applied after layer 1:

* ``unpruned``: none.
* ``specprune``: V_global u V_dynamic (given as ``prior`` > 0) u V_local (per-view top-K at
  layers 0 and 1), filled to the budget by the layer-1 score; then EMA rank-confidence pruning
  at ``dynamic_layers``. The EMA is updated at layers 0, 1 and the layer before each pruning
  layer (the released code uses {0, 1, 12}); scoring every layer would add ops whose result
  nobody reads, and on a CPU at this size per-op overhead is what pruning must beat. The last
  layer's score is kept for the next step's global set.
* ``fastv``: FastV (Chen et al. 2024): the tokens receiving the most attention (averaged over
  all query rows and heads) at layer 1 (FastV's K=2).
* ``random``: the highest ``prior`` (the caller passes uniform noise).

Graph economy (at this size ORT's per-node cost, not FLOPs, is what pruning must beat; none
of these changes which tokens are kept, see tests/test_specprune_graph.py):

* Kept visual tokens stay sorted by position (the dynamic TopK is followed by a sort), so the
  attention bias is a function of the sequence length only and folds to a constant per stage;
  RoPE rows are gathered by position from the table of the full sequence.
* The rank weights of eq. 6 are a constant vector per N scattered in score order (one TopK
  instead of a double argsort), the head mean and the instruction-row mean of eq. 1 are one
  weighted sum, the first EMA update from 0 is a scaling, and q and k are rotated together.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from neuroedge.models.specprune.functional import PruneConfig, ema, rank_confidence_score
from torch import nn

METHODS = ("unpruned", "specprune", "fastv", "random")


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(pos: torch.Tensor, half: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [B, 1, L, 2 half] of RoPE angles a = pos * 10000^(-i/half), laid out for
    ``rotary``: (cos a, cos a) and (-sin a, sin a); built once per forward (pruned stages gather
    rows of it by position)."""
    steps = torch.arange(half, dtype=torch.float32, device=pos.device)
    freq = torch.exp(-math.log(10000.0) * steps / half)
    ang = pos.to(torch.float32)[:, None, :, None] * freq
    cos, sin = torch.cos(ang), torch.sin(ang)
    return torch.cat([cos, cos], -1), torch.cat([-sin, sin], -1)


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on x [..., L, Dh]: (x1 cos - x2 sin, x1 sin + x2 cos) written as
    x * (cos, cos) + (x2, x1) * (-sin, sin), the same floating-point operations in fewer
    graph nodes (q and k are rotated together)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([x[..., half:], x[..., :half]], dim=-1) * sin


class LlamaBlock(nn.Module):
    """Pre-norm block; ``forward`` also returns the attention probabilities [B, H, R, L] of
    query ``rows``."""

    def __init__(self, dim: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.gate_up = nn.Linear(dim, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, dim, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        bias: torch.Tensor,
        rows: slice | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        q, k = rotary(qkv[:2], *rope).unbind(0)
        v = qkv[2]
        # Explicit attention: at these lengths (L <= 141) it is faster on a CPU than the fused
        # kernel, its cost follows L^2 as tokens are pruned, and the probabilities it forms
        # are the ones the task score reads (no second pass over the scored rows).
        attn = torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5 + bias, dim=-1)
        y = attn @ v
        x = x + self.out(y.transpose(1, 2).reshape(b, n, d))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        x = x + self.down(F.silu(gate) * up)
        return x, (None if rows is None else attn[:, :, rows])


class ViTBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class VLAPolicy(nn.Module):
    """(primary, wrist, proprio, text, prior) -> (actions [B, C, 4], scores [B, 2P]).

    ``scores`` is the last layer's task-attention score of every visual token (0 where pruned),
    the global-set source of the next inference.
    """

    def __init__(
        self,
        vocab: int,
        image: int = 64,
        patch: int = 8,
        dim: int = 128,
        heads: int = 4,
        depth: int = 6,
        ffn: int = 352,
        chunk: int = 4,
        text_len: int = 8,
        proprio: int = 4,
        action: int = 4,
        vit_depth: int = 1,
    ) -> None:
        super().__init__()
        self.config = {
            "vocab": vocab,
            "image": image,
            "patch": patch,
            "dim": dim,
            "heads": heads,
            "depth": depth,
            "ffn": ffn,
            "chunk": chunk,
            "text_len": text_len,
            "proprio": proprio,
            "action": action,
            "vit_depth": vit_depth,
        }
        self.patch, self.per_view = patch, (image // patch) ** 2
        self.n_visual = 2 * self.per_view
        self.text0 = self.n_visual + 1
        self.action0 = self.text0 + text_len
        self.patch_embed = nn.Linear(3 * patch * patch, dim)
        self.patch_pos = nn.Parameter(torch.randn(2, self.per_view, dim) * 0.02)
        self.vit = nn.Sequential(*(ViTBlock(dim, heads) for _ in range(vit_depth)))
        self.proprio_embed = nn.Linear(proprio, dim)
        self.text_embed = nn.Embedding(vocab, dim)
        self.queries = nn.Parameter(torch.randn(chunk, dim) * 0.02)
        self.blocks = nn.ModuleList(LlamaBlock(dim, heads, ffn) for _ in range(depth))
        self.norm = RMSNorm(dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, action))
        self.method, self.budget, self.k_local = "unpruned", self.n_visual, 0
        self.prune = PruneConfig()
        self.record: list[torch.Tensor] | None = None  # eager only: kept positions per stage

    def configure(
        self, method: str, budget: int = 0, k_local: int = 0, prune: PruneConfig | None = None
    ) -> VLAPolicy:
        """Select the pruning rule and the static budget (visual tokens kept after layer 1)."""
        if method not in METHODS:
            raise ValueError(f"method {method!r} is not one of {METHODS}")
        if method != "unpruned" and not 0 < budget <= self.n_visual:
            raise ValueError(f"budget {budget} must be in 1..{self.n_visual}")
        self.prune = (prune or self.prune).check_geometry(self.per_view)
        if not 0 <= k_local <= self.per_view:
            raise ValueError(f"k_local {k_local} must be in 0..{self.per_view}")
        self.method, self.budget, self.k_local = method, budget, k_local
        return self

    def embed(
        self, primary: torch.Tensor, wrist: torch.Tensor, proprio: torch.Tensor, text: torch.Tensor
    ) -> torch.Tensor:
        views = torch.stack([primary, wrist], 1).float() / 255.0 - 0.5  # [B, 2, H, W, 3]
        b, _, h, w, c = views.shape
        p = self.patch
        patches = views.reshape(b, 2, h // p, p, w // p, p, c).permute(0, 1, 2, 4, 3, 5, 6)
        tokens = self.patch_embed(patches.reshape(b, 2, self.per_view, -1)) + self.patch_pos
        tokens = self.vit(tokens.reshape(b * 2, self.per_view, -1)).reshape(b, self.n_visual, -1)
        queries = self.queries.expand(b, -1, -1)
        return torch.cat(
            [tokens, self.proprio_embed(proprio)[:, None], self.text_embed(text), queries], dim=1
        )

    def bias(self, length: int) -> torch.Tensor:
        """Additive attention bias [1, 1, L, L] of a position-sorted sequence of ``length``
        tokens ending in the action queries: 0 where k <= q or q is an action query, -inf
        elsewhere. Kept tokens stay sorted by position, so pos_k <= pos_q iff k <= q and the
        bias depends on L alone (a constant of each exported graph)."""
        i = torch.arange(length, device=self.queries.device)
        allowed = (i[None, :] <= i[:, None]) | (i[:, None] >= length - self.queries.shape[0])
        zeros = torch.zeros(length, length, device=i.device)
        return zeros.masked_fill(~allowed, float("-inf"))[None, None]

    def rope(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return rope_tables(pos, self.config["dim"] // self.config["heads"] // 2)

    def forward(
        self,
        primary: torch.Tensor,
        wrist: torch.Tensor,
        proprio: torch.Tensor,
        text: torch.Tensor,
        prior: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.embed(primary, wrist, proprio, text)
        b, n, _ = x.shape
        pos = torch.arange(n, device=x.device).expand(b, n)
        nv = self.n_visual  # visual tokens in x: always the first nv entries
        text_rows = slice(self.text0 - n, self.action0 - n)  # counted from the end: stable
        text_weight = self.text_weight(text)
        importance = score = received = torch.zeros(b, nv, device=x.device)
        local = torch.zeros(b, nv, dtype=torch.bool, device=x.device)
        spec = self.method == "specprune"
        depth = len(self.blocks)
        ema_layers = {0, 1, *(layer - 1 for layer in self.prune.dynamic_layers if layer < depth)}
        cos, sin = self.rope(pos[:1])
        table, rope, mask = (cos[0, 0], sin[0, 0]), (cos, sin), self.bias(n)
        for layer, block in enumerate(self.blocks):
            keep = None
            if layer == 2 and self.method != "unpruned":
                keep = self.static_keep(local, prior, received, score)
            elif spec and layer in self.prune.dynamic_layers:
                keep_n = max(1, math.ceil(self.prune.dynamic_keep * nv))
                keep = torch.sort(torch.topk(importance, keep_n, dim=-1).indices, -1).values
            if keep is not None:  # the kept visual tokens, sorted by position
                x, pos, importance = _gather(x, pos, importance, keep, nv)
                nv = keep.shape[1]
                rope, mask = (table[0][pos][:, None], table[1][pos][:, None]), self.bias(x.shape[1])
                if self.record is not None:
                    self.record.append(pos[:, :nv])
            fastv_layer = self.method == "fastv" and layer == 1
            scored = spec and (layer in ema_layers or layer == depth - 1)
            rows = slice(None) if fastv_layer else text_rows if scored else None
            x, attn = block(x, rope, mask, rows)
            if fastv_layer:  # FastV: attention received from every query row
                received = attn.mean(1).mean(1)[:, :nv]
            elif attn is not None:
                score = (attn[..., :nv] * text_weight).sum((1, 2))  # eq. 1
            if spec and layer in ema_layers:
                s = rank_confidence_score(score, eps=self.prune.eps)
                importance = (
                    self.prune.beta * s if layer == 0 else ema(importance, s, self.prune.beta)
                )
                if layer < 2:
                    local = local | self.per_view_top(score)
        actions = self.head(self.norm(x[:, -self.queries.shape[0] :]))
        scores = torch.zeros(b, self.n_visual, device=x.device)
        if spec:
            scores = scores.scatter(1, pos[:, :nv], score)
        return actions, scores

    def text_weight(self, text: torch.Tensor) -> torch.Tensor:
        """[B, 1, m, 1] weights of eq. 1: 1/(H m') on the m' non-padding instruction rows, so
        that summing attention rows x weight over heads and rows is the task score."""
        weight = (text != 0).to(torch.float32)
        count = weight.sum(1, keepdim=True).clamp(min=1.0) * self.config["heads"]
        return (weight / count)[:, None, :, None]

    def per_view_top(self, score: torch.Tensor) -> torch.Tensor:
        """Membership mask of the top-k_local tokens of each view (layers 0/1: all present)."""
        b = score.shape[0]
        if self.method != "specprune" or self.k_local <= 0:
            return torch.zeros(b, self.n_visual, dtype=torch.bool, device=score.device)
        views = score.view(b, 2, self.per_view)
        top = torch.topk(views, self.k_local, dim=-1).indices
        hit = torch.zeros(b, 2, self.per_view, device=score.device).scatter(2, top, 1.0)
        return hit.view(b, self.n_visual) > 0

    def static_keep(
        self, local: torch.Tensor, prior: torch.Tensor, received: torch.Tensor, score: torch.Tensor
    ) -> torch.Tensor:
        """Sorted indices of the ``budget`` visual tokens kept from layer 2 on."""
        if self.method == "specprune":
            member = (local | (prior > 0)).to(score.dtype)
            priority = 2.0 * member + score / score.amax(-1, keepdim=True).clamp(min=1e-12)
        elif self.method == "fastv":
            priority = received
        else:
            priority = prior
        keep = torch.topk(priority, self.budget, dim=-1).indices
        return torch.sort(keep, dim=-1).values


def _gather(
    x: torch.Tensor, pos: torch.Tensor, importance: torch.Tensor, keep: torch.Tensor, nv: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keep visual entries ``keep`` (indices into the first nv tokens) and all non-visual ones."""
    b, n, d = x.shape
    rest = torch.arange(nv, n, device=x.device).expand(b, n - nv)
    index = torch.cat([keep, rest], dim=1)
    x = torch.gather(x, 1, index[:, :, None].expand(-1, -1, d))
    return x, torch.gather(pos, 1, index), torch.gather(importance, 1, keep)
