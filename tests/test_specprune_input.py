"""vla.specprune bench: every config value is refused before the checkpoint is loaded, anything
is exported or any closed-loop episode runs, with the key, the value and what is expected."""

from __future__ import annotations

import json
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
        ({"baseline_budget": 0}, HOST, r"baseline_budget=0: expected an integer in 1\.\.128"),
        ({"baseline_budget": "8"}, HOST, r"baseline_budget='8': expected an integer in 1\.\.128"),
        ({"repeats": 0}, HOST, r"repeats=0: expected an integer in 1\.\.1000000"),
        ({"episodes": 0}, HOST, r"episodes=0: expected an integer in 1\.\.1000000"),
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


def _train_refusal(capsys: pytest.CaptureFixture[str], config: list[str]) -> str:
    from neuroedge.cli import main

    assert main(["train", "vla.specprune", "--config", *config]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (["steps=1000001"], "steps=1000001: expected an integer in 0..1000000"),
        (["finetune_steps=10**12"], "finetune_steps='10**12': expected an integer in 0..1000000"),
        (["finetune_steps=1000000000000"], "finetune_steps=1000000000000: expected an integer in"),
        (["batch=1000000"], "batch=1000000: expected an integer in 1..54000 (the most"),
        (["episodes=1", 'tasks=["reach"]', "batch=61"], "batch=61: expected an integer in 1..60"),
        (["lr=18446744073709551616"], "lr=18446744073709551616: expected a finite number in (0,"),
        (["init=[]"], 'init=[]: expected the path of a checkpoint file, or ""'),
        (["init=0"], 'init=0: expected the path of a checkpoint file, or ""'),
        (["init=false"], 'init=False: expected the path of a checkpoint file, or ""'),
        (["init=null"], 'init=None: expected the path of a checkpoint file, or ""'),
    ],
)
def test_train_refuses_before_the_demos(monkeypatch, capsys, config, expected):
    """Old code: unbounded steps ran on (2**64: OverflowError); a batch above the demos was
    refused after them (11-20 min) without naming batch=; init=[], 0 or false trained fresh
    weights; lr=2**64 reached torch as an int and trained to NaN."""
    _no_training(monkeypatch)
    assert expected in _train_refusal(capsys, config)


def test_train_loads_the_init_checkpoint_before_the_demos(monkeypatch, capsys, tmp_path):
    """Old code only checked that the file existed and read it after the demos."""
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.models.specprune import train

    _no_training(monkeypatch)
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint\n")
    err = _train_refusal(capsys, [f"init={json.dumps(str(junk))}"])
    assert f"init: {junk}: not a readable checkpoint" in err
    small = {**train.DEFAULTS, "dim": 32, "heads": 2, "depth": 1, "ffn": 64}
    other = tmp_path / "small.pt"
    save_checkpoint(other, train.checkpoint_payload(train.make_policy(small), small))
    err = _train_refusal(capsys, [f"init={json.dumps(str(other))}"])
    assert (
        f"init='{other}': a network of dim=32, heads=2, depth=1, ffn=64; this training's is dim=128"
        in err
    )
    same = {k: small[k] for k in ("dim", "heads", "depth", "ffn")}
    assert train.training_config({**same, "init": str(other)})["init"] == str(other)


def test_training_config_keeps_the_checked_numbers():
    """Old code discarded number()'s float: lr=1 (an int) or 2**64 went on as given."""
    from neuroedge.models.specprune.train import training_config

    cfg = training_config({"lr": 1, "finetune_lr": 2, "max_minutes": 3})
    assert [type(cfg[k]) for k in ("lr", "finetune_lr", "max_minutes")] == [float] * 3


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (["episodes=1000001"], "episodes=1000001: expected an integer in 1..1000000"),
        (["repeats=1000000000000"], "repeats=1000000000000: expected an integer in 1..1000000"),
        (["baseline_budget=129"], "baseline_budget=129: expected an integer in 1..128"),
        (["budgets=[16,200]"], "budgets=[16, 200]: [200] are not integers in 1..128"),
    ],
)
def test_bench_refuses_counts_and_budgets_before_the_checkpoint(
    monkeypatch, tmp_path, capsys, config, expected
):
    """Old code: episodes and repeats unbounded (endless work); baseline_budget and budgets
    bounded only after load_trained, which trains (~75 min) when no checkpoint exists."""
    from neuroedge.cli import main
    from neuroedge.models.specprune import spec

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("the checkpoint was loaded or trained before the config check")

    _no_training(monkeypatch)
    monkeypatch.setattr(spec, "load_trained", no_load)
    out = tmp_path / "out"
    assert main(["bench", "vla.specprune", "--out", str(out), "--config", *config]) == 2
    assert expected in capsys.readouterr().err and not out.exists()


def test_visual_tokens_are_fixed_by_the_architecture_and_readme_configs_pass():
    """check_bench_config bounds baseline_budget by spec.VISUAL: every policy has that many."""
    from neuroedge.models.specprune import spec, train

    for sizes in ({}, {"dim": 32, "heads": 2, "depth": 1, "ffn": 64, "vit_depth": 1}):
        assert train.policy_parameters({**train.DEFAULTS, **sizes}) > 0
        assert train.make_policy({**train.DEFAULTS, **sizes}).n_visual == spec.VISUAL == 128
    for seed0, episodes in ((10200, 150), (10350, 150), (10650, 450), (11100, 150)):
        check_bench_config({"seed0": seed0, "episodes": episodes, "baseline_budget": 31}, HOST)
    check_bench_config({"budgets": [16, 8, 1], "blank_views": ["primary", "wrist"]}, HOST)
    check_bench_config({"seed0": 20000, "episodes": 100, "budgets": [128]}, HOST)
    assert train.training_config({})["steps"] == 1600  # the default recipe passes
