"""vla.specprune: which tokens each rule keeps, against hand-made scores (oracle tests).

Each test fixes the scores a rule reads and asserts the exact indices it keeps, so a rule that
keeps the wrong end of a ranking (bottom-k for top-k, the most similar changed patches, the
least attended tokens) or a controller reading the wrong speed or sign fails here.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuroedge.models.specprune import functional as fn
from neuroedge.models.specprune.functional import PruneConfig

INSTRUCTION = "press the red button down"


def small_policy():
    from neuroedge.models.specprune.train import DEFAULTS, make_policy

    torch.manual_seed(0)
    return make_policy(DEFAULTS).eval()


def hand_scores(tops: dict[int, float], n: int = 128) -> torch.Tensor:
    """[1, n] scores: small distinct values (below 0.1, rising with the index), ``tops`` set."""
    score = 0.1 * torch.arange(n, dtype=torch.float32)[None] / n
    for index, value in tops.items():
        score[0, index] = value
    return score


def top_per_view(score: np.ndarray, k: int) -> set[int]:
    """Oracle: the k highest of each 64-token view (plain numpy)."""
    return {v * 64 + int(i) for v in range(2) for i in np.argsort(-score[v * 64 : v * 64 + 64])[:k]}


def test_local_set_is_the_top_k_of_each_view():
    model = small_policy().configure("specprune", 32, 2, PruneConfig())
    score = hand_scores({5: 0.9, 17: 0.8, 30: 0.7, 67: 0.95, 124: 0.85, 74: 0.5})
    assert model.per_view_top(score)[0].nonzero().flatten().tolist() == [5, 17, 67, 124]


def test_static_keep_takes_the_three_sets_then_the_highest_layer1_scores():
    model = small_policy().configure("specprune", 6, 2, PruneConfig())
    local = torch.zeros(1, 128, dtype=torch.bool)
    local[0, [1, 70]] = True
    prior = torch.zeros(1, 128)
    prior[0, 5] = 1.0  # a global or dynamic token
    score = hand_scores({9: 0.9, 100: 0.8, 33: 0.7, 1: 0.001})
    keep = model.static_keep(local, prior, torch.zeros(1, 128), score)[0].tolist()
    assert keep == [1, 5, 9, 33, 70, 100]


def test_fastv_keeps_the_most_attended_tokens():
    model = small_policy().configure("fastv", 3, 0, PruneConfig())
    received = hand_scores({7: 0.5, 77: 0.4, 120: 0.3})
    keep = model.static_keep(
        torch.zeros(1, 128, dtype=torch.bool), torch.zeros(1, 128), received, torch.rand(1, 128)
    )
    assert keep[0].tolist() == [7, 77, 120]


def forward_kept(model, seed: int = 0):
    """(kept positions after the static step, what the spy saw) for one example input."""
    from neuroedge.models.specprune.spec import example

    x = {k: torch.from_numpy(v) for k, v in example(seed).items()}
    x["prior"] = torch.zeros(1, 128)
    model.record = []
    with torch.inference_mode():
        model(*x.values())
    return model.record[0][0].tolist()


def test_forward_keeps_layer0_and_layer1_top_k_then_fills_by_layer1_score():
    model = small_policy().configure("specprune", 20, 3, PruneConfig())
    seen, per_view_top = [], model.per_view_top

    def spy(score):
        seen.append(score[0].numpy().copy())
        return per_view_top(score)

    model.per_view_top = spy
    for seed in range(3):
        seen.clear()
        kept = forward_kept(model, seed)
        assert len(seen) == 2  # layers 0 and 1
        local = top_per_view(seen[0], 3) | top_per_view(seen[1], 3)
        rest = [int(i) for i in np.argsort(-seen[1]) if int(i) not in local]
        assert kept == sorted(local | set(rest[: 20 - len(local)]))


def test_forward_fastv_keeps_the_argmax_of_received_attention():
    model = small_policy().configure("fastv", 10, 0, PruneConfig())
    block, seen = model.blocks[1], []
    forward = block.forward

    def spy(x, rope, bias, rows):
        out, attn = forward(x, rope, bias, rows)
        seen.append(attn.mean(1).mean(1)[0, :128].numpy().copy())  # every query row, head
        return out, attn

    block.forward = spy
    kept = forward_kept(model)
    assert kept == sorted(int(i) for i in np.argsort(-seen[0])[:10])


def test_dynamic_set_is_the_least_similar_changed_patches():
    sim = np.ones(64)
    sim[[3, 11, 25, 40, 50]] = [0.90, 0.20, 0.50, 0.996, 0.70]  # 40 is above tau: unchanged
    assert fn.dynamic_set(sim, tau=0.995, k=2).tolist() == [11, 25]
    assert fn.dynamic_set(sim, tau=0.995, k=9).tolist() == [11, 25, 50, 3]


def obs(hand, image: np.ndarray | None = None) -> dict:
    image = np.full((64, 64, 3), 100, np.uint8) if image is None else image
    return {
        "primary": image,
        "wrist": image.copy(),
        "proprio": np.array([*hand, 1.0], np.float32),
        "instruction": INSTRUCTION,
    }


def recording_policy(prune: PruneConfig, scores: np.ndarray | None = None, controller=False):
    from neuroedge.models.specprune.policy import PrunedPolicy

    calls = []

    def engine(mode, inputs):
        calls.append((mode, inputs["prior"][0].copy()))
        out = np.zeros((1, 128), np.float32) if scores is None else scores[None]
        return np.zeros((1, 8, 4), np.float32), out

    return PrunedPolicy(engine, "specprune", prune, controller=controller), calls


def test_policy_dynamic_set_keeps_the_two_most_changed_of_three_patches():
    policy, calls = recording_policy(PruneConfig(k_global=0, k_dynamic=2, lookback="chunk"))
    policy.plan(obs((0, 0.6, 0.2)))
    moved = np.full((64, 64, 3), 100, np.uint8)
    moved[0:8, 8:16] = (100, 100, 160)  # patch 1: a little
    moved[8:16, 24:32] = (250, 0, 0)  # patch 11: most
    moved[32:40, 40:48] = (200, 40, 40)  # patch 37: much
    policy.plan(obs((0, 0.6, 0.2), moved))
    prior = calls[1][1]
    assert np.flatnonzero(prior).tolist() == [11, 37, 64 + 11, 64 + 37]


def test_global_set_is_the_top_k_of_the_previous_scores():
    scores = hand_scores({12: 0.9, 50: 0.8, 20: 0.4, 67: 0.7, 97: 0.95, 127: 0.3})[0].numpy()
    policy, calls = recording_policy(PruneConfig(k_global=2, k_dynamic=0), scores)
    policy.plan(obs((0, 0.6, 0.2)))
    policy.plan(obs((0, 0.6, 0.2)))
    assert np.flatnonzero(calls[0][1]).tolist() == []  # no previous inference
    assert np.flatnonzero(calls[1][1]).tolist() == [12, 50, 67, 97]


@pytest.mark.parametrize(
    "moves, modes",
    [
        # fast along x (1 cm/step, level), then slow and descending: fine only then
        ([(0.08, 0, 0), (0.004, 0, -0.004)], ["coarse", "coarse", "fine"]),
        # fast, then slow but rising: stays coarse (dz > 0 never enters fine)
        ([(0.08, 0, 0), (0.004, 0, 0.004)], ["coarse", "coarse", "coarse"]),
        # slow descending, then fast: fine, then back to coarse
        ([(0.004, 0, -0.004), (0.08, 0, 0)], ["coarse", "fine", "coarse"]),
    ],
)
def test_controller_modes_follow_the_measured_hand_motion(moves, modes):
    policy, calls = recording_policy(PruneConfig(), controller=True)
    hand = np.array([0.0, 0.6, 0.2])
    policy.plan(obs(hand))
    for move in moves:
        hand = hand + np.array(move)
        policy.plan(obs(hand))
    assert [mode for mode, _ in calls] == modes == policy.modes
