"""Prefix-RFT on a sequence task small enough for a CPU: the task, the policy, the rollouts with
forced demonstration prefixes, the prefix-aware advantages and the three training arms.

Task (research/host_llm_papers.md section 6.4): a prompt is ``LENGTH`` digits from an alphabet
of ``DIGITS``; the answer is the prompt reversed, then EOS (``LENGTH + 1`` tokens); the reward
is 1 for an exact match of all of them. The demonstrations are systematically wrong: on prompts
whose first digit is below ``DIGITS // 2`` (half of them) the demonstrator swaps the last two
answer digits, so imitation learns the error and only the reward can correct it. ``HELD_OUT``
prompts of the ``DIGITS ** LENGTH`` are never drawn for training; the test set is drawn from
them.

Policy: a GRU encoder-decoder (hidden 128), the decoder fed the previous answer token. The
"base model" is a short SFT run on *clean* demonstrations: a weak policy with non-zero sampled
success, which both RL arms need (section 6.4).

Arms, each ``steps`` Adam steps from the same base:

* ``sft``: cross-entropy on the biased demonstrations.
* ``rft``: per prompt ``rollouts`` on-policy samples; Dr.GRPO advantage A = r - mean of the
  prompt's group (no division by the std); every generated token of a row gets its row's A.
* ``prefix_rft``: ``rollouts - 1`` on-policy samples plus one hybrid: the first
  L = floor(l * (LENGTH + 1)) tokens forced from the demonstration, l ~ U(low, high), high
  constant, low decaying by cosine from ``low_init`` to ``low_target`` over the steps; the
  policy samples the rest. Advantages as in the authors' ``compute_dr_grpo_prefix_outcome_
  advantage``: groups are (prompt, prefix id), so the on-policy rows get r - their mean, the
  hybrid row (a group of one, mean 0) gets A = r on its sampled tokens, and its prefix tokens
  get (r_hybrid - mean of the on-policy rewards) / (hybrid rows per prompt = 1). Entropy
  clipping: all prefix tokens in the batch sorted by entropy under the current policy (a
  stable sort: ties in the order of the batch), the lowest floor(``mask_ratio`` x count) get
  advantage 0 (the paper keeps the top 20 %).

Loss: one gradient step per batch, so the PPO ratio is 1 and its clip is inactive; the loss is
-sum_tokens(A log pi) / rows - ``entropy_coeff`` * mean entropy. Summing over a row's tokens
(not the Dr.GRPO constant max-tokens normaliser) follows section 6.4, where that normaliser
made the RL gradient about 8x too small in this toy. Tokens after a row's first EOS carry no
loss.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from neuroedge.divergence import check_loss
from torch import nn

DIGITS, LENGTH = 6, 6
EOS = DIGITS  # answer token ids: digits 0..5, EOS 6
BOS = DIGITS + 1  # decoder input at step 0
TOKENS = LENGTH + 1
HELD_OUT = 4000  # prompts kept out of training (the test set is drawn from them)


class Policy(nn.Module):
    """GRU encoder-decoder over digit prompts; ``forward`` gives teacher-forced logits."""

    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.embed_prompt = nn.Embedding(DIGITS, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.embed_answer = nn.Embedding(DIGITS + 2, hidden)
        self.decoder = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, DIGITS + 1)

    def encode(self, prompts: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.embed_prompt(prompts))[1]

    def forward(self, prompts: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        """Logits [batch, TOKENS, DIGITS + 1] of each answer token given the ones before."""
        inputs = torch.cat([torch.full_like(answers[:, :1], BOS), answers[:, :-1]], 1)
        out, _ = self.decoder(self.embed_answer(inputs), self.encode(prompts))
        return self.head(out)

    @torch.no_grad()
    def generate(
        self,
        prompts: torch.Tensor,
        prefix: torch.Tensor | None = None,
        prefix_len: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        greedy: bool = False,
    ) -> torch.Tensor:
        """Answers [batch, TOKENS]: position t < prefix_len[row] is forced to prefix[row, t],
        the rest sampled (temperature 1) or greedy."""
        h = self.encode(prompts)
        token = torch.full((len(prompts), 1), BOS, dtype=torch.int64)
        out = []
        for t in range(TOKENS):
            step, h = self.decoder(self.embed_answer(token), h)
            logits = self.head(step[:, 0])
            if greedy:
                nxt = logits.argmax(-1)
            else:
                nxt = torch.multinomial(logits.softmax(-1), 1, generator=generator)[:, 0]
            if prefix is not None and prefix_len is not None:
                nxt = torch.where(t < prefix_len, prefix[:, t], nxt)
            out.append(nxt)
            token = nxt[:, None]
        return torch.stack(out, 1)


def index_prompts(index: np.ndarray) -> np.ndarray:
    """Prompt digits [n, LENGTH] of prompt numbers (base DIGITS, most significant first)."""
    powers = DIGITS ** np.arange(LENGTH - 1, -1, -1)
    return (np.asarray(index)[:, None] // powers) % DIGITS


def split(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(training prompt numbers, held-out prompt numbers) of a seed."""
    perm = np.random.default_rng(seed).permutation(DIGITS**LENGTH)
    return np.sort(perm[HELD_OUT:]), perm[:HELD_OUT]


def answers(prompts: torch.Tensor) -> torch.Tensor:
    """The correct answers: the prompt reversed, then EOS."""
    return torch.cat([prompts.flip(1), torch.full_like(prompts[:, :1], EOS)], 1)


def biased(prompts: torch.Tensor) -> torch.Tensor:
    """The biased demonstrator: the correct answer with its last two digits swapped on prompts
    whose first digit is below DIGITS // 2."""
    demo = answers(prompts)
    swap = prompts[:, 0] < DIGITS // 2
    demo[swap, LENGTH - 2], demo[swap, LENGTH - 1] = (
        demo[swap, LENGTH - 1].clone(),
        demo[swap, LENGTH - 2].clone(),
    )
    return demo


def reward(prompts: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """1.0 where every answer token is right, else 0.0."""
    return (out == answers(prompts)).all(1).float()


def live_mask(out: torch.Tensor) -> torch.Tensor:
    """True up to and including each row's first EOS (later tokens carry no loss)."""
    eos = (out == EOS).int()
    return (eos.cumsum(1) - eos) == 0


def token_stats(
    policy: Policy, prompts: torch.Tensor, out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log pi of each token of ``out`` [rows, TOKENS], entropy at each position)."""
    logp = policy(prompts, out).log_softmax(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return logp.gather(-1, out[..., None])[..., 0], entropy


def low_bound(step: int, steps: int, cfg: Mapping[str, Any]) -> float:
    """The cosine-decayed lower end of the prefix-length fraction at ``step``."""
    init, target = cfg["low_init"], cfg["low_target"]
    return target + (init - target) * 0.5 * (1 + math.cos(math.pi * min(step / steps, 1.0)))


def _as_tensor(name: str, value: Any) -> torch.Tensor:
    """``value`` as a tensor (numpy arrays and nested lists are converted); ValueError naming
    the argument otherwise."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (np.ndarray, list, tuple)):
        a = np.asarray(value)
        if a.dtype.kind in "biuf":
            return torch.as_tensor(a)
        raise ValueError(f"{name}: expected numbers, got a numpy array of dtype {a.dtype}")
    raise ValueError(f"{name}: expected a torch tensor or numpy array, got {type(value).__name__}")


def _check_advantage_inputs(
    r: Any, entropy: Any, prefix_len: Any, mask_ratio: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """``prefix_advantages``' inputs as tensors (integer rewards and entropies as floats) and
    ``mask_ratio`` as a float, or a ValueError naming the argument, its shape and the expected
    shape, or the bad value."""
    r, entropy = _as_tensor("rewards", r), _as_tensor("entropy", entropy)
    prefix_len = _as_tensor("prefix_len", prefix_len)
    if r.ndim != 2 or r.shape[0] < 1 or r.shape[1] < 2:
        raise ValueError(
            f"rewards: expected [prompts >= 1, rollouts >= 2] (on-policy rows, then the hybrid), "
            f"got {list(r.shape)}"
        )
    if not r.is_floating_point():
        r = r.to(torch.get_default_dtype())
    if not torch.isfinite(r).all():
        raise ValueError(f"rewards: {int((~torch.isfinite(r)).sum())} value(s) are NaN or inf")
    if entropy.ndim != 3 or entropy.shape[:2] != r.shape or entropy.shape[2] < 1:
        raise ValueError(
            f"entropy: expected [prompts, rollouts, T >= 1] = [{r.shape[0]}, {r.shape[1]}, T] "
            f"like rewards {list(r.shape)}, got {list(entropy.shape)}"
        )
    if not entropy.is_floating_point():
        entropy = entropy.to(r.dtype)
    if not torch.isfinite(entropy).all():
        raise ValueError(
            f"entropy: {int((~torch.isfinite(entropy)).sum())} value(s) are NaN or inf"
        )
    tokens = entropy.shape[2]
    if prefix_len.shape != (r.shape[0],):
        raise ValueError(
            f"prefix_len: expected [prompts] = [{r.shape[0]}], got {list(prefix_len.shape)}"
        )
    if prefix_len.is_floating_point() or prefix_len.is_complex() or prefix_len.dtype == torch.bool:
        raise ValueError(f"prefix_len: expected integer lengths, got dtype {prefix_len.dtype}")
    bad = (prefix_len < 0) | (prefix_len > tokens)
    if bad.any():
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"prefix_len: prompt {row} has prefix length {int(prefix_len[row])}, expected 0..T "
            f"= 0..{tokens}"
        )
    ok = isinstance(mask_ratio, (int, float, np.number)) and not isinstance(mask_ratio, bool)
    if not ok or not 0.0 <= float(mask_ratio) <= 1.0:
        raise ValueError(f"mask_ratio={mask_ratio!r}: expected a number in [0, 1]")
    return r, entropy, prefix_len, float(mask_ratio)


def prefix_advantages(
    r: torch.Tensor, entropy: torch.Tensor, prefix_len: torch.Tensor, mask_ratio: float = 0.8
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token advantages [prompts, rollouts, T] of a Prefix-RFT batch whose last rollout per
    prompt is the hybrid, and the prefix-token mask. Inputs: rewards [prompts, rollouts >= 2],
    the current policy's token entropies [prompts, rollouts, T] and the hybrid rows' integer
    prefix lengths [prompts] in 0..T (tensors, or numpy arrays, converted); ``mask_ratio`` in
    [0, 1] (the paper's 0.8 by default). ValueError naming the argument for a wrong shape, a
    NaN or inf, a length outside 0..T or a ratio outside [0, 1]. Any policy's rollouts will do:
    nothing here is specific to the task."""
    r, entropy, prefix_len, mask_ratio = _check_advantage_inputs(r, entropy, prefix_len, mask_ratio)
    tokens = entropy.shape[-1]
    on = r[:, :-1]
    adv = (on - on.mean(1, keepdim=True))[..., None].expand(-1, -1, tokens)
    hybrid = r[:, -1:, None].expand(-1, -1, tokens).clone()  # group of one: A = r
    in_prefix = torch.arange(tokens)[None, :] < prefix_len[:, None]
    off = (r[:, -1] - on.mean(1))[:, None].expand(-1, tokens)
    hybrid[:, 0] = torch.where(in_prefix, off, hybrid[:, 0])
    ent = entropy[:, -1][in_prefix]
    n_low = math.floor(mask_ratio * ent.numel())
    if n_low:  # as the notes (6.2, step 5): sort the batch's prefix tokens by entropy, zero
        # the lowest floor(mask_ratio x count); a stable sort breaks ties by position, so tied
        # entropies are masked too (a strict < quantile zeroed none of them)
        low = torch.zeros(ent.numel(), dtype=torch.bool)
        low[torch.argsort(ent, stable=True)[:n_low]] = True
        mask = torch.zeros_like(in_prefix)
        mask[in_prefix] = low
        hybrid[:, 0] = torch.where(mask, torch.zeros_like(off), hybrid[:, 0])
    prefix = torch.zeros(r.shape + (tokens,), dtype=torch.bool)
    prefix[:, -1] = in_prefix
    return torch.cat([adv, hybrid], 1), prefix


def rl_step(
    policy: Policy,
    opt: torch.optim.Optimizer,
    prompts: torch.Tensor,
    cfg: Mapping[str, Any],
    step: int,
    gen: torch.Generator,
    hybrid: bool,
) -> dict[str, float]:
    """One RFT (``hybrid`` False) or Prefix-RFT batch: rollouts, advantages, one Adam step.
    TrainingDiverged when its loss is NaN or infinite (read with the rewards, one read), or,
    for Prefix-RFT, when the policy's token entropies are (prefix_advantages' ValueError, a
    traceback, where the step before left the weights NaN)."""
    n, k = len(prompts), cfg["rollouts"]
    rep = prompts.repeat_interleave(k, 0)
    prefix_len = torch.zeros(n * k, dtype=torch.int64)
    lens = torch.zeros(n, dtype=torch.int64)
    if hybrid:
        lo = low_bound(step, cfg["steps"], cfg)
        frac = lo + (cfg["high"] - lo) * torch.rand(n, generator=gen)
        lens = (frac * TOKENS).floor().long()
        prefix_len[k - 1 :: k] = lens
    out = policy.generate(rep, biased(rep), prefix_len, gen)
    r = reward(rep, out).view(n, k)
    logp, entropy = token_stats(policy, rep, out)
    where = f"rl.prefix_rft {'Prefix-RFT' if hybrid else 'RFT'} step {step + 1}"
    keys = ("lr", "entropy_coeff", "grad_clip")
    if hybrid:
        # a NaN policy (the last step's) has NaN entropies: prefix_advantages refused them
        check_loss(entropy.detach().sum(), f"{where} (the sum of token entropies)", keys)
        adv, _ = prefix_advantages(r, entropy.detach().view(n, k, TOKENS), lens, cfg["mask_ratio"])
        adv = adv.reshape(n * k, TOKENS)
    else:
        adv = (r - r.mean(1, keepdim=True)).view(-1, 1).expand(-1, TOKENS)
    live = live_mask(out).float()
    loss = -(adv * logp * live).sum() / (n * k)
    loss = loss - cfg["entropy_coeff"] * (entropy * live).sum() / live.sum()
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(policy.parameters(), cfg["grad_clip"])
    opt.step()
    on_policy = r[:, :-1].mean() if hybrid else r.mean()
    mean_r, hybrid_r, value = torch.stack([on_policy, r[:, -1].mean(), loss.detach()]).tolist()
    check_loss(value, where, keys)
    stats = {"reward": mean_r}
    if hybrid:
        stats["hybrid_reward"] = hybrid_r
    return stats


def sft_step(
    policy: Policy, opt: torch.optim.Optimizer, prompts: torch.Tensor, target: torch.Tensor
) -> float:
    """One cross-entropy step on (prompts, target answers); the loss (read anyway: a NaN or
    infinite one is TrainingDiverged naming base_lr and lr, the rates of the SFT steps)."""
    logits = policy(prompts, target)
    loss = nn.functional.cross_entropy(logits.reshape(-1, DIGITS + 1), target.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return check_loss(loss.detach(), "rl.prefix_rft SFT step", ("base_lr", "lr"))


@torch.no_grad()
def evaluate(policy: Policy, prompts: torch.Tensor) -> dict[str, float]:
    """Greedy exact match on ``prompts``, overall and on the halves the demonstrator gets
    wrong (``biased``) and right (``clean``)."""
    hit = reward(prompts, policy.generate(prompts, greedy=True))
    swap = prompts[:, 0] < DIGITS // 2
    return {
        "accuracy": float(hit.mean()),
        "accuracy_biased": float(hit[swap].mean()),
        "accuracy_clean": float(hit[~swap].mean()),
    }
