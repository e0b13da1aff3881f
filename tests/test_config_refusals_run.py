"""Bad --config values of `neuroedge run` are typed errors naming the key, never a traceback,
also where the example input is built before the model (a width, a seed, a variant)."""

from __future__ import annotations

import numpy as np
import pytest

from neuroedge.cli import main

CASES = [
    ("ttt.linear_attention", ["d_model=[32]"], "d_model=[32]: expected an integer in 1..4096"),
    ("ttt.linear_attention", ["d_model=32.5"], "d_model=32.5: expected an integer in 1..4096"),
    ("vla.specprune", ["smoke=true", "seed=[1]"], "seed=[1]: expected an integer"),
    ("vla.specprune", ["smoke=true", "seed=1.5"], "seed=1.5: expected an integer"),  # ran as 1
    ("event.bivision", ["smoke=true", "variant=[1]"], "variant=[1]: expected one of"),
    ("event.bivision", ["smoke=true", 'variant="foo"'], "variant='foo': expected one of"),
]


@pytest.mark.parametrize(("name", "config", "message"), CASES)
def test_bad_config_values_are_named_without_a_traceback(name, config, message, capsys) -> None:
    assert main(["run", name, "--repeats", "1", "--config", *config]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bivision_example_is_in_the_representation_of_the_nets_variant() -> None:
    from neuroedge.registry import get_model

    spec = get_model("event.bivision")
    e2s = spec.example_for(0, {"smoke": True})["x"]
    hist = spec.example_for(0, {"smoke": True, "variant": "lif_histogram"})["x"]
    assert e2s.shape == hist.shape == (5, 1, 2, 32, 32)
    assert set(np.unique(e2s).tolist()) <= {0.0, 1.0}  # spikes
    assert hist.max() > 1.0 and np.any(hist != np.round(hist))  # log1p of event counts


FRESH_MODELS = (
    "vla.specprune",
    "causal.cadre",
    "snn.lif_convnet",
    "snn.unisparse",
    "physics.meshft",
    "event.bivision",
    "halluc.freq_attention",
)
TRAIN_CONFIG_MODELS = ("vla.specprune", "snn.lif_convnet", "snn.unisparse")  # build reads it
UNTRAINED_MODELS = ("snn.lif_convnet", "snn.unisparse")  # build reads untrained=true


def _fresh_cases() -> list[tuple[str, str, str]]:
    cases = [(m, "smoke", "checkpoint") for m in FRESH_MODELS]
    cases += [(m, "smoke", "train_config") for m in TRAIN_CONFIG_MODELS]
    cases += [(m, "untrained", k) for m in UNTRAINED_MODELS for k in ("checkpoint", "train_config")]
    return cases


@pytest.mark.parametrize(("name", "switch", "key"), _fresh_cases())
def test_an_untrained_build_with_weights_named_is_refused(name, switch, key, tmp_path, capsys):
    """smoke=true (or untrained=true) builds an untrained net: a checkpoint or train_config
    given with it was never read (only event.bivision refused it; the others ran untrained)."""
    ckpt = tmp_path / "c.pt"
    ckpt.write_bytes(b"")
    value = str(ckpt) if key == "checkpoint" else '{"seed": 1}'
    given = repr(str(ckpt)) if key == "checkpoint" else "{'seed': 1}"
    config = [f"{switch}=true", f"{key}={value}"]
    assert main(["run", name, "--backend", "null", "--repeats", "1", "--config", *config]) == 2
    err = capsys.readouterr().err
    want = f"{switch}=true builds an untrained net, so {key}={given} would not be read: drop one"
    assert want in err and "Traceback" not in err
