"""Grad-Transformer (Nguyen et al., ICML 2026): learn to turn a small model's fine-tuning
update into a large model's, so a client that fine-tunes only the small model on its private
data (on the edge) lets the provider update the large one without the data.

Offline task family (research/host_llm_papers.md section 5.3): x in R^8 ~ N(0, I), a task is
y = w . tanh(B x) + 0.05 eps with w ~ N(0, I_8) per task and B = 2 N(0, 1) / sqrt(8) fixed. The
*small* model is linear on [x, 1] (9 parameters); the *large* one is a linear head over
pretrained features [tanh(B x), tanh(R x), 1] (65 parameters; R adds 56 random features), the
stand-in for a low-dimensional (LoRA-like) update of a strong pretrained model. Both are
fine-tuned from zero by ``gd_steps`` full-batch gradient steps (lr ``gd_lr``); an update is the
parameter vector minus its start (zero), and the last ``iterates`` iterates of each shadow task
give (small, large) update pairs.

Block tokens: the small update is one token of 9; the large one is 4 tokens (17, 16, 16, 16
parameters, zero-padded to 17). The Grad-Transformer is an encoder-decoder (``nn.Transformer``)
with linear token embeddings, learned positions and a BOS token, trained by teacher forcing on
the MSE of standardised tokens and run autoregressively (its own predictions fed back).

PGR (performance gap recovered) = (P_gen - P_S) / (P_T - P_S) with P = -test MSE averaged over
the private tasks: 1 = as good as fine-tuning the large model on the data itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

D_IN, D_EXTRA = 8, 56
SMALL, LARGE = D_IN + 1, D_IN + D_EXTRA + 1  # 9 and 65 parameters
LARGE_BLOCKS = (17, 16, 16, 16)
TOKEN = max(SMALL, *LARGE_BLOCKS)  # 17
MAX_STANDARDISED = 1e15  # |(delta - mean) / std| the float32 generator takes (see generate)


@dataclass(frozen=True)
class Family:
    """The fixed projections of the task family (seeded)."""

    b: np.ndarray  # [8, 8]
    r: np.ndarray  # [56, 8]

    @classmethod
    def make(cls, seed: int) -> Family:
        rng = np.random.default_rng(seed)
        return cls(
            2 * rng.standard_normal((D_IN, D_IN)) / np.sqrt(D_IN),
            2 * rng.standard_normal((D_EXTRA, D_IN)) / np.sqrt(D_IN),
        )

    def task(
        self, rng: np.random.Generator, n: int, w: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((n, D_IN))
        return x, np.tanh(x @ self.b.T) @ w + 0.05 * rng.standard_normal(n)

    def small_features(self, x: np.ndarray) -> np.ndarray:
        return np.hstack([x, np.ones((len(x), 1))])

    def large_features(self, x: np.ndarray) -> np.ndarray:
        return np.hstack([np.tanh(x @ self.b.T), np.tanh(x @ self.r.T), np.ones((len(x), 1))])


def gd_iterates(feats: np.ndarray, y: np.ndarray, steps: int, lr: float, keep: int) -> np.ndarray:
    """Full-batch gradient descent on the mean squared error from zero: the last ``keep``
    iterates ``[keep, params]``."""
    theta = np.zeros(feats.shape[1])
    out = []
    for step in range(steps):
        theta = theta - lr * 2 * feats.T @ (feats @ theta - y) / len(y)
        if step >= steps - keep:
            out.append(theta.copy())
    return np.stack(out)


def mse(feats: np.ndarray, theta: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((feats @ theta - y) ** 2))


def large_tokens(delta: np.ndarray) -> np.ndarray:
    """``[n, 65]`` -> ``[n, 4, 17]`` (blocks zero-padded)."""
    out = np.zeros((len(delta), len(LARGE_BLOCKS), TOKEN))
    start = 0
    for j, size in enumerate(LARGE_BLOCKS):
        out[:, j, :size] = delta[:, start : start + size]
        start += size
    return out


def from_large_tokens(tokens: np.ndarray) -> np.ndarray:
    """The inverse of ``large_tokens`` (padding dropped)."""
    return np.concatenate([tokens[:, j, :size] for j, size in enumerate(LARGE_BLOCKS)], 1)


def small_tokens(delta: np.ndarray) -> np.ndarray:
    """``[n, 9]`` -> ``[n, 1, 17]``."""
    out = np.zeros((len(delta), 1, TOKEN))
    out[:, 0, :SMALL] = delta
    return out


class GradTransformer(nn.Module):
    """Encoder over the small update's tokens, decoder over the large update's (teacher forcing
    in ``forward``, autoregressive in ``generate``); tokens standardised by ``mean``/``std``."""

    def __init__(self, d_model: int = 64, heads: int = 4, layers: int = 2, ff: int = 128) -> None:
        super().__init__()
        self.embed_s, self.embed_t = nn.Linear(TOKEN, d_model), nn.Linear(TOKEN, d_model)
        self.pos_s = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_t = nn.Parameter(torch.zeros(1, len(LARGE_BLOCKS), d_model))
        self.bos = nn.Parameter(torch.zeros(1, 1, d_model))
        self.core = nn.Transformer(
            d_model, heads, layers, layers, ff, dropout=0.0, batch_first=True
        )
        self.out = nn.Linear(d_model, TOKEN)
        for name in ("s_mean", "s_std", "t_mean", "t_std"):
            self.register_buffer(name, torch.zeros(TOKEN) if "mean" in name else torch.ones(TOKEN))

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Standardised src ``[n, 1, 17]`` and target tokens shifted right ``[n, k, 17]``
        (k <= 4) -> predicted standardised target tokens ``[n, k + 1, 17]``."""
        memory_in = self.embed_s(src) + self.pos_s
        k = tgt_in.shape[1]
        dec = torch.cat([self.bos.expand(len(src), -1, -1), self.embed_t(tgt_in)], 1)
        dec = dec + self.pos_t[:, : k + 1]
        mask = nn.Transformer.generate_square_subsequent_mask(k + 1)
        return self.out(self.core(memory_in, dec, tgt_mask=mask, tgt_is_causal=True))

    @torch.no_grad()
    def generate(self, delta_small: np.ndarray) -> np.ndarray:
        """``[n, 9]`` small updates -> ``[n, 65]`` large updates, token by token. ValueError
        for an update whose standardised value exceeds ``MAX_STANDARDISED``: the float32 layer
        norms square it, and from ~1e19 the square overflows (the output was all NaN)."""
        tokens = small_tokens(delta_small)
        z = (tokens - self.s_mean.double().numpy()) / self.s_std.double().numpy()
        far = np.abs(z).max(axis=(1, 2))  # per row, in float64
        if (far > MAX_STANDARDISED).any():
            row = int(np.argmax(far > MAX_STANDARDISED))
            raise ValueError(
                f"delta_small: row {row} lies {far[row]:.3g} standard deviations from the "
                f"updates the generator learnt (at most {MAX_STANDARDISED:g}: its float32 "
                "layer norms square the values)"
            )
        src = (  # as trained: standardised in float32
            torch.as_tensor(tokens, dtype=torch.float32) - self.s_mean
        ) / self.s_std
        tokens = torch.zeros(len(src), 0, TOKEN)
        pad = -self.t_mean / self.t_std  # a zero padding entry, standardised as in training
        for size in LARGE_BLOCKS:
            nxt = self.forward(src, tokens)[:, -1:].clone()
            nxt[..., size:] = pad[size:]  # fed back as training saw it: padding, not a guess
            tokens = torch.cat([tokens, nxt], 1)
        return from_large_tokens((tokens * self.t_std + self.t_mean).double().numpy())
