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
