"""vla.specprune V_global (eq. 2): the top-K_G tokens of each view by the previous inference's
last-layer score, among the tokens that reached the last layer.

The network returns the survivors' scores scattered into zeros; taking the top K_G of that
vector filled a view with fewer than K_G survivors with pruned tokens by index (3 survivors
[20, 41, 57] gave [0, 1, 2, 20, 41, 57], 2026-12 audit)."""

from __future__ import annotations

import numpy as np
import torch
from neuroedge.models.specprune.functional import PruneConfig
from neuroedge.models.specprune.policy import PrunedPolicy, global_set

INSTRUCTION = "press the red button down"


def _obs() -> dict:
    image = np.full((64, 64, 3), 100, np.uint8)
    return {
        "primary": image,
        "wrist": image.copy(),
        "proprio": np.array([0.0, 0.6, 0.2, 1.0], np.float32),
        "instruction": INSTRUCTION,
    }


def test_global_set_never_takes_a_pruned_token_of_a_view_with_few_survivors() -> None:
    scores = np.zeros(128, np.float32)
    scores[[20, 41, 57]] = [0.02, 0.05, 0.01]  # view 0: three survivors
    scores[64:] = 0.001 * np.arange(1, 65)  # view 1: all survived, the last six score highest
    calls = []

    def engine(mode, inputs):
        calls.append(inputs["prior"][0].copy())
        return np.zeros((1, 8, 4), np.float32), scores[None]

    policy = PrunedPolicy(
        engine, "specprune", PruneConfig(k_global=6, k_dynamic=0), controller=False
    )
    policy.plan(_obs())
    policy.plan(_obs())
    assert np.flatnonzero(calls[1]).tolist() == [20, 41, 57, *range(64 + 58, 128)]
    assert global_set(scores[:64], 2).tolist() == [41, 20]  # highest first, as top_k_set
    assert global_set(np.zeros(64, np.float32), 6).tolist() == []


def test_survivors_of_the_network_score_above_zero_and_only_they_are_global() -> None:
    """With the trained-size net and a tight budget the last layer keeps few tokens per view:
    they score > 0 (softmax means), every pruned token 0, and V_global is drawn from them."""
    from neuroedge.models.specprune.spec import example
    from neuroedge.models.specprune.train import DEFAULTS, make_policy

    torch.manual_seed(0)
    prune = PruneConfig()
    model = make_policy(DEFAULTS).eval().configure("specprune", 8, 2, prune)
    x = {k: torch.from_numpy(v) for k, v in example(0).items()}
    x["prior"] = torch.zeros(1, 128)
    model.record = []
    with torch.inference_mode():
        _, scores = model(*x.values())
    survivors = set(model.record[-1][0].tolist())  # positions after the last pruning step
    scores = scores[0].numpy()
    assert set(np.flatnonzero(scores > 0).tolist()) == survivors
    per_view = [sorted(s for s in survivors if s // 64 == v) for v in range(2)]
    assert min(len(p) for p in per_view) < prune.k_global  # the case under test
    for view in range(2):
        chosen = global_set(scores[view * 64 : (view + 1) * 64], prune.k_global) + view * 64
        assert set(chosen.tolist()) <= set(per_view[view])
        assert len(chosen) == min(prune.k_global, len(per_view[view]))
