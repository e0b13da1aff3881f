"""rl.prefix_rft: a hybrid row's prefix is forced from the *biased* demonstrator (so a forced
swap earns nothing), and the claim read over seeds on hand-built rows, part by part, with part
(d) unmeasured (None, not a pass) when the zero-base arms were not run."""

from __future__ import annotations

import torch
from neuroedge.models.prefix_rft import experiment as X
from neuroedge.models.prefix_rft import functional as F
from neuroedge.types import Measurement, Report

CFG = {**X.DEFAULTS, "rollouts": 4, "steps": 10}  # a small RL step's settings


def test_a_hybrid_rows_prefix_is_the_biased_demonstration_so_a_forced_swap_earns_nothing(
    monkeypatch,
) -> None:
    torch.manual_seed(0)
    policy = F.Policy(16)
    with torch.no_grad():  # the policy samples EOS wherever a token is not forced
        policy.head.weight.zero_()
        policy.head.bias.zero_()
        policy.head.bias[F.EOS] = 30.0
    prompts = torch.tensor(
        [
            [0, 1, 2, 3, 4, 5],  # first digit < 3 and the two swapped digits differ
            [1, 0, 3, 3, 3, 3],
            [2, 5, 0, 0, 0, 0],
            [0, 0, 1, 2, 3, 4],  # swapped, but both digits are 0: the demonstration is right
            [3, 4, 5, 0, 1, 2],  # first digit >= 3: the demonstration is right
            [5, 0, 1, 2, 3, 4],
        ]
    )
    seen = {}
    real = F.reward

    def spy(p: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        seen.update(out=out.clone(), r=real(p, out))
        return seen["r"]

    monkeypatch.setattr(F, "reward", spy)
    opt = torch.optim.SGD(policy.parameters(), lr=0.0)
    stats = F.rl_step(policy, opt, prompts, CFG, 0, torch.Generator().manual_seed(0), True)
    k = CFG["rollouts"]
    hybrid, r = seen["out"][k - 1 :: k], seen["r"].view(-1, k)
    # step 0: the prefix fraction is 0.95 exactly, L = floor(0.95 * 7) = 6 forced tokens
    assert hybrid[:, :6].tolist() == F.biased(prompts)[:, :6].tolist()
    assert hybrid[:, :6].tolist() != F.answers(prompts)[:, :6].tolist()
    assert (hybrid[:, 6] == F.EOS).all()  # the one sampled token
    assert r[:, -1].tolist() == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert (r[:, :-1] == 0).all() and stats["reward"] == 0.0  # on policy: EOS first
    assert stats["hybrid_reward"] == 0.5


def seed_rows(
    prefix: float = 0.52,
    rft: float = 0.47,
    sft: float = 0.48,
    hybrid: float = 0.6,
    on_policy: float = 0.15,
    rft_zero: float = 0.0,
    zero_hybrid: float = 0.18,
) -> list[Report]:
    """One seed's rows as run_seed makes them (only what the claim reads)."""

    def row(variant: str, **metrics: float) -> Report:
        m = {k: Measurement(v, "fraction") for k, v in metrics.items()}
        return Report(X.NAME, "host", variant, metrics=m)

    return [
        row("base", accuracy=0.33),
        row("sft", accuracy=sft),
        row("rft", accuracy=rft, reward_early=0.15),
        row("prefix_rft", accuracy=prefix, hybrid_reward_early=hybrid, reward_early=on_policy),
        row("rft_zero", accuracy=rft_zero),
        row("prefix_rft_zero", accuracy=0.0, hybrid_reward_mean=zero_hybrid),
    ]


def claim(*seeds: dict, zero_base: bool = True) -> dict:
    return X.claim_over_seeds(
        {i: seed_rows(**s) for i, s in enumerate(seeds)}, {"zero_base": zero_base}
    )


def test_three_good_seeds_meet_every_part() -> None:
    c = claim({}, {"prefix": 0.5}, {"rft": 0.5})
    assert c["holds"] is True and all(c["parts"].values()) and len(c["parts"]) == 4, c
    assert c["prefix_rft_accuracy"] == [0.52, 0.5, 0.52] and c["unmeasured"] == {}


def test_part_a_prefix_rft_at_least_rft_within_a_hundredth_on_the_mean() -> None:
    ahead = claim({"prefix": 0.55, "rft": 0.45}, {"prefix": 0.55, "rft": 0.45})
    assert ahead["parts"]["a_prefix_rft_at_least_rft"] is True
    within = claim({"prefix": 0.50, "rft": 0.505})  # 0.005 behind
    assert within["parts"]["a_prefix_rft_at_least_rft"] is True and within["holds"] is True
    behind = claim({"prefix": 0.45, "rft": 0.55, "sft": 0.40}, {"prefix": 0.45, "rft": 0.55})
    assert behind["parts"]["a_prefix_rft_at_least_rft"] is False and behind["holds"] is False
    assert all(v for p, v in behind["parts"].items() if p != "a_prefix_rft_at_least_rft")
    on_means = claim({"prefix": 0.40, "rft": 0.50}, {"prefix": 0.60, "rft": 0.45})
    assert on_means["parts"]["a_prefix_rft_at_least_rft"] is True  # 0.50 vs 0.475


def test_part_b_prefix_rft_strictly_above_sft_on_the_mean() -> None:
    level = claim({"prefix": 0.48, "sft": 0.48, "rft": 0.4})
    assert level["parts"]["b_prefix_rft_above_sft"] is False and level["holds"] is False
    below = claim({"prefix": 0.46, "sft": 0.5, "rft": 0.4})
    assert below["parts"]["b_prefix_rft_above_sft"] is False
    assert below["parts"]["a_prefix_rft_at_least_rft"] is True


def test_part_c_hybrid_rows_earn_more_early_in_every_seed() -> None:
    one_seed = claim({}, {"hybrid": 0.1, "on_policy": 0.2}, {})
    assert one_seed["parts"]["c_hybrid_rows_earn_more_early"] is False
    assert one_seed["holds"] is False
    level = claim({"hybrid": 0.2, "on_policy": 0.2})
    assert level["parts"]["c_hybrid_rows_earn_more_early"] is False


def test_part_d_rft_stuck_and_hybrid_rewarded_from_the_zero_base_in_every_seed() -> None:
    part = "d_zero_base_rft_stuck_hybrid_rewarded"
    assert claim({"rft_zero": 0.02}, {})["parts"][part] is True
    learnt = claim({}, {"rft_zero": 0.03})
    assert learnt["parts"][part] is False and learnt["holds"] is False
    unrewarded = claim({}, {"zero_hybrid": 0.0})
    assert unrewarded["parts"][part] is False and unrewarded["holds"] is False


def test_without_zero_base_part_d_is_unmeasured_and_the_claim_is_not_met() -> None:
    part = "d_zero_base_rft_stuck_hybrid_rewarded"
    c = claim({}, {}, zero_base=False)
    assert c["parts"][part] is None and "zero_base=false" in c["unmeasured"][part]
    assert c["holds"] is None and not c["holds"]  # not a pass
    assert "rft_zero_accuracy" not in c
    text = "\n".join(X.claim_section(c))
    assert ": not all measured, none failed" in text and f"- {part}: None" in text
    assert f"- {part} not measured (zero_base=false" in text
    failed = claim({"hybrid": 0.1}, zero_base=False)
    assert failed["holds"] is False  # a measured part failing still reads False
