"""rl.prefix_rft: the task and its biased demonstrator, forced-prefix rollouts, the prefix-aware
advantages against hand-worked values, the loss, and the bench end to end on one seed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from neuroedge.models.prefix_rft import experiment as X
from neuroedge.models.prefix_rft import functional as F

CFG = {**X.DEFAULTS, "rollouts": 4, "steps": 10}  # a small RL step's settings


def test_answers_reverse_and_the_demonstrator_swaps_the_last_two_on_half_the_prompts() -> None:
    prompts = torch.tensor([[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [2, 2, 5, 5, 1, 1]])
    assert F.answers(prompts).tolist() == [
        [5, 4, 3, 2, 1, 0, F.EOS],
        [0, 1, 2, 3, 4, 5, F.EOS],
        [1, 1, 5, 5, 2, 2, F.EOS],
    ]
    assert F.biased(prompts).tolist() == [
        [5, 4, 3, 2, 0, 1, F.EOS],  # first digit 0 < 3: swapped
        [0, 1, 2, 3, 4, 5, F.EOS],  # first digit 5: right
        [1, 1, 5, 5, 2, 2, F.EOS],  # swapped, but both digits are 2
    ]
    assert F.reward(prompts, F.answers(prompts)).tolist() == [1.0, 1.0, 1.0]
    assert F.reward(prompts, F.biased(prompts)).tolist() == [0.0, 1.0, 1.0]


def test_held_out_prompts_are_never_training_prompts() -> None:
    train, held = F.split(3)
    assert len(held) == F.HELD_OUT and len(train) + len(held) == F.DIGITS**F.LENGTH
    assert not np.intersect1d(train, held).size
    digits = F.index_prompts(np.array([0, 1, F.DIGITS, F.DIGITS**F.LENGTH - 1]))
    assert digits.tolist() == [[0] * 6, [0] * 5 + [1], [0] * 4 + [1, 0], [5] * 6]
    assert abs(np.mean(F.index_prompts(held)[:, 0] < 3) - 0.5) < 0.05  # both halves tested


def test_generation_keeps_the_forced_prefix_and_samples_the_rest() -> None:
    torch.manual_seed(0)
    policy = F.Policy(16)
    prompts = torch.as_tensor(F.index_prompts(np.arange(0, 46656, 4000)))
    demo = F.biased(prompts)
    lens = torch.arange(len(prompts)) % (F.TOKENS + 1)
    out = policy.generate(prompts, demo, lens, torch.Generator().manual_seed(1))
    for row, k in enumerate(lens.tolist()):
        assert out[row, :k].tolist() == demo[row, :k].tolist()
    full = policy.generate(prompts, demo, torch.full((len(prompts),), F.TOKENS))
    assert torch.equal(full, demo)
    assert torch.equal(policy.generate(prompts, greedy=True), policy.generate(prompts, greedy=True))


def test_token_log_probs_equal_the_cross_entropy_and_eos_ends_the_loss() -> None:
    torch.manual_seed(0)
    policy = F.Policy(16)
    prompts = torch.as_tensor(F.index_prompts(np.array([7, 99, 1234])))
    out = F.answers(prompts)
    logp, entropy = F.token_stats(policy, prompts, out)
    ce = torch.nn.functional.cross_entropy(
        policy(prompts, out).reshape(-1, F.DIGITS + 1), out.reshape(-1), reduction="none"
    )
    torch.testing.assert_close(-logp.reshape(-1), ce)
    assert (entropy > 0).all() and (entropy <= math.log(F.DIGITS + 1) + 1e-5).all()
    early = torch.tensor([[1, F.EOS, 2, 3, 4, 5, F.EOS]])
    assert F.live_mask(early).tolist() == [[True, True, False, False, False, False, False]]


def test_prefix_advantages_follow_the_authors_grouping_and_entropy_clip() -> None:
    # 2 prompts x (3 on-policy + 1 hybrid); hybrid prefix lengths 5 and 2
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    lens = torch.tensor([5, 2])
    entropy = torch.rand(2, 4, F.TOKENS, generator=torch.Generator().manual_seed(0))
    adv, prefix = F.prefix_advantages(r, entropy, lens, mask_ratio=0.0)
    torch.testing.assert_close(adv[0, :3, 0], torch.tensor([2 / 3, -1 / 3, -1 / 3]))
    assert (adv[1, :3] == 0).all()
    assert adv[0, 3].tolist() == pytest.approx([2 / 3] * 5 + [1.0] * 2)  # prefix: r_h - mean
    assert (adv[1, 3] == 0).all()  # reward 0, on-policy mean 0
    assert prefix[0, 3].tolist() == [True] * 5 + [False] * 2 and not prefix[:, :3].any()
    # keep the top 20 % of the 7 prefix tokens by entropy: all but the highest 2 get 0
    clipped, _ = F.prefix_advantages(r, entropy, lens, mask_ratio=0.8)
    ent = entropy[:, 3][prefix[:, 3]]
    kept = ent >= torch.quantile(ent, 0.8)
    assert int(kept.sum()) == 2
    assert torch.equal(clipped[:, 3][prefix[:, 3]] != 0, kept & (adv[:, 3][prefix[:, 3]] != 0))
    assert torch.equal(clipped[:, :3], adv[:, :3])  # on-policy rows untouched
    assert torch.equal(clipped[:, 3][~prefix[:, 3]], adv[:, 3][~prefix[:, 3]])
    # any sequence length: 1 prompt, 2 on-policy rows + the hybrid, 4 tokens, prefix 3
    other, _ = F.prefix_advantages(
        torch.tensor([[1.0, 0.0, 1.0]]), torch.ones(1, 3, 4), torch.tensor([3]), 0.0
    )
    assert other[0].tolist() == [[0.5] * 4, [-0.5] * 4, [0.5, 0.5, 0.5, 1.0]]


def test_the_prefix_fraction_decays_by_cosine() -> None:
    assert F.low_bound(0, 100, CFG) == pytest.approx(0.95)
    assert F.low_bound(50, 100, CFG) == pytest.approx(0.475)
    assert F.low_bound(100, 100, CFG) == pytest.approx(0.0)


def row_log_probs(policy: F.Policy, prompts: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """log pi of each row of ``out`` (its tokens up to the first EOS)."""
    with torch.no_grad():
        logp, _ = F.token_stats(policy, prompts, out)
    return (logp * F.live_mask(out)).sum(1)


def test_an_rl_step_raises_rewarded_rows_and_lowers_negative_advantage_rows(monkeypatch) -> None:
    torch.manual_seed(0)
    policy = F.Policy(32)
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    prompts = torch.as_tensor(F.index_prompts(np.arange(0, 46656, 2917)[:16]))
    cfg = {**CFG, "rollouts": 8, "entropy_coeff": 0.0, "grad_clip": 1e9}
    stats = F.rl_step(policy, opt, prompts, cfg, 0, torch.Generator().manual_seed(0), True)
    # at step 0 the hybrid prefix is floor(0.95 * 7) = 6 tokens: only EOS is left to sample
    assert 0 < stats["hybrid_reward"] <= 1 and stats["reward"] == 0.0
    # zero reward everywhere (RFT from an untrained policy): zero advantage, no change
    before = [p.detach().clone() for p in policy.parameters()]
    F.rl_step(policy, opt, prompts, cfg, 0, torch.Generator().manual_seed(0), False)
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))
    # 2 prompts, each with 1 right answer (reward 1, A = +3/4) and 3 wrong (reward 0, A = -1/4)
    torch.manual_seed(0)
    policy, k, prompts = F.Policy(32), 4, prompts[:2]
    sgd = torch.optim.SGD(policy.parameters(), lr=0.05)
    rep, row = prompts.repeat_interleave(k, 0), torch.arange(2 * k)[:, None]
    wrong = F.answers((rep + 1 + row % k) % F.DIGITS)  # every digit off the right one
    out = torch.where(row % k == 0, F.answers(rep), wrong)
    monkeypatch.setattr(policy, "generate", lambda *args, **kwargs: out)
    before = row_log_probs(policy, rep, out)
    cfg = {**cfg, "rollouts": k}
    stats = F.rl_step(policy, sgd, prompts, cfg, 0, torch.Generator().manual_seed(0), False)
    assert stats["reward"] == 1 / k
    change = (row_log_probs(policy, rep, out) - before).view(-1, k)
    assert (change[:, 0] > 0).all(), change  # the rewarded rows rise
    assert (change[:, 1:] < 0).all(), change  # every negative-advantage row falls


def test_prefix_rft_fixes_what_sft_learns_from_biased_demonstrations(tmp_path: Path) -> None:
    from neuroedge.models.prefix_rft.experiment import bench

    doc = bench(str(tmp_path), config={"seed": 0})
    rows = {r["variant"]: r["metrics"] for r in doc["rows"]}
    acc = {v: m["accuracy"]["value"] for v, m in rows.items()}
    sft = rows["sft"]
    assert sft["accuracy_clean"]["value"] > sft["accuracy_biased"]["value"] + 0.3  # the error
    for arm in ("rft", "prefix_rft"):
        assert rows[arm]["accuracy_biased"]["value"] > sft["accuracy_biased"]["value"] + 0.2
    assert acc["prefix_rft"] > acc["sft"] > acc["base"]
    parts = doc["claim"]["parts"]
    assert parts["a_prefix_rft_at_least_rft"], doc["claim"]
    assert parts["b_prefix_rft_above_sft"] and parts["c_hybrid_rows_earn_more_early"], doc
    assert parts["d_zero_base_rft_stuck_hybrid_rewarded"], doc["claim"]
    assert json.loads((tmp_path / "report.json").read_text())["claim"]["parts"] == parts
    assert (tmp_path / "curves.png").stat().st_size > 10_000
    assert "## Claim over seeds [0]: " in (tmp_path / "report.md").read_text()
