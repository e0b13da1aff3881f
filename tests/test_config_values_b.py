"""Bad config values of lora_meanfield, meshft, uq.last_layer and lif_convnet are refused up
front with a ConfigError naming the key and the value; the defaults pass."""

from __future__ import annotations

import re

import pytest

from neuroedge.errors import ConfigError
from neuroedge.models.lif_convnet import spec as lif
from neuroedge.models.lora_meanfield import spec as lora
from neuroedge.models.meshft import bench as mesh_bench
from neuroedge.models.meshft import spec as mesh
from neuroedge.models.uq_last_layer import spec as uq

NOT_COUNTS = [2.5, True, "3", [4], None, 0, -1]


def _refused(key: str, value: object) -> str:
    return re.escape(f"{key}={value!r}")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        *[("layers", v) for v in [*NOT_COUNTS, 10**5 + 1, 1e8]],
        *[("horizon", v) for v in [0, -1.0, float("inf"), float("nan"), "5", True]],
        *[("beta", v) for v in [1e300, -5, float("nan"), float("-inf"), "1", 1e3 + 1]],
    ],
)
def test_lora_run_refuses_bad_values(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=_refused(key, value)):
        lora.build({key: value})


def test_lora_run_defaults_and_bounds_pass() -> None:
    out = lora.build({}).fn(**lora.example(0))
    assert out["w2"].shape == (1,)
    lora.build({"layers": 10**5, "beta": 0, "horizon": 1e-3})


@pytest.mark.parametrize("key", ["seeds", "adapters"])
@pytest.mark.parametrize("value", NOT_COUNTS)
def test_lora_bench_refuses_bad_counts_before_work(tmp_path, key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=_refused(key, value)):
        lora.bench(str(tmp_path), ["host"], {key: value})


def test_lora_bench_config_is_what_the_bench_reads() -> None:
    assert lora.bench_values({}) == {"seeds": 5, "adapters": 30}
    assert lora.bench_values({"adapters": 3, "horizon": 9}) == {"seeds": 5, "adapters": 3}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        *[("steps", v) for v in [*NOT_COUNTS, 10**6 + 1]],
        *[("dt", v) for v in [0, -0.1, float("inf"), float("nan"), "0.002", True]],
    ],
)
def test_meshft_run_refuses_bad_values(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=_refused(key, value)):
        mesh.build({"smoke": True, key: value})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        *[("train_iters", v) for v in NOT_COUNTS],
        *[("train_pairs", v) for v in NOT_COUNTS],
        *[("lr", v) for v in [0, -1e-3, float("inf"), float("nan"), "3e-3"]],
        *[("dt", v) for v in [0, float("inf")]],
    ],
)
def test_meshft_train_refuses_bad_values(tmp_path, key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=_refused(key, value)):
        mesh.train({key: value}, out=str(tmp_path / "ck.pt"))
    assert not (tmp_path / "ck.pt").exists()


@pytest.mark.parametrize("key", ["iters", "mgn_iters", "rollout", "steps_1e4"])
@pytest.mark.parametrize("value", NOT_COUNTS)
def test_meshft_bench_refuses_bad_values_before_training(tmp_path, key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=_refused(key, value)):
        mesh_bench.bench(str(tmp_path), ["host"], {key: value})


def test_meshft_defaults_pass() -> None:
    assert mesh.rollout_values(mesh.DEFAULTS) == (100, 0.002)
    assert mesh.train_values(mesh.DEFAULTS) == (150, 256, 3e-3, 0.002)
    assert mesh_bench.bench_config({}) == mesh_bench.BENCH_DEFAULTS
    out = mesh.build({"smoke": True, "steps": 2}).fn(**mesh.example(0))
    assert out["q_final"].shape[0] == 2


@pytest.mark.parametrize(
    ("key", "value"),
    [
        *[("steps", v) for v in NOT_COUNTS],
        *[("seed", v) for v in [2.5, True, "0", None, -1]],
    ],
)
def test_uq_run_refuses_bad_values(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=_refused(key, value)):
        uq.build({"smoke": True, key: value})


def test_uq_run_defaults_pass() -> None:
    out = uq.build({"smoke": True}).fn(**uq.example(0))
    assert out["mean"].shape == (4, 1)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        *[("seed", v) for v in [1.5, True, "0", None, -1]],
        *[("eval_batch", v) for v in NOT_COUNTS],
    ],
)
def test_lif_build_refuses_bad_values(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=_refused(key, value)):
        lif.build({"smoke": True, key: value})


def test_lif_evaluate_refuses_bad_eval_batch() -> None:
    with pytest.raises(ConfigError, match=_refused("eval_batch", 2.5)):
        lif.evaluate(lambda feeds: {}, {"eval_batch": 2.5})


def test_lif_defaults_pass() -> None:
    assert lif.checked_seed({}) == 0 and lif.eval_batch({}) == 120
    lif.build({"smoke": True, "seed": 3, "eval_batch": 7})
