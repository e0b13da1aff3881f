"""rl.prefix_rft: mask_ratio 1 zeroes every prefix token's advantage; a build with fewer
steps than the bench's early_steps (a key a build cannot set) is not refused for it."""

from __future__ import annotations

import pytest
import torch
from neuroedge.models.prefix_rft import experiment as X
from neuroedge.models.prefix_rft import functional as F
from neuroedge.models.prefix_rft import spec as S


def test_mask_ratio_one_zeroes_every_prefix_token_even_the_highest_entropy_one() -> None:
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0]])  # 3 on-policy rows + the hybrid, which earned 1
    entropy = torch.arange(4 * F.TOKENS, dtype=torch.float32).view(1, 4, F.TOKENS)  # distinct
    lens = torch.tensor([5])
    adv, prefix = F.prefix_advantages(r, entropy, lens, mask_ratio=1.0)
    assert (adv[0, 3][prefix[0, 3]] == 0).all()  # the 1.0 quantile (max) was kept by a strict <
    assert adv[0, 3][~prefix[0, 3]].tolist() == [1.0] * (F.TOKENS - 5)  # past the prefix: r
    kept, _ = F.prefix_advantages(r, entropy, lens, mask_ratio=0.8)
    assert int((kept[0, 3][:5] != 0).sum()) == 1  # the default still keeps the top 20 %


class Stop(Exception):
    pass


def test_a_build_with_fewer_steps_than_early_steps_runs(monkeypatch) -> None:
    seen = {}

    def train_base(cfg, train):
        seen.update(cfg)
        raise Stop  # before any training: the config is what is tested

    monkeypatch.setattr(X, "train_base", train_base)
    with pytest.raises(Stop):
        S.build({"steps": 10})  # was refused: early_steps (20) exceeds steps (10)
    assert seen["steps"] == 10 and seen["early_steps"] == 10
    with pytest.raises(Stop):
        S.build({})
    assert seen["early_steps"] == X.DEFAULTS["early_steps"]  # the default build is unchanged


def test_a_short_build_trains_and_answers() -> None:
    program = S.build({"steps": 3, "base_steps": 2, "hidden": 8, "variant": "prefix_rft"})
    out = program.fn(**S.example(0))
    assert out["answers"].shape == (8, F.LENGTH + 1)


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.25, 0.5, 0.8, 1.0])
def test_entropy_clip_zeroes_the_lowest_floor_ratio_x_count_even_when_entropies_tie(tied, ratio):
    """The notes (6.2 step 5): sort the batch's prefix tokens by entropy, zero the lowest
    mask_ratio fraction. Tied entropies had none strictly below their quantile: none zeroed."""
    r = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]])  # the hybrids earned 1, on-policy 1/2
    entropy = (
        torch.full((2, 3, 5), 0.7) if tied else torch.arange(30.0).flip(0).view(2, 3, 5)
    )  # distinct: row 1's prefix has the lowest entropies
    adv, prefix = F.prefix_advantages(r, entropy, torch.tensor([5, 5]), ratio)
    zeroed = (adv[:, -1] == 0) & prefix[:, -1]
    assert int(zeroed.sum()) == int(ratio * 10)  # floor(mask_ratio x 10 prefix tokens)
    order = [(1, t) for t in range(4, -1, -1)] + [(0, t) for t in range(4, -1, -1)]  # by entropy
    if tied:  # a stable sort: ties in batch order
        order = [(0, t) for t in range(5)] + [(1, t) for t in range(5)]
    assert sorted(map(tuple, zeroed.nonzero().tolist())) == sorted(order[: int(ratio * 10)])
    assert (adv[:, -1][prefix[:, -1] & ~zeroed] == 0.5).all()  # the rest keep r_h - mean


def test_smoke_keeps_the_step_counts_the_user_gives(monkeypatch) -> None:
    seen = {}

    def train_base(cfg, train):
        seen.update(cfg)
        raise Stop  # before any training

    monkeypatch.setattr(X, "train_base", train_base)
    with pytest.raises(Stop):
        S.build({"smoke": True, "steps": 40, "base_steps": 7})  # smoke set 5 + 3 over them
    assert (seen["base_steps"], seen["steps"]) == (7, 40)
    with pytest.raises(Stop):
        S.build({"smoke": True, "steps": 40})
    assert (seen["base_steps"], seen["steps"]) == (5, 40)
    with pytest.raises(Stop):
        S.build({"smoke": True})
    assert (seen["base_steps"], seen["steps"]) == (5, 3)


@pytest.mark.parametrize(
    ("items", "msg"),
    [
        (["smoke=true", "steps=0"], "steps=0: expected an integer in 1..1000000"),
        (["smoke=true", "base_steps=-1"], "base_steps=-1: expected an integer in 0..1000000"),
        (["variant=base", "steps=50"], "steps=50 has no effect with variant=base"),
        (["variant=base", "smoke=true", "lr=0.01"], "lr=0.01 has no effect with variant=base"),
    ],
)
def test_cli_run_refuses_a_key_the_build_would_ignore_or_a_bad_smoke_value(
    monkeypatch, capsys, items, msg
) -> None:
    from neuroedge.cli import main

    monkeypatch.setattr(F, "Policy", lambda *a, **k: pytest.fail("a policy was built"))
    assert main(["run", "rl.prefix_rft", "--config", *items]) == 2
    assert f"neuroedge: error: {msg}" in capsys.readouterr().err
