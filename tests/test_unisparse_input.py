"""snn.unisparse bad input: config values, CIFAR-10 batch files and the recipe's command line are
refused before any training, with a typed error naming the key (or file), value and expectation.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from neuroedge.errors import ConfigError
from neuroedge.models.unisparse import pipeline, train
from neuroedge.models.unisparse.data import ImageSplit, load_cifar10
from neuroedge.models.unisparse.pipeline import check_config, check_device, check_variants
from neuroedge.models.unisparse.recipe import main as recipe_main

QUICK = {**train.DEFAULTS, "train_subset": 64, "dense_epochs": 1, "sparse_epochs": 1}


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any training (or data loading) fails the test: every refusal must come first."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("training started before the config was checked")

    monkeypatch.setattr(train, "train_dense", refuse)
    monkeypatch.setattr(train, "sparsify", refuse)
    monkeypatch.setattr(pipeline, "load_data", refuse)


BAD_VALUES = [
    ("budget_ratio", "abc", r"in \(0, 1\]"),
    ("budget_ratio", [1], r"in \(0, 1\]"),
    ("budget_ratio", 0.0, r"in \(0, 1\]"),
    ("budget_ratio", 1.5, r"in \(0, 1\]"),
    ("budget_ratio", True, r"in \(0, 1\]"),
    ("energy_target_uj", -1.0, "> 0"),
    ("energy_target_uj", math.inf, "> 0"),
    ("energy_target_uj", "lots", "> 0"),
    ("aim", 0.0, r"in \(0, 1\]"),
    ("aim", 2.0, r"in \(0, 1\]"),
    ("spike_grad", "atan", "surrogate, model"),
    ("mask_gate", "foo", "ste, anneal"),
    ("arch", "resnet50", "mini, resnet18"),
    ("steps", 0, r"integer in 1\.\.256"),
    ("steps", 99999999999, r"integer in 1\.\.256"),  # std::bad_alloc
    ("batch", 0, "integer >= 1"),
    ("batch", 16.5, "integer >= 1"),
    ("dense_epochs", -1, r"integer in 0\.\.100000"),
    ("sparse_epochs", "10", r"integer in 0\.\.100000"),
    ("finetune_epochs", 1.5, r"integer in 0\.\.100000"),
    ("train_subset", -5, "integer >= 1 or None"),
    ("train_subset", 0, "integer >= 1 or None"),
    ("threads", 0, r"integer in 1\.\.4096"),
    ("threads", 3_000_000_000, r"integer in 1\.\.4096"),  # torch: Overflow
    ("seed", -1, r"integer in 0\.\.4294967295"),
    ("seed", 5_000_000_000, r"integer in 0\.\.4294967295"),  # sklearn's message
    ("seeds", [-1], r"\[-1\] are not integers in 0\.\.4294967295"),
    ("seeds", [3, 2**32], r"\[4294967296\] are not integers in 0\.\.4294967295"),
    ("seeds", "3", "non-empty list of integers"),
    ("lr", 0.0, r"in \(0, 10\]"),
    ("kd_weight", 1.5, r"in \[0, 1\]"),
    ("augment", "yes", "true or false"),
    ("data", 3, "cifar-10-batches-py folder"),
    ("data", "", "cifar-10-batches-py folder"),
    ("device", 5, "'cpu', 'cuda'"),
    ("device", "gpu", "torch refuses it"),
    ("variants", "dense,unisparse", "unknown variant 'dense,unisparse'"),
    ("variants", [1], "unknown variant 1"),
    ("variants", [], "non-empty list"),
    ("variants", ["dense", "random_mask"], "run unisparse too"),
]


@pytest.mark.parametrize(("key", "value", "expected"), BAD_VALUES)
def test_check_config_names_key_value_and_expectation(key: str, value: object, expected: str):
    with pytest.raises(ConfigError, match=expected) as err:
        check_config({**QUICK, key: value})
    assert str(err.value).startswith(f"{key}={value!r}: ")


@pytest.mark.parametrize(("key", "value", "expected"), BAD_VALUES)
def test_run_variants_refuses_bad_values_before_training(no_training, key, value, expected):
    variants = value if key == "variants" else ["dense", "unisparse"]
    with pytest.raises(ConfigError, match=expected):
        pipeline.run_variants({**QUICK, key: value}, variants, progress=False)


def test_defaults_and_recipe_pass_and_a_single_variant_is_a_list() -> None:
    from neuroedge.models.unisparse.recipe import RECIPE

    assert check_config(train.DEFAULTS) == train.DEFAULTS
    assert check_config({**train.DEFAULTS, **RECIPE}, device=False)["arch"] == "resnet18"
    assert check_config({**QUICK, "variants": "dense"})["variants"] == ["dense"]
    assert check_variants(("dense", "unisparse")) == ["dense", "unisparse"]
    ok = {**QUICK, "train_subset": None, "energy_target_uj": None, "data": "/some/folder"}
    assert check_config(ok)["train_subset"] is None


def test_one_budget_only_and_energy_target_is_checked_too() -> None:
    both = {"energy_target_uj": 0.5, "budget_ratio": 0.2}
    with pytest.raises(ConfigError, match="both given: set one budget only"):
        check_config({**QUICK, **both}, both)
    # energy_target_uj with the default budget_ratio: the target wins, nothing to refuse
    assert check_config({**QUICK, "energy_target_uj": 0.5}, {"energy_target_uj": 0.5})
    with pytest.raises(ConfigError, match=r"^budget_ratio=2"):
        check_config({**QUICK, "energy_target_uj": 0.5, "budget_ratio": 2})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_cuda_without_a_cuda_device_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"device='cuda:0'.*0 CUDA devices; pass device=cpu"):
        check_device("cuda:0")


def test_sparsify_refuses_an_unknown_mask_gate() -> None:
    with pytest.raises(ValueError, match="mask_gate 'foo' is not one of"):
        train._check_sparsify_args("unisparse", 1.0, {**train.DEFAULTS, "mask_gate": "foo"})


def test_bench_refuses_before_training_and_writes_nothing(no_training, tmp_path: Path) -> None:
    from neuroedge.models.unisparse.bench import run_bench

    with pytest.raises(ConfigError, match=r"^dense_epochs=-1: expected an integer in 0\.\.100000"):
        run_bench(str(tmp_path / "out"), ["host"], {"dense_epochs": -1})
    with pytest.raises(ConfigError, match="both given"):
        run_bench(str(tmp_path / "out"), ["host"], {"energy_target_uj": 1, "budget_ratio": 0.5})
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (["seeds=[-1]"], "seeds=[-1]: [-1] are not integers in 0..4294967295"),
        (["seeds=[4294967296]"], "[4294967296] are not integers in 0..4294967295"),
        (["steps=99999999999"], "steps=99999999999: expected an integer in 1..256"),
        (["threads=3000000000"], "threads=3000000000: expected an integer in 1..4096"),
        (["seed=5000000000"], "seed=5000000000: expected an integer in 0..4294967295"),
    ],
)
def test_bench_cli_refuses_seeds_and_unbounded_counts_before_training(
    no_training, tmp_path: Path, capsys, config: list[str], expected: str
) -> None:
    """``seeds=[-1]`` and ``[4294967296]`` trained (seed 0, unchecked); steps=99999999999
    was std::bad_alloc, threads=3e9 an overflow, seed=5e9 sklearn's error."""
    from neuroedge.cli import main

    out = tmp_path / "out"
    assert main(["bench", "snn.unisparse", "--out", str(out), "--config", *config]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and not out.exists()


@pytest.mark.parametrize(
    ("train_config", "expected"),
    [
        ('train_config={"bogus": 1}', "snn.unisparse training does not read 'bogus'; its keys:"),
        ("train_config=5", "train_config=5: expected a mapping"),
        ('train_config={"steps": 99999999999}', "steps=99999999999: expected an integer in"),
    ],
)
def test_build_checks_its_train_config_before_training(
    no_training, capsys, train_config: str, expected: str
) -> None:
    """A key training does not read in ``train_config`` was ignored and training started."""
    from neuroedge.cli import main

    # no checkpoint in the test's NEUROEDGE_HOME: train_if_missing (the default) would train
    assert main(["run", "snn.unisparse", "--config", train_config]) == 2
    assert expected in capsys.readouterr().err


def test_train_refuses_bad_values_and_a_folder_as_checkpoint(no_training, tmp_path: Path):
    with pytest.raises(ConfigError, match=r"^mask_gate='foo'"):
        pipeline.train_and_save({"mask_gate": "foo"}, str(tmp_path / "c.pt"))
    with pytest.raises(IsADirectoryError):
        pipeline.train_and_save({}, str(tmp_path))


def test_zero_epochs_report_no_time_per_epoch_without_a_warning() -> None:
    from neuroedge.models.unisparse.module import MINI, SpikingResNet

    rng = np.random.default_rng(0)
    x = rng.random((4, 1, 8, 8), dtype=np.float32)
    data = ImageSplit(x, np.arange(4), x, np.arange(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = pipeline.measure_variant(
            "dense", SpikingResNet(MINI).eval(), [], data, train.DEFAULTS, None
        )
    assert math.isnan(result.metrics["train_s_per_epoch"].value)


# CIFAR-10 batch files


GOOD_DATA = np.zeros((2, 3072), np.uint8)


@pytest.mark.parametrize(
    ("blob", "expected"),
    [
        ({b"data": GOOD_DATA, b"labels": None}, "b'labels' must be N=2 ints in 0..9, got NoneType"),
        ({b"x": 1, "y": 2}, r"expected a dict with b'data' and b'labels', got keys \['y', b'x'\]"),
        ({b"data": np.zeros((0, 3072), np.uint8), b"labels": []}, "holds no images"),
        ({b"data": GOOD_DATA, b"labels": ["a", "b"]}, "ints in 0..9, got <U1 values such as 'a'"),
        ({b"data": GOOD_DATA, b"labels": [0.5, 1.0]}, "ints in 0..9, got 0.5 at index 0"),
        ({b"data": GOOD_DATA, b"labels": [1, 10]}, "ints in 0..9, got 10 at index 1"),
        ({b"data": GOOD_DATA, b"labels": [1, None]}, "ints in 0..9, got object values"),
        ({b"data": GOOD_DATA, b"labels": [[1], [2, 3]]}, "b'labels' is not an array"),
        ({b"data": GOOD_DATA, b"labels": [1]}, r"N=2 ints in 0..9, got shape \(1,\)"),
    ],
)
def test_malformed_cifar_batch_names_the_file(tmp_path, write_cifar, blob, expected):
    with pytest.raises(ValueError, match=expected) as err:
        load_cifar10(write_cifar(tmp_path, 4, blob))
    assert str(err.value).startswith(f"{tmp_path / 'data_batch_2'}: ")


def test_whole_float_labels_load_as_ints(tmp_path: Path, write_cifar) -> None:
    split = load_cifar10(write_cifar(tmp_path, 4, {b"data": GOOD_DATA, b"labels": [3.0, 7.0]}))
    assert split.y_train.dtype == np.int64 and list(split.y_train[4:6]) == [3, 7]


# the recipe's command line


def _recipe(tmp_path: Path, *config: str, out: Path | None = None) -> int:
    argv = ["--data", str(tmp_path / "cifar"), "--out", str(out or tmp_path / "out")]
    return recipe_main([*argv, "--config", *config] if config else argv)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (["budgt_ratio=0.5"], "'budgt_ratio' (did you mean 'budget_ratio'?)"),
        (["device=5"], "device=5: expected 'cpu'"),
        (["device=cpu", "budget_ratio=abc"], "budget_ratio='abc': expected a finite number"),
        (["device=cpu", "data=/elsewhere"], "reads the CIFAR-10 folder from --data"),
        (["device=cpu", "variants=dense,unisparse"], "unknown variant 'dense,unisparse'"),
        (["device=cpu", "arch=mini"], "arch='mini' takes 1x8x8 images and 10 classes; the data"),
    ],
)
def test_recipe_cli_prints_one_error_line_and_exits_2(
    no_training, tmp_path, capsys, write_cifar, config, expected
):
    write_cifar(tmp_path / "cifar", 4)
    assert _recipe(tmp_path, *config) == 2
    err = capsys.readouterr().err
    assert err.startswith("recipe: error: ") and expected in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_recipe_cli_refuses_missing_data_and_a_file_as_out(
    no_training, tmp_path, capsys, write_cifar
) -> None:
    assert _recipe(tmp_path, "device=cpu") == 2
    assert "recipe: error: CIFAR-10 folder" in capsys.readouterr().err
    write_cifar(tmp_path / "cifar", 4)
    (tmp_path / "report").write_text("")
    assert _recipe(tmp_path, "device=cpu", out=tmp_path / "report") == 2
    assert "is a file; give a folder" in capsys.readouterr().err


def test_an_arch_that_does_not_fit_the_data_is_refused_before_training(monkeypatch) -> None:
    """ResNet-18 (3x32x32) on digits (1x8x8) failed inside the first conv with torch's own
    message; now a ConfigError naming both shapes comes before any training."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("training started")

    monkeypatch.setattr(train, "train_dense", refuse)
    with pytest.raises(ConfigError, match="arch='resnet18' takes 3x32x32 images .* 1x8x8"):
        pipeline.run_variants({**QUICK, "arch": "resnet18"}, ("dense",), progress=False)


def _seeded_checkpoint(path: Path, seed: int, config: dict | None = None) -> Path:
    """A checkpoint as training saves it (random fixed-mask weights), trained with ``seed``."""
    from neuroedge.checkpoints import save_checkpoint
    from unisparse_nets import random_net

    saved = {**train.DEFAULTS, **(config or {}), "seed": seed}
    return save_checkpoint(path, {"state_dict": random_net(seed).state_dict(), "config": saved})


def test_a_seed_that_contradicts_the_checkpoint_is_refused(no_training, tmp_path, capsys):
    """``seed`` drew only the weights the checkpoint then overwrote: seed=7 ran the seed-3 net
    (and its split), as snn.lif_convnet refuses. A checkpoint that saved no seed (from before
    the key) is not contradicted: it builds."""
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.cli import main
    from neuroedge.models.unisparse import spec as spec_mod
    from unisparse_nets import random_net

    ckpt = _seeded_checkpoint(tmp_path / "u.pt", 3)
    run = ["run", "snn.unisparse", "--backend", "null", "--repeats", "1", "--config"]
    assert main([*run, f"checkpoint={ckpt}", "seed=7"]) == 2
    err = capsys.readouterr().err
    assert f"seed=7 contradicts the checkpoint {ckpt} (trained with seed=3)" in err
    with pytest.raises(ConfigError, match="seed=7 contradicts the checkpoint"):
        spec_mod.data_settings({"checkpoint": str(ckpt), "seed": 7})
    assert spec_mod.build({"checkpoint": str(ckpt), "seed": 3}).meta["trained"]
    old = {k: v for k, v in train.DEFAULTS.items() if k != "seed"}  # saved before seed was
    old_path = save_checkpoint(
        tmp_path / "old.pt", {"state_dict": random_net(3).state_dict(), "config": old}
    )
    assert spec_mod.build({"checkpoint": str(old_path), "seed": 7}).meta["trained"]


def test_train_if_missing_trains_with_the_builds_seed(no_training, tmp_path, monkeypatch, capsys):
    """The build's ``seed`` is what train_if_missing trains with: seed=5 saved a checkpoint
    trained with seed 0 (train_config alone went to training)."""
    from neuroedge.cli import main
    from neuroedge.models.unisparse import spec as spec_mod

    calls: list[dict] = []

    def fake_train(config, out=None):
        calls.append(dict(config))
        _seeded_checkpoint(Path(out), config.get("seed", 0), config)
        return {"path": out}

    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(pipeline, "train_and_save", fake_train)
    run = ["run", "snn.unisparse", "--backend", "null", "--repeats", "1", "--config"]
    assert main([*run, "seed=5", 'train_config={"seed": 3}']) == 2
    assert "seed=5 contradicts train_config seed=3: give it once" in capsys.readouterr().err
    assert calls == []
    config = {"train_if_missing": True, "seed": 5, "train_config": {"dense_epochs": 1}}
    assert spec_mod.data_settings(config) == (5, spec_mod.STEPS)  # before it is trained
    program = spec_mod.build(config)
    assert calls == [{"dense_epochs": 1, "seed": 5}]
    assert program.meta["trained"] and program.meta["config"][spec_mod.BUILT]["seed"] == 5


def test_lava_samples_without_lava_is_refused_before_training(no_training, tmp_path, capsys):
    """``lava_samples`` is read by the Lava rows alone: with --backend host it was accepted,
    written into report.json and never read."""
    from neuroedge.cli import main
    from neuroedge.models.unisparse.bench import run_bench

    out = tmp_path / "out"
    bench = ["bench", "snn.unisparse", "--out", str(out)]
    assert main([*bench, "--backend", "host", "--config", "lava_samples=12"]) == 2
    err = capsys.readouterr().err
    assert "config lava_samples=12 (the test digits of the Lava rows) is read only with the " in err
    assert "lava backend, which is not among this run's backends (host)" in err
    assert not out.exists()
    with pytest.raises(ConfigError, match=r"backends \(host, onnxrt\): add --backend host,lava"):
        run_bench(str(out), ["host", "onnxrt"], {"lava_samples": 12})


def test_lava_samples_with_lava_unavailable_is_refused_before_training(
    no_training, tmp_path, monkeypatch
):
    """lava asked for but its probe failing: the Lava rows are skipped, so ``lava_samples``
    would be accepted and unread (ttt refused its onnxrt keys then; unisparse accepted)."""
    from neuroedge.models.unisparse.bench import run_bench
    from neuroedge.registry import get_backend
    from neuroedge.types import Availability

    answer = Availability(False, "stubbed: lava-nc is not installed")
    monkeypatch.setattr(type(get_backend("lava")), "probe", lambda self: answer)
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=r"not available here \(stubbed: lava-nc is not ins"):
        run_bench(str(out), ["host", "lava"], {"lava_samples": 12})
    assert not out.exists()
