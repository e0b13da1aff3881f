"""The shared config value checks: no silent conversion, every refusal names key and value."""

from __future__ import annotations

import re

import pytest

from neuroedge.config_values import choice, flag, int_list, integer, number, number_list
from neuroedge.errors import ConfigError


@pytest.mark.parametrize("value", [2.5, True, "3", [3], None, 0, 11])
def test_integer_refuses_what_is_not_an_integer_in_range(value) -> None:
    with pytest.raises(ConfigError, match=r"k=.*: expected an integer in 1\.\.10"):
        integer({"k": value}, "k", 1, 10)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "1", True, 0.0, -1, 10**400])
def test_number_refuses_non_finite_wrong_type_and_out_of_range(value) -> None:
    with pytest.raises(ConfigError, match=r"x=.*: expected a finite number > 0"):
        number({"x": value}, "x", 0.0, open_low=True)


def test_lists_and_choices() -> None:
    assert integer({"k": 3}, "k", 1) == 3 and number({"x": 2}, "x", 0.0) == 2.0
    assert int_list({"m": [1, 2]}, "m", 1) == [1, 2]
    assert number_list({"d": [0.5, 2]}, "d", 0.0, open_low=True) == [0.5, 2.0]
    for bad in (5, [], "12", [1, 2.5]):
        with pytest.raises(ConfigError, match="m="):
            int_list({"m": bad}, "m", 1)
    with pytest.raises(ConfigError, match="mode='x': expected one of a, b"):
        choice({"mode": "x"}, "mode", ("a", "b"))


@pytest.mark.parametrize(
    ("model", "key"),
    [("snn.lif_convnet", "untrained"), ("snn.unisparse", "smoke"), ("uq.last_layer", "smoke")],
)
def test_a_flag_given_as_text_is_refused_not_taken_as_true(model, key, capsys) -> None:
    from neuroedge.cli import main

    # "no" is truthy: before, `untrained=no` ran untrained weights with a clean report
    assert main(["run", model, "--config", f"{key}=no"]) == 2
    assert f"{key}='no': expected true or false" in capsys.readouterr().err
    assert flag({key: False}, key) is False and flag({}, key) is False
    with pytest.raises(ConfigError, match=rf"{key}=1: expected true or false"):
        flag({key: 1}, key)
    with pytest.raises(ConfigError, match=r"from Python the bool True, not the string 'True'\)"):
        flag({key: "True"}, key)  # from Python


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train_if_missing=yes"], r"train_if_missing='yes': expected true or false"),
        (["untrained=true", "train_config=5"], r"train_config=5: expected a mapping"),
        (["untrained=true", "seed=1.5"], r"seed=1\.5: expected an integer in 0\.\.4294967295"),
    ],
)
def test_unisparse_build_switches_are_checked_before_training(args, message, capsys) -> None:
    from neuroedge.cli import main

    # before: "yes" started a training run, 5 raised a TypeError, 1.5 ran as seed 1
    assert main(["run", "snn.unisparse", "--config", *args]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_a_numpy_bool_is_a_flag() -> None:
    import numpy as np

    import neuroedge as ne

    # before: "untrained=True: expected true or false" for np.bool_(True)
    assert flag({"untrained": np.bool_(True)}, "untrained") is True
    assert flag({"smoke": np.bool_(False)}, "smoke") is False
    _, report = ne.deploy("snn.lif_convnet", config={"untrained": np.bool_(True)}, repeats=1)
    assert any(n.startswith("weights: untrained") for n in report.notes)


@pytest.mark.parametrize("config", ["untrained=true", ["smoke"], 5])
def test_a_config_that_is_no_mapping_is_refused_naming_it(config) -> None:
    import neuroedge as ne

    # before: the str passed the key loop (one-letter keys), then AttributeError on .get
    with pytest.raises(ConfigError, match=r"snn.lif_convnet: config=.* is not a mapping"):
        ne.deploy("snn.lif_convnet", config=config, repeats=1)
    with pytest.raises(ConfigError, match=r"snn.lif_convnet: config=.* is not a mapping"):
        ne.export("snn.lif_convnet", config=config)


def test_layered_puts_smoke_under_the_users_keys_and_refuses_a_key_the_variant_never_reads():
    from neuroedge.config_values import layered

    defaults, smoke = {"steps": 100, "lam": 1.0, "seed": 0}, {"steps": 3, "seed": 9}
    unread = {"control": (("lam",), "the control trains with lam 0")}
    kinds = ("trigger", "control")
    assert layered({}, defaults, smoke, kinds, unread=unread) == ("trigger", False, defaults)
    variant, on, cfg = layered({"smoke": True, "steps": 7}, defaults, smoke, kinds)
    assert (variant, on, cfg) == ("trigger", True, {"steps": 7, "lam": 1.0, "seed": 9})
    got = layered({"variant": "control"}, defaults, smoke, kinds, default="control")
    assert got[0] == "control" and "variant" not in got[2]
    assert layered({}, defaults, smoke, kinds, default="control")[0] == "control"
    unread["control"] = (("lam", "steps"), "the control trains with lam 0")
    tail = r"\(the control trains with lam 0\): drop it, or pick another variant$"
    with pytest.raises(ConfigError, match=r"^lam=2 has no effect with variant=control " + tail):
        layered({"variant": "control", "steps": 5, "lam": 2}, defaults, smoke, kinds, unread=unread)
    with pytest.raises(ConfigError, match=r"variant='nope': expected one of trigger, control"):
        layered({"variant": "nope"}, defaults, smoke, kinds)
    with pytest.raises(ConfigError, match=r"smoke='yes': expected true or false"):
        layered({"smoke": "yes"}, defaults, smoke)
    # no variants: a variant key is left for the model's own check to refuse
    assert layered({"variant": "x"}, defaults, smoke) == (None, False, {**defaults, "variant": "x"})
