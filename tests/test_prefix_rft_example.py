"""rl.prefix_rft: example prompts are held out from the split the built policy trained on."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.prefix_rft import functional as F
from neuroedge.registry import get_model


def _training(seed: int) -> set[tuple[int, ...]]:
    return {tuple(row) for row in F.index_prompts(F.split(seed)[0])}


@pytest.mark.parametrize("build_seed", [1, 7])
@pytest.mark.parametrize("run_seed", [0, 3])
def test_example_prompts_are_never_training_prompts_of_the_build_seed(
    build_seed: int, run_seed: int
) -> None:
    spec = get_model("rl.prefix_rft")
    prompts = spec.example_for(run_seed, {"seed": build_seed, "smoke": True})["prompts"]
    assert prompts.shape == (8, F.LENGTH) and prompts.dtype == np.int64
    training = _training(build_seed)
    assert not any(tuple(row) in training for row in prompts)


def test_the_default_example_is_unchanged_and_run_seeds_stay_held_out() -> None:
    spec = get_model("rl.prefix_rft")
    held_out = F.split(0)[1]
    assert np.array_equal(spec.example(0)["prompts"], F.index_prompts(held_out[:8]))
    training = _training(0)  # the default build's policy trains on split(0)
    for run_seed in (1, 2, 500):
        prompts = spec.example_for(run_seed, {"seed": 0})["prompts"]
        assert not any(tuple(row) in training for row in prompts), run_seed
    assert not np.array_equal(spec.example(0)["prompts"], spec.example(1)["prompts"])


def test_a_bad_build_seed_is_refused_by_the_example() -> None:
    with pytest.raises(ConfigError, match="seed=-1"):
        get_model("rl.prefix_rft").example_for(0, {"seed": -1})
