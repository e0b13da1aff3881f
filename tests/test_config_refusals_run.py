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


BIG = 2**64  # overflowed a C integer (a traceback, or a message naming no key)
COUNT_CASES = [  # (verb, model, config, message): each refused before any work, rc 2
    ("run", "uq.last_layer", ["steps=10**12"], "steps=1000000000000: expected an integer in 1.."),
    ("run", "uq.last_layer", [f"seed={BIG}"], f"seed={BIG}: expected an integer in 0..2147483647"),
    ("train", "snn.unisparse", ["dense_epochs=10**12"], "dense_epochs=1000000000000: expected"),
    ("train", "snn.unisparse", [f"sparse_epochs={BIG}"], f"sparse_epochs={BIG}: expected"),
    ("train", "snn.unisparse", [f"finetune_epochs={BIG}"], f"finetune_epochs={BIG}: expected"),
    ("bench", "apr.conrad", ["samples=10**12"], "samples=1000000000000: expected an integer"),
    ("run", "apr.conrad", ["lm_stages=[[1]]"], "lm_stages must be a non-empty list of"),
    ("bench", "apr.conrad", ["arms=[[1]]"], "arms must be a non-empty list of"),
    ("run", "apr.conrad", ["model="], "model '': 'scripted', 'smollm2', a model file"),
    ("run", "event.bivision", [f"seed={BIG}"], f"seed={BIG}: expected an integer in 0..4294967295"),
    ("run", "graph.influence_max", [f"seed={BIG}"], f"seed={BIG}: expected an integer in 0.."),
    ("bench", "alloc.envy_free", [f"seed={BIG}"], f"seed={BIG}: expected an integer in 0.."),
]


@pytest.mark.parametrize(("verb", "name", "config", "message"), COUNT_CASES)
def test_huge_counts_and_unhashable_items_are_refused_by_key(
    verb, name, config, message, tmp_path, capsys
) -> None:
    """Counts without an upper bound ran on without end (steps=10**12) or overflowed (2**64);
    list items that are lists failed in set(); model="" loaded the working folder."""
    config = [c.replace("10**12", str(10**12)) for c in config]
    if verb == "run":
        config += ["smoke=true"] if name != "graph.influence_max" else []
        args = ["run", name, "--backend", "null", "--repeats", "1"]
    else:
        args = [verb, name, "--out", str(tmp_path / "out")]
    assert main([*args, "--config", *config]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_checked_numbers_are_returned_as_floats() -> None:
    """number() was only a check: its float was dropped, so 2**64 reached torch as an int
    (OverflowError in causal.cadre; NaN or a run on in snn.unisparse)."""
    from neuroedge.models.cadre import train as cadre
    from neuroedge.models.unisparse import pipeline, train

    # integers at the keys' upper bounds (2**64 itself is refused now: a loss weight over 1e6
    # or a rate over 10 trained to NaN or not at all)
    top = 10**6
    cfg = cadre.check_config({**cadre.DEFAULTS, "alpha": top, "beta": top, "lambda_s": top})
    assert all(type(cfg[k]) is float for k in ("alpha", "beta", "lambda_s", "lambda_z", "lr"))
    cfg = pipeline.check_config({**train.DEFAULTS, "lr": 10, "kd_temp": 100}, device=False)
    assert type(cfg["lr"]) is float and type(cfg["kd_temp"]) is float
