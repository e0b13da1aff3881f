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
