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


def test_the_example_is_fine_tuned_as_the_builds_shadow_tasks() -> None:
    spec = get_model("transfer.grad_transformer")
    cfg = {"gd_steps": 5, "gd_lr": 0.01, "samples": 20, "iterates": 5}
    got = spec.example_for(0, cfg)["delta_small"]
    fam, rng = F.Family.make(0), np.random.default_rng(1000)
    want = []
    for _ in range(4):
        x, y = fam.task(rng, 20, rng.standard_normal(F.D_IN))
        want.append(F.gd_iterates(fam.small_features(x), y, 5, 0.01, 1)[-1])
    assert np.array_equal(got, np.stack(want))
    assert not np.array_equal(got, _deltas(0, 0))  # was the default 256 / 100 / 0.1 draw
    with pytest.raises(ConfigError, match=r"gd_lr=0: expected a finite number in \(0, 1\]"):
        spec.example_for(0, {"gd_lr": 0})


def test_smoke_keeps_the_sizes_the_user_gives(monkeypatch) -> None:
    from neuroedge.models.grad_transformer import experiment as X

    class Stop(Exception):
        pass

    seen = {}

    def shadow_pairs(fam, cfg, rng):
        seen.update(cfg)
        raise Stop  # before any work

    monkeypatch.setattr(X, "shadow_pairs", shadow_pairs)
    spec = get_model("transfer.grad_transformer")
    with pytest.raises(Stop):
        spec.build({"smoke": True, "steps": 50, "shadow_tasks": 9, "d_model": 16})
    assert (seen["steps"], seen["shadow_tasks"], seen["d_model"]) == (50, 9, 16)
    with pytest.raises(Stop):
        spec.build({"smoke": True})
    assert (seen["steps"], seen["shadow_tasks"], seen["d_model"]) == (3, 4, 8)


def test_cli_run_checks_the_users_value_under_smoke(monkeypatch, capsys) -> None:
    from neuroedge.cli import main
    from neuroedge.models.grad_transformer import experiment as X

    monkeypatch.setattr(X, "shadow_pairs", lambda *a: pytest.fail("work started"))
    assert main(["run", "transfer.grad_transformer", "--config", "smoke=true", "d_model=6"]) == 2
    assert "d_model=6: expected a multiple of the 4 heads" in capsys.readouterr().err
