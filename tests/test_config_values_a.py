"""Up-front value checks of alloc.envy_free (bench), causal.cadre (train, bench) and
graph.influence_max (run): bad values are refused with ConfigError naming key and value."""

from __future__ import annotations

import pytest

from neuroedge.errors import ConfigError
from neuroedge.models.cadre import bench as cadre_bench
from neuroedge.models.cadre import spec as cadre_spec
from neuroedge.models.cadre import train as cadre_train
from neuroedge.models.envy_free import experiment as envy
from neuroedge.models.influence_max import spec as im_spec

NAN, INF = float("nan"), float("inf")


def _refused(check, cfg, key: str, value) -> None:
    with pytest.raises(ConfigError) as err:
        check(cfg)
    assert key in str(err.value) and repr(value) in str(err.value), str(err.value)


def test_defaults_pass() -> None:
    envy.check_config(envy.DEFAULTS)
    cadre_train.check_config({**cadre_train.DEFAULTS, "n": 4000})
    cadre_train.check_config({**cadre_train.DEFAULTS, "series": "x.csv", "period": 12})
    assert im_spec.check_config({}) == (2, 200, 0)


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("trials", 0, None),
        ("trials", 2.5, None),
        ("trials", True, None),
        ("trials", 10**9, None),
        ("budget_trials", -1, None),
        ("brute_force_instances", 0, None),
        ("delta_sweep_m", 401, None),
        ("m_sweep_delta", 0, None),
        ("seed", -1, None),
        ("sigma", 0, None),
        ("sigma", NAN, None),
        ("sigma", "1", None),
        ("ms", [100, 2.5], 2.5),
        ("ms", [100, 101], None),
        ("ms", [100, 100], None),
        ("ms", [], None),
        ("brute_force_ms", [6, 21], 21),
        ("brute_force_ms", [0], 0),
        ("deltas", [8, INF], INF),
        ("deltas", [8, -1], -1),
        ("deltas", [8, 1000], None),
        ("budget_cases", [[40.7, 4]], 40.7),
        ("budget_cases", [[400, 0]], 0),
        ("budget_cases", [], None),
        ("budget_cases", [[400]], [400]),
        ("budget_cases", [[400, 200]], None),
    ],
)
def test_envy_free_bench_refuses(key, value, shown) -> None:
    _refused(
        envy.check_config, {**envy.DEFAULTS, key: value}, key, value if shown is None else shown
    )


def test_envy_free_bench_checks_before_any_work(tmp_path) -> None:
    with pytest.raises(ConfigError, match="brute_force_instances=0"):
        envy.bench(str(tmp_path), config={"brute_force_instances": 0})
    assert not any(tmp_path.iterdir())


CADRE = {**cadre_train.DEFAULTS, "n": 3000}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("steps", 0),
        ("steps", 1.5),
        ("n", 0),
        ("n", 10**9),
        ("batch", 0),
        ("hidden", True),
        ("jac_batch", 0),
        ("jac_batch", 129),
        ("seed", -1),
        ("lr", 0),
        ("lr", NAN),
        ("alpha", -0.1),
        ("beta", INF),
        ("lambda_s", -1),
        ("lambda_z", "0.1"),
        ("threshold", -0.3),
    ],
)
def test_cadre_refuses(key, value) -> None:
    _refused(cadre_train.check_config, {**CADRE, key: value}, key, value)


@pytest.mark.parametrize(
    ("extra", "key", "value"),
    [
        ({"series": "x.csv", "period": 0}, "period", 0),
        ({"series": "x.csv", "period": 2.5}, "period", 2.5),
        ({"period": 12}, "period", 12),  # would be ignored without series
        ({"series": 5}, "series", 5),
    ],
)
def test_cadre_series_keys_refused(extra, key, value) -> None:
    _refused(cadre_train.check_config, {**CADRE, **extra}, key, value)


def test_cadre_train_and_bench_check_before_any_work(tmp_path) -> None:
    with pytest.raises(ConfigError, match="steps=0"):
        cadre_spec.train({"steps": 0}, out=str(tmp_path / "ck.pt"))
    with pytest.raises(ConfigError, match="lr=nan"):
        cadre_bench.bench(str(tmp_path), ["host"], {"lr": NAN})
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("key", "value"),
    [("k", 0), ("k", 2.5), ("worlds", 0), ("worlds", True), ("worlds", 10**9), ("seed", -1)],
)
def test_influence_max_run_refuses(key, value) -> None:
    with pytest.raises(ConfigError) as err:
        im_spec.build({key: value})
    assert f"{key}={value!r}" in str(err.value)
