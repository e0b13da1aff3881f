"""vla.specprune bench: every config value is refused before the checkpoint is loaded, anything
is exported or any closed-loop episode runs, with the key, the value and what is expected."""

from __future__ import annotations

import time

import pytest
import torch
from neuroedge.errors import ConfigError
from neuroedge.models.specprune import bench
from neuroedge.models.specprune.bench_checks import check_baseline_budget, check_bench_config

HOST, BOTH = ("host",), ("host", "onnxrt")


@pytest.mark.parametrize(
    ("config", "backends", "expected"),
    [
        ({"tasks": ["button", "bogus"]}, HOST, r"\['bogus'\] are not tasks; valid tasks: button"),
        ({"tasks": "button"}, HOST, r"tasks='button': expected a non-empty list of task names"),
        ({"tasks": []}, HOST, r"tasks=\[\]: expected a non-empty list"),
        ({"tasks": ["reach", "reach"]}, HOST, r"a task is listed twice"),
        ({"baseline_budget": 0}, HOST, r"baseline_budget=0: expected an integer >= 1"),
        ({"baseline_budget": "8"}, HOST, r"baseline_budget='8': expected an integer >= 1"),
        ({"repeats": 0}, HOST, r"repeats=0: expected an integer >= 1"),
        ({"episodes": 0}, HOST, r"episodes=0: expected an integer >= 1"),
        ({"threads": 0}, HOST, r"threads=0: expected an integer in 1\.\.4096"),
        ({"threads": 3_000_000_000}, HOST, r"threads=3000000000: expected an integer in 1\.\."),
        ({"workers": -1}, HOST, r"workers=-1: expected an integer >= 1"),
        ({"eval_backend": "foo"}, BOTH, r"eval_backend='foo': expected one of host, onnxrt"),
        ({"eval_backend": "onnxrt"}, HOST, r"--backend is host: pass --backend host,onnxrt"),
        ({"seed0": "x"}, HOST, r"seed0='x': expected an integer in 0\.\.4294967295 \(the first"),
        ({"seed0": -1}, HOST, r"seed0=-1: expected an integer in 0\.\.4294967295"),  # trained
        ({"budgets": 8}, HOST, r"budgets=8: expected a non-empty list of integers"),
        ({"blank_views": ["nose"]}, HOST, r"blank_views \['nose'\] are not cameras"),
        ({"candidates": [{"bogus": 1}]}, HOST, r"\['bogus'\] are not PruneConfig fields"),
    ],
)
def test_bad_bench_config_names_key_value_and_expectation(config, backends, expected):
    with pytest.raises(ConfigError, match=expected):
        check_bench_config(config, backends)


@pytest.mark.parametrize(
    ("config", "backends"),
    [
        ({}, HOST),
        ({"eval_backend": "host"}, BOTH),
        ({"eval_backend": "onnxrt"}, BOTH),
        ({"tasks": ["button"], "episodes": 1, "repeats": 1, "threads": 1}, HOST),
        ({"baseline_budget": 31, "workers": 2, "seed0": 20000, "budgets": [16, 8]}, BOTH),
    ],
)
def test_good_configs_pass(config, backends):
    check_bench_config(config, backends)


def test_baseline_budget_is_checked_against_the_network():
    assert check_baseline_budget(128, 128) == 128
    with pytest.raises(ConfigError, match=r"baseline_budget=1000: expected an integer in 1..128"):
        check_baseline_budget(1000, 128)


def test_run_bench_refuses_before_loading_the_checkpoint(tmp_path):
    """Old code loaded (here: failed to find) the checkpoint first, then ran cells."""
    config = {
        "checkpoint": str(tmp_path / "missing.pt"),
        "train_if_missing": False,
        "tasks": ["button", "bogus"],
    }
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="bogus"):
        bench.run_bench(str(tmp_path / "out"), HOST, config)
    assert time.perf_counter() - start < 5 and not (tmp_path / "out").exists()


def test_run_bench_refuses_a_too_large_budget_before_any_episode(monkeypatch, tmp_path):
    from neuroedge.models.specprune import spec, train

    model = train.make_policy(train.DEFAULTS).eval()
    monkeypatch.setattr(spec, "load_trained", lambda cfg: (model, dict(train.DEFAULTS)))

    def no_episodes(*args, **kwargs):
        raise AssertionError("closed-loop cells ran before the config was checked")

    monkeypatch.setattr(bench, "evaluate_all", no_episodes)
    monkeypatch.setattr(bench, "export_methods", no_episodes)
    with pytest.raises(ConfigError, match=f"baseline_budget=1000: expected .*1..{model.n_visual}"):
        bench.run_bench(str(tmp_path / "out"), HOST, {"baseline_budget": 1000})


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"method": "foo"}, r"method='foo': expected one of \['unpruned', 'specprune'"),
        ({"mode": "foo"}, r"mode='foo': controller mode 'foo' is not one of"),
    ],
)
def test_build_refuses_method_and_mode_before_the_checkpoint(tmp_path, config, expected):
    """Old code loaded (or trained, minutes) the checkpoint before reading them."""
    from neuroedge.models.specprune.spec import build

    missing = {"checkpoint": str(tmp_path / "missing.pt"), "train_if_missing": False}
    with pytest.raises(ConfigError, match=expected):
        build({**missing, **config})


def _no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    from neuroedge.models.specprune import data, train

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the expert demos or training started before the config check")

    monkeypatch.setattr(data, "load_or_generate", refuse)
    monkeypatch.setattr(train, "run_phase", refuse)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (["seed=abc"], "seed='abc': expected an integer in 0..4294967295"),
        (["seed=-7"], "seed=-7: expected an integer in 0..4294967295"),
        (["seed=3"], "seed=3: seed draws the untrained weights of smoke=true only"),
        (["train_config=5"], "train_config=5: expected a mapping"),
        (['train_config={"bogus": 1}'], "vla.specprune training does not read 'bogus'"),
        (['train_config={"threads": 3000000000}'], "threads=3000000000: expected an integer in"),
        (['train_config={"dim": 4096, "depth": 1024}'], "parameters, above 100,000,000"),
    ],
)
def test_run_checks_seed_and_train_config_before_training(monkeypatch, capsys, config, expected):
    """Each went straight into the demos and training (~75 minutes), or crashed (TypeError for
    train_config=5); a seed without smoke had no effect. No checkpoint in the test's home."""
    from neuroedge.cli import main

    _no_training(monkeypatch)
    assert main(["run", "vla.specprune", "--repeats", "1", "--config", *config]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_bench_checks_seed0_and_train_config_before_training(monkeypatch, tmp_path, capsys):
    from neuroedge.cli import main

    _no_training(monkeypatch)
    for config, expected in (
        (["seed0=-1"], "seed0=-1: expected an integer in 0..4294967295"),
        (['train_config={"bogus": 1}'], "vla.specprune training does not read 'bogus'"),
    ):
        out = tmp_path / "out"
        assert main(["bench", "vla.specprune", "--out", str(out), "--config", *config]) == 2
        assert expected in capsys.readouterr().err and not out.exists()


def test_smoke_build_takes_its_seed() -> None:
    from neuroedge.models.specprune.spec import build

    nets = [build({"smoke": True, "seed": s}).module for s in (1, 1, 2)]
    first = [p.detach() for p in nets[0].parameters()]
    assert all(torch.equal(a, b) for a, b in zip(first, nets[1].parameters(), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, nets[2].parameters(), strict=True))
