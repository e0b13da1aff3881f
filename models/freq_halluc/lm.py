"""The white-box language model of halluc.freq_attention and its in-context recall task.

A tiny causal transformer (pre-LayerNorm, learned positions, eager attention that returns its
weights) trained on in-context key -> value recall, the offline stand-in for RAG answering: the
context is ``pairs`` shuffled ``k v`` pairs, then the answer marker SEP, then ``queries`` turns
``Q k v``. Training asks only for keys that are in the context, so the model learns to copy; at
test time half the queried keys are absent, and whatever value the model then samples is
unsupported by its context, as a RAG answer's invented fact is. A generated value is
*hallucinated* iff the pair (k, v) is not in the context (a wrong value for a present key
counts too), so labels come from the model's own samples, as RAGTruth's do.

Layout of one sequence (``RecallTask.length`` tokens): BOS, k1 v1 ... kP vP, SEP, then per query
Q k v. ``context_length`` = 1 + 2P (BOS + the document, the paper's context); SEP and the
response are the "new tokens". The value of query j is emitted by the position of its key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from neuroedge.divergence import check_loss
from neuroedge.seeding import seeded
from torch import nn


@dataclass(frozen=True)
class RecallTask:
    """Vocabulary and layout: key ids 0..keys-1, value ids keys..keys+values-1, then SEP, Q,
    BOS."""

    keys: int = 32
    values: int = 32
    pairs: int = 8
    queries: int = 4

    def __post_init__(self) -> None:
        if not (1 <= self.pairs < self.keys and self.values >= 2 and self.queries >= 1):
            raise ValueError(
                f"RecallTask: need 1 <= pairs < keys, values >= 2 and queries >= 1, got {self}"
            )

    @property
    def sep(self) -> int:
        return self.keys + self.values

    @property
    def q(self) -> int:
        return self.sep + 1

    @property
    def bos(self) -> int:
        return self.sep + 2

    @property
    def vocab(self) -> int:
        return self.sep + 3

    @property
    def context_length(self) -> int:
        return 1 + 2 * self.pairs

    @property
    def length(self) -> int:
        return self.context_length + 1 + 3 * self.queries

    def value_positions(self) -> np.ndarray:
        """Positions of the queries' value tokens (the emitting position is one before)."""
        return self.context_length + 1 + 3 * np.arange(self.queries) + 2

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def sample_sequences(
    task: RecallTask, rng: np.random.Generator, n: int, absent_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` sequences ``[n, length]`` int64 and which queried keys are in the context
    ``[n, queries]``. A present key's turn holds its context value; an absent key's turn holds a
    random value (a fabricated answer, replaced when the model generates its own)."""
    ids = np.empty((n, task.length), np.int64)
    present = rng.random((n, task.queries)) >= absent_fraction
    for b in range(n):
        keys = rng.choice(task.keys, task.pairs, replace=False)
        vals = task.keys + rng.integers(0, task.values, task.pairs)
        others = np.setdiff1d(np.arange(task.keys), keys)
        ctx = np.empty(2 * task.pairs, np.int64)
        ctx[0::2], ctx[1::2] = keys, vals
        turns = []
        for j in range(task.queries):
            if present[b, j]:
                i = rng.integers(task.pairs)
                turns += [task.q, keys[i], vals[i]]
            else:
                turns += [task.q, rng.choice(others), task.keys + rng.integers(task.values)]
        ids[b] = [task.bos, *ctx, task.sep, *turns]
    return ids, present


def unsupported(task: RecallTask, ids: np.ndarray) -> np.ndarray:
    """``[n, queries]`` bool: the turn's (key, value) pair is not in the sequence's context."""
    ctx = ids[:, 1 : task.context_length]
    pairs = {
        (b, int(k), int(v)) for b in range(len(ids)) for k, v in zip(ctx[b, 0::2], ctx[b, 1::2])
    }
    pos = task.value_positions()
    keys, vals = ids[:, pos - 1], ids[:, pos]
    return np.array(
        [
            [(b, int(keys[b, j]), int(vals[b, j])) not in pairs for j in range(task.queries)]
            for b in range(len(ids))
        ]
    )


class Block(nn.Module):
    """Pre-LN block whose causal attention returns its weights ``[batch, heads, T, T]``."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.out = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        attn = scores.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.out((attn @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x)), attn


class RecallLM(nn.Module):
    """Causal transformer LM; ``forward(ids) -> (logits, [attention per layer])``."""

    def __init__(
        self, vocab: int, length: int, d_model: int = 64, heads: int = 4, layers: int = 2
    ) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not a multiple of heads {heads}")
        self.sizes = {"d_model": d_model, "heads": heads, "layers": layers}
        self.embed, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(length, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        attentions = []
        for block in self.blocks:
            x, attn = block(x)
            attentions.append(attn)
        return self.head(self.ln(x)), attentions


def train_lm(
    task: RecallTask,
    cfg: Mapping[str, Any],
    seed: int,
    progress: Callable[[int], None] | None = None,
) -> tuple[RecallLM, list[float]]:
    """AdamW on the value tokens of sequences whose queried keys are all present; ``cfg`` holds
    d_model, heads, layers, steps (at most), batch, lr and stop_loss: training stops once the
    mean loss of the last 50 steps is below it (0: never). Recall is learnt in a sudden drop
    (an induction circuit forming) whose step varies by seed, 400 to 950 steps at the
    defaults. Returns the model (eval mode) and the loss of every step run; TrainingDiverged
    at the first NaN or infinite loss (the one each step reads anyway), naming lr."""
    with seeded(seed):
        rng = np.random.default_rng(seed)
        model = RecallLM(task.vocab, task.length, cfg["d_model"], cfg["heads"], cfg["layers"])
        opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
        pos = torch.as_tensor(task.value_positions())
        losses = []
        for step in range(1, cfg["steps"] + 1):
            ids = torch.as_tensor(sample_sequences(task, rng, cfg["batch"], 0.0)[0])
            logits, _ = model(ids[:, :-1])
            loss = nn.functional.cross_entropy(
                logits[:, pos - 1].flatten(0, 1), ids[:, pos].flatten()
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
            where = f"halluc.freq_attention LM training step {step}"
            losses.append(check_loss(loss.detach(), where, ("lr",)))
            if progress is not None:
                progress(1)
            if len(losses) >= 50 and np.mean(losses[-50:]) < cfg["stop_loss"]:
                break
        return model.eval(), losses


@torch.no_grad()
def generate(
    model: RecallLM, task: RecallTask, ids: np.ndarray, temperature: float, seed: int
) -> np.ndarray:
    """``ids`` with each turn's value replaced by one the model samples (over the value ids, at
    ``temperature``; 0 = greedy) given everything before it, turn by turn. The logits are
    shifted by their maximum before the division (in float64 below float32's range): a tiny
    temperature (1e-300) then samples the argmax, as its limit does, where logits / temperature
    overflowed to inf - inf = NaN, a RuntimeError out of multinomial."""
    out = torch.as_tensor(ids).clone()
    gen = torch.Generator().manual_seed(seed)
    for p in task.value_positions():
        logits = model(out[:, :p])[0][:, -1, task.keys : task.keys + task.values]
        if temperature == 0:
            choice = logits.argmax(-1)
        else:
            shifted = logits - logits.amax(-1, keepdim=True)
            if temperature < torch.finfo(shifted.dtype).tiny:  # 0 in float32: 0 / 0 is NaN
                shifted = shifted.double()
            probs = (shifted / temperature).softmax(-1)
            choice = torch.multinomial(probs, 1, generator=gen)[:, 0]
        out[:, p] = task.keys + choice
    return out.numpy()


@torch.no_grad()
def attention_rows(model: RecallLM, ids: np.ndarray) -> list[np.ndarray]:
    """One teacher-forced forward of whole sequences: per layer ``[n, heads, T, T]`` float64.
    Causal, so row p equals what the model attended to when it emitted token p + 1."""
    return [a.double().numpy() for a in model(torch.as_tensor(ids))[1]]
