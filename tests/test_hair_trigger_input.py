"""safety.hair_trigger: bad input is refused with a typed error naming the problem.

Only one test trains (a ``smoke`` build, 20 steps); every other refusal must come before any
training, which ``no_training`` proves by making ``functional.meta_train`` fail the test.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from neuroedge.cli import main
from neuroedge.errors import ConfigError
from neuroedge.models.hair_trigger import experiment as X
from neuroedge.models.hair_trigger import functional as F
from neuroedge.models.hair_trigger import spec as S

SHAPE_MSG = "expected [rows >= 1, 64] bag-of-words, got "


def inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fresh copies of the example's probes [4, 64], update_x [32, 64] and update_y [32]."""
    ex = S.example(0)
    return ex["probes"].copy(), ex["update_x"].copy(), ex["update_y"].copy()


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    def meta_train(*args, **kwargs):
        pytest.fail("meta_train ran: the bad value was not refused before training")

    monkeypatch.setattr(F, "meta_train", meta_train)


# check_audit_inputs: valid input
def test_valid_example_comes_back_as_tensors_of_the_spec_dtypes():
    p, x, y = inputs()
    assert p.shape == (4, 64) and x.shape == (32, 64) and y.shape == (32,)
    probes, update_x, update_y = S.check_audit_inputs(p, x, y)
    assert all(isinstance(t, torch.Tensor) for t in (probes, update_x, update_y))
    assert probes.dtype == update_x.dtype == torch.float32
    assert update_y.dtype == torch.int64
    np.testing.assert_array_equal(probes.numpy(), p)
    np.testing.assert_array_equal(update_x.numpy(), x)
    np.testing.assert_array_equal(update_y.numpy(), y)
    lists = S.check_audit_inputs(p.tolist(), x.tolist(), y.astype(np.uint8).tolist())
    assert lists[2].dtype == torch.int64 and torch.equal(lists[2], update_y)


# check_audit_inputs: shapes of probes and update_x
@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize(
    ("reshape", "shape"),
    [
        (lambda a: a[0], "[64]"),  # 1-D
        (lambda a: a[None], None),  # 3-D
        (lambda a: a[:, :63], None),  # 63 columns
        (lambda a: np.concatenate([a, a[:, :1]], 1), None),  # 65 columns
        (lambda a: a[:0], None),  # zero rows
        (lambda a: a[0, 0], "[]"),  # a scalar
    ],
)
def test_wrong_shape_is_refused_naming_the_input_and_its_shape(which, reshape, shape):
    args = list(inputs())
    args[which] = reshape(args[which])
    name = ("probes", "update_x")[which]
    got = shape or str(list(args[which].shape))
    with pytest.raises(ValueError, match=re.escape(f"{name}: {SHAPE_MSG}{got}")):
        S.check_audit_inputs(*args)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize(("which", "row", "col"), [(0, 2, 5), (1, 7, 63)])
def test_nan_or_inf_is_refused_naming_the_input_row_and_column(bad, which, row, col):
    args = list(inputs())
    args[which][row, col] = bad
    name = ("probes", "update_x")[which]
    msg = rf"{name}: row {row} column {col} \(0-based\) value -?(nan|inf) is not finite"
    with pytest.raises(ValueError, match=msg):
        S.check_audit_inputs(*args)


# check_audit_inputs: update_y
@pytest.mark.parametrize(
    ("make_y", "got"),
    [
        (lambda y: y[:-1], "int64 [31]"),  # one label short
        (lambda y: np.concatenate([y, y[:1]]), "int64 [33]"),  # one too many
        (lambda y: y[:, None], "int64 [32, 1]"),  # a column, not a vector
        (lambda y: y.astype(np.float64), "float64 [32]"),  # float labels, even integral
        (lambda y: y.astype(np.float32), "float32 [32]"),
        (lambda y: y.astype(bool), "bool [32]"),
        (lambda y: y[:0], "int64 [0]"),
    ],
)
def test_update_y_of_wrong_length_or_dtype_is_refused(make_y, got):
    p, x, y = inputs()
    msg = re.escape(f"update_y: expected 32 integer labels (one per update_x row), got {got}")
    with pytest.raises(ValueError, match=msg):
        S.check_audit_inputs(p, x, make_y(y))


@pytest.mark.parametrize(("row", "label"), [(3, 10), (0, -1), (31, 255)])
def test_label_outside_the_classes_is_refused_naming_row_and_label(row, label):
    p, x, y = inputs()
    y[row] = label
    msg = rf"^update_y row {row}: label {label} is not a class 0\.\.9$"
    with pytest.raises(ValueError, match=msg):
        S.check_audit_inputs(p, x, y)


def test_the_first_bad_label_is_the_one_named():
    p, x, y = inputs()
    y[[4, 9]] = [12, -3]
    with pytest.raises(ValueError, match=r"update_y row 4: label 12 "):
        S.check_audit_inputs(p, x, y)


# experiment.check_config
@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("steps", 2.5, "expected an integer in 1..1000000"),
        ("steps", 0, "expected an integer in 1..1000000"),
        ("steps", True, "expected an integer in 1..1000000"),
        ("width", 0, "expected an integer in 1..4096"),
        ("audit_batches", 0, "expected an integer in 1..1000"),
        ("batch", 0, "expected an integer in 1..100000"),
        ("update_batch", -4, "expected an integer in 1..100000"),
        ("secrets", 0, "expected an integer in 1..100000"),
        ("seed", 1.5, "expected an integer"),
        ("lr", 0, "expected a finite number in (0, 1]"),
        ("lr", float("nan"), "expected a finite number in (0, 1]"),
        ("lr", "0.1", "expected a finite number in (0, 1]"),
        ("lam", 0, "expected a finite number in (0, 1e+06]"),
        ("eta", -1, "expected a finite number in (0, 100]"),
        ("eta", 101, "expected a finite number in (0, 100]"),
        ("rescale_c", [], "expected a non-empty list of numbers"),
        ("rescale_c", 8, "expected a non-empty list of numbers"),
        ("secret_widths", [], "expected a non-empty list of integers"),
        ("secret_widths", [0], "[0] are not integers in 1..4096"),
        ("secret_widths", [4, 2.5], "[2.5] are not integers in 1..4096"),
    ],
)
def test_bad_config_value_is_a_config_error_naming_key_and_value(key, value, expected):
    with pytest.raises(ConfigError, match=re.escape(f"{key}={value!r}: {expected}")):
        X.check_config({**X.DEFAULTS, key: value})


@pytest.mark.parametrize(("items", "bad"), [([0], 0), ([-1], -1), ([2, 8, float("inf")], "inf")])
def test_bad_rescale_c_entry_is_named(items, bad):
    msg = rf"^rescale_c={bad}: expected a finite number > 0$"
    with pytest.raises(ConfigError, match=msg):
        X.check_config({**X.DEFAULTS, "rescale_c": items})


def test_defaults_pass_unchanged():
    cfg = X.check_config(X.DEFAULTS)
    assert cfg == X.DEFAULTS and cfg is not X.DEFAULTS
    assert isinstance(cfg["steps"], int) and isinstance(cfg["lr"], float)


@pytest.mark.parametrize(
    ("config", "error", "msg"),
    [
        ({"steps": 0}, ConfigError, r"^steps=0: expected an integer in 1\.\.1000000$"),
        ({"rescale_c": [0]}, ConfigError, r"^rescale_c=0: expected a finite number > 0$"),
        ({"workers": 0}, ValueError, r"workers must be a positive integer, got 0"),
        ({"seeds": [0, 0]}, ValueError, r"seeds must be distinct, got \[0, 0\]"),
    ],
)
def test_bench_refuses_before_training_and_writes_nothing(
    no_training, tmp_path, config, error, msg
):
    with pytest.raises(error, match=msg):
        X.bench(out_dir=str(tmp_path / "report"), config=config)
    assert list(tmp_path.iterdir()) == []


# spec.build
def test_unknown_variant_is_refused_naming_the_valid_ones(no_training):
    msg = r"^variant='bogus': expected one of hair_trigger, control$"
    with pytest.raises(ConfigError, match=msg):
        S.build({"variant": "bogus"})
    with pytest.raises(ConfigError, match=r"^variant=3: expected one of hair_trigger, control"):
        S.build({"variant": 3, "smoke": True})


@pytest.mark.parametrize(
    ("config", "msg"),
    [
        ({"eta": 0}, r"^eta=0: expected a finite number in \(0, 100\]$"),
        ({"steps": 0, "smoke": True}, r"^steps=0: expected an integer in 1\.\.1000000$"),
        ({"width": 0, "variant": "control"}, r"^width=0: expected an integer in 1\.\.4096$"),
        ({"lam": -1.0}, r"^lam=-1\.0: expected a finite number in \(0, 1e\+06\]$"),
    ],
)
def test_bad_build_value_is_refused_before_training(no_training, config, msg):
    with pytest.raises(ConfigError, match=msg):
        S.build(config)


def test_smoke_build_audit_refuses_bad_input_and_runs_valid_input():
    program = S.build({"smoke": True, "variant": "control"})  # the one training here (~0.1 s)
    assert program.meta["variant"] == "control"
    p, x, y = inputs()
    out = program.fn(p, x, y)
    assert out["before"].shape == out["after"].shape == (4, 10)
    assert out["before"].dtype == np.float64
    np.testing.assert_allclose(out["after"].sum(1), 1.0, rtol=1e-6)
    y[5] = 10
    with pytest.raises(ValueError, match=r"update_y row 5: label 10 is not a class 0\.\.9"):
        program.fn(p, x, y)
    with pytest.raises(ValueError, match=re.escape(f"probes: {SHAPE_MSG}[4, 32]")):
        program.fn(p[:, :32], x, y)


# the CLI
def test_cli_bench_names_an_unknown_key_and_exits_2(no_training, tmp_path, capsys):
    out = tmp_path / "report"
    code = main(["bench", "safety.hair_trigger", "--out", str(out), "--config", "stepz=3"])
    err = capsys.readouterr().err
    assert code == 2
    assert "neuroedge: error: safety.hair_trigger's benchmark does not read" in err
    assert "'stepz' (did you mean 'steps'?)" in err
    assert not out.exists()


def test_cli_bench_bad_value_exits_2_before_training(no_training, tmp_path, capsys):
    out = tmp_path / "report"
    code = main(["bench", "safety.hair_trigger", "--out", str(out), "--config", "steps=0"])
    assert code == 2
    assert "neuroedge: error: steps=0: expected an integer in 1..1000000" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("item", "msg"),
    [
        ("variant=bogus", "variant='bogus': expected one of hair_trigger, control"),
        ("eta=0", "eta=0: expected a finite number in (0, 100]"),
        ("audit_batches=3", "build does not read the config key 'audit_batches'"),
    ],
)
def test_cli_run_refuses_bad_build_config_with_exit_2(no_training, capsys, item, msg):
    code = main(["run", "safety.hair_trigger", "--config", item])
    captured = capsys.readouterr()
    assert code == 2
    assert "neuroedge: error: " in captured.err and msg in captured.err
    assert "latency" not in captured.out


def test_grad_tensors_text_and_a_string_smoke_are_handled() -> None:
    ex = S.example(0)
    probes = torch.as_tensor(ex["probes"]).requires_grad_(True)
    x, _, _ = S.check_audit_inputs(probes, ex["update_x"], ex["update_y"])
    torch.testing.assert_close(x, torch.as_tensor(ex["probes"]))
    with pytest.raises(ValueError, match=r"probes: not an array of numbers"):
        S.check_audit_inputs([["a"] * 64], ex["update_x"], ex["update_y"])
    with pytest.raises(ConfigError, match=r"smoke='no': expected true or false"):
        S.build({"smoke": "no"})


@pytest.mark.parametrize("seeds", [[-1], [0, -5]])
def test_every_seed_of_a_list_is_checked_before_training(seeds, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(F, "meta_train", lambda *a, **k: pytest.fail("training started"))
    with pytest.raises(ConfigError, match=r"seed=-\d+: expected an integer in 0\.\.2147483647"):
        X.bench(out_dir=str(tmp_path / "out"), config={"seeds": seeds})
    assert not (tmp_path / "out").exists()


class Stop(Exception):
    pass


def test_smoke_keeps_the_steps_the_user_gives(monkeypatch) -> None:
    seen = {}

    def meta_train(cfg, seed, **kwargs):
        seen.update(steps=cfg.steps, lam=cfg.lam)
        raise Stop  # before any training: the config is what is tested

    monkeypatch.setattr(F, "meta_train", meta_train)
    with pytest.raises(Stop):
        S.build({"smoke": True, "steps": 300})  # smoke set 20 over it
    assert seen["steps"] == 300
    with pytest.raises(Stop):
        S.build({"smoke": True})
    assert seen["steps"] == S.SMOKE["steps"] == 20
    with pytest.raises(Stop):
        S.build({"smoke": True, "variant": "control"})
    assert seen["lam"] == 0.0


@pytest.mark.parametrize(
    ("items", "msg"),
    [
        (["smoke=true", "steps=0"], "steps=0: expected an integer in 1..1000000"),
        (["smoke=true", "steps=1500"], "steps=1500 x batch=64: training would draw"),
        (["variant=control", "lam=0.5"], "lam=0.5 has no effect with variant=control"),
        (["smoke=true", "variant=control", "lam=5"], "lam=5 has no effect with variant=control"),
    ],
)
def test_cli_run_refuses_a_key_the_build_would_ignore_or_a_bad_smoke_value(
    no_training, capsys, items, msg
) -> None:
    code = main(["run", "safety.hair_trigger", "--config", *items])
    assert code == 2
    assert f"neuroedge: error: {msg}" in capsys.readouterr().err
