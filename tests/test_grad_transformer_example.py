"""transfer.grad_transformer: the example's tasks come from the family the generator of the
build trained on (the build config's ``seed``)."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.grad_transformer import functional as F
from neuroedge.registry import get_model


def _deltas(family_seed: int, seed: int) -> np.ndarray:
    fam, rng = F.Family.make(family_seed), np.random.default_rng(1000 + seed)
    out = []
    for _ in range(4):
        x, y = fam.task(rng, 256, rng.standard_normal(F.D_IN))
        out.append(F.gd_iterates(fam.small_features(x), y, 100, 0.1, 1)[-1])
    return np.stack(out)


@pytest.mark.parametrize("family_seed", [5, 11])
def test_example_tasks_come_from_the_built_family(family_seed: int) -> None:
    spec = get_model("transfer.grad_transformer")
    got = spec.example_for(2, {"seed": family_seed, "smoke": True})["delta_small"]
    assert np.array_equal(got, _deltas(family_seed, 2))
    assert np.array_equal(spec.example(2)["delta_small"], _deltas(0, 2))
    assert not np.array_equal(_deltas(5, 2), _deltas(0, 2))


def test_a_bad_build_seed_is_refused_by_the_example() -> None:
    with pytest.raises(ConfigError, match="seed='x'"):
        get_model("transfer.grad_transformer").example_for(0, {"seed": "x"})
