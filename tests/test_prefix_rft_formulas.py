"""rl.prefix_rft: the hybrid row's forced prefix is L = floor(l x |y*|) tokens (|y*| = LENGTH + 1
answer tokens with EOS), read from what the policy is asked to force, not from its output."""

from __future__ import annotations

import math

import numpy as np
import torch
from neuroedge.models.prefix_rft import experiment as X
from neuroedge.models.prefix_rft import functional as F


def forced_lengths(cfg: dict, step: int, prompts: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The prefix_len of every rollout row of one rl_step (a spy on generate); rollouts k."""
    torch.manual_seed(0)
    policy = F.Policy(16)
    seen = {}
    real = policy.generate

    def spy(prompts, prefix=None, prefix_len=None, generator=None, greedy=False):
        seen["prefix_len"] = prefix_len.clone()
        return real(prompts, prefix, prefix_len, generator, greedy)

    policy.generate = spy
    opt = torch.optim.SGD(policy.parameters(), lr=0.0)
    F.rl_step(policy, opt, prompts, cfg, step, torch.Generator().manual_seed(0), True)
    return seen["prefix_len"], cfg["rollouts"]


PROMPTS = torch.as_tensor(F.index_prompts(np.arange(0, 46656, 997)[:32]))


def test_at_l_0_95_six_of_the_seven_answer_tokens_are_forced_not_seven() -> None:
    assert F.TOKENS == 7  # six digits and EOS
    cfg = {**X.DEFAULTS, "rollouts": 4, "steps": 10}  # step 0: l = low_init = high = 0.95
    lens, k = forced_lengths(cfg, 0, PROMPTS)
    assert lens[k - 1 :: k].tolist() == [6] * len(PROMPTS)  # floor(6.65); ceil would force 7
    on_policy = lens.view(-1, k)[:, :-1]
    assert (on_policy == 0).all()


def test_every_forced_length_is_the_floor_of_its_fraction_of_the_answer() -> None:
    # l ~ U(0.9, 0.99): l x 7 in [6.3, 6.93], so the floor is 6 and a rounded-up length 7
    cfg = {**X.DEFAULTS, "rollouts": 2, "steps": 10, "low_init": 0.9, "low_target": 0.9}
    cfg["high"] = 0.99
    lens, k = forced_lengths(cfg, 5, PROMPTS)
    assert (lens[k - 1 :: k] == 6).all()
    # l ~ U(0, 0.95) half way through the decay: the draws of rl_step's generator, replayed
    cfg = {**X.DEFAULTS, "rollouts": 2, "steps": 10, "low_init": 0.5, "low_target": 0.0}
    lens, k = forced_lengths(cfg, 5, PROMPTS)
    lo = 0.25  # cosine half way from 0.5 to 0
    frac = lo + (0.95 - lo) * torch.rand(len(PROMPTS), generator=torch.Generator().manual_seed(0))
    want = [math.floor(float(f) * 7) for f in frac]
    assert lens[k - 1 :: k].tolist() == want
    assert len(set(want)) >= 3  # lengths spread over the range, not one value
