"""Loihi 2's field limits on the Lava path: the 17-bit threshold, the 12-bit decays, a
non-spiking hidden population, the input scale and the bias channel's own scale."""

from __future__ import annotations

import re

import numpy as np
import pytest
from neuroedge.cli import main
from neuroedge.errors import ConfigError, ExportRefused


def test_the_threshold_cap_binds_and_weights_keep_their_value_at_the_capped_scale():
    """Small weights and no bias left the scale (= vth) unbounded: Norse's LIF at dt=2e-5 got
    vth=409587, whose vth << 6 the 24-bit voltage can never exceed (the neuron never fired).
    Now the 17-bit field caps it, and every weight is still represented at that scale."""
    from neuroedge.backends.lava_fixed_point import VTH_MAX
    from neuroedge.backends.lava_map import Layer, Synapse, quantize

    norse = Layer("norse", (Synapse("input", np.array([[0.08]])),), np.zeros(1), 0.008, True, (1,))
    fixed = quantize(norse, {"input": 1.0})
    assert fixed.vth == VTH_MAX == 131071  # the cap is what binds (409587 before)
    (w_int,), (exp,) = fixed.weights, fixed.weight_exps
    assert w_int[0, 0] * 2.0**exp == pytest.approx(0.08 * VTH_MAX, rel=2e-3)
    rng = np.random.default_rng(0)
    for k in range(20):
        w = rng.normal(size=(8, 5)) * 10.0 ** rng.uniform(-4, 1)
        layer = Layer(f"r{k}", (Synapse("x", w),), np.zeros(8), 0.1, True, (8,))
        for q in (1.0, 255.0):
            fixed = quantize(layer, {"x": q})
            (w_int,), (exp,) = fixed.weights, fixed.weight_exps
            step = 2.0 ** (exp + 1) * q / fixed.scale  # one step of the even 8-bit weights
            assert np.abs(w_int * 2.0**exp * q / fixed.scale - w).max() <= step, (k, q)
            assert np.abs(w_int).max() <= 256 and -8 <= exp <= 7


def test_no_scale_with_precision_left_is_refused_naming_the_layer_and_limits():
    from neuroedge.backends.lava_map import Layer, Synapse, quantize

    # a delayed synapse applies no weight exponent: weight 1e4 in 8 bits needs scale 0.025
    layer = Layer("wide", (Synapse("x", np.array([[1e4]]), delay=1),), np.zeros(1), 0.5, True, (1,))
    with pytest.raises(ExportRefused, match=r"'wide'.*vth\) would be 0 < 1.*delayed x #0 0\.0254"):
        quantize(layer)
    # a synapse whose weights all round to 0 (exponent -8 at the bottom) would vanish silently
    tiny = Layer(
        "faint",
        (Synapse("x", np.array([[1.0]])), Synapse("y", np.array([[1e-9]]))),
        np.zeros(1),
        0.5,
        True,
        (1,),
    )
    with pytest.raises(ExportRefused, match=r"'faint': every weight from 'y' \(largest 1e-09\)"):
        quantize(tiny, {"x": 1.0, "y": 255.0})


def test_decays_outside_12_bits_are_refused_not_clipped():
    from neuroedge.backends.lava_map import Layer, Synapse, quantize

    def layer(dv: float, du: float):
        return Layer("pop", (Synapse("x", np.eye(2)),), np.zeros(2), dv, True, (2,), 1, du)

    assert (quantize(layer(1.0, 1.0)).dv, quantize(layer(1.0, 1.0)).du) == (4095, 4095)
    assert (quantize(layer(0.1, 0.45)).dv, quantize(layer(0.1, 0.45)).du) == (410, 1842)
    with pytest.raises(ExportRefused, match=r"'pop' dv = dt / tau = 4\.5 needs the integer 18432"):
        quantize(layer(4.5, 1.0))  # was dv_int=18432 unchecked
    with pytest.raises(ExportRefused, match=r"'pop' du = dt / tau = 5 needs.*20479.*unstable"):
        quantize(layer(0.5, 5.0))  # was clipped to 4095
    with pytest.raises(ExportRefused, match=r"du = dt / tau = 1e-05 needs the integer -1"):
        quantize(layer(0.5, 1e-5))  # was clipped to 0


def li_hidden_graph():
    """Input -> Affine -> LI -> Affine -> LIF -> Output (the audit's li_hidden.nir)."""
    import nir

    rng = np.random.default_rng(0)
    return nir.NIRGraph(
        nodes={
            "in": nir.Input({"input": np.array([4])}),
            "a1": nir.Affine(
                weight=np.float32(rng.normal(size=(6, 4))), bias=np.float32(np.zeros(6))
            ),
            "li": nir.LI(
                tau=np.float32(np.full(6, 0.01)),
                r=np.float32(np.ones(6)),
                v_leak=np.float32(np.zeros(6)),
            ),
            "a2": nir.Affine(
                weight=np.float32(rng.normal(size=(3, 6)) * 20), bias=np.float32(np.zeros(3))
            ),
            "lif": nir.LIF(
                tau=np.float32(np.full(3, 0.01)),
                r=np.float32(np.ones(3)),
                v_leak=np.float32(np.zeros(3)),
                v_threshold=np.float32(np.full(3, 0.05)),
                v_reset=np.float32(np.zeros(3)),
            ),
            "out": nir.Output({"output": np.array([3])}),
        },
        edges=[("in", "a1"), ("a1", "li"), ("li", "a2"), ("a2", "lif"), ("lif", "out")],
        metadata={"dt": 1e-3},
    )


def test_hidden_li_population_is_refused_on_lava_and_runs_on_the_host():
    """Lava built no process for the LI population and crashed with KeyError: 'li'."""
    from neuroedge.backends.lava_map import plan
    from neuroedge.export.nir_run import run_nir

    graph = li_hidden_graph()
    xs = (np.random.default_rng(1).random((10, 2, 4)) < 0.5).astype(np.float32)
    assert run_nir(graph, {"in": xs})["out"].shape == (10, 2, 3)
    readout_only = r"node 'li' is a non-spiking LI .*feeding 'lif'; a non-spiking LI population "
    with pytest.raises(ExportRefused, match=readout_only + "can only be a readout on Lava"):
        plan(graph, dt=1e-3)


def nir_spec(graph, dt: float, source: str, n_in: int, sink: str, n_out: int):
    """A throwaway spec around a NIR graph for the Lava backend's compile."""
    from neuroedge.types import IOSpec, ModelSpec, NIRProgram

    return ModelSpec(
        f"snn.{source}_{sink}",
        "snn",
        "NIR graph under test",
        (IOSpec(source, ("T", "batch", n_in)),),
        (IOSpec(sink, ("T", "batch", n_out)),),
        build=lambda cfg: NIRProgram(graph, dt),
        example=lambda s: {},
    )


@pytest.mark.loihi
def test_bias_channel_scale_does_not_follow_the_input_scale(require, nir_data):
    """Braille's recurrent bias is a delayed synapse (exp 0): through a channel of value
    input_scale = 255, 22 of its 38 weights rounded to 0."""
    require("lava")
    from neuroedge.backends.lava_map import BIAS_SOURCE
    from neuroedge.export.nir import read_nir
    from neuroedge.registry import get_backend
    from neuroedge.types import NIRProgram

    graph = read_nir(nir_data("rnn/braille_noDelay_bias_zero.nir"))
    spec = nir_spec(graph, 1e-4, "input", 12, "output", 7)
    scales = []
    for input_scale in ("255", "1"):  # 255: the bias channel was 255 too
        options = {"variant": "fixed_pt", "input_scale": input_scale}
        net = get_backend("lava").compile(NIRProgram(graph, 1e-4), spec, options).handle
        net.close()  # nothing built: the processes come with the first run
        for layer, fixed in zip(net.layers, net.fixed):
            for j, syn in enumerate(layer.synapses):
                if syn.source != BIAS_SOURCE:
                    continue
                assert np.all(fixed.weights[j][syn.weight != 0] != 0), (layer.name, syn.delay)
                if syn.delay:  # exp 0: the channel value puts its largest weight in 8 bits
                    assert np.abs(fixed.weights[j]).max() >= 128
        scales.append([fixed.bias_scale for fixed in net.fixed])
    assert scales[0] == scales[1] and all(1 <= v <= 255 for v in scales[0])


def test_bias_channel_scale_is_the_populations_own_unless_given():
    from neuroedge.backends.lava_map import BIAS_SOURCE, Layer, Synapse, quantize

    bias = Synapse(BIAS_SOURCE, np.array([[1.7], [0.01]]), delay=1)
    layer = Layer("p", (Synapse("x", np.eye(2)), bias), np.zeros(2), 0.1, True, (2,), 2, 0.45)
    one, full = quantize(layer, {"x": 1.0}), quantize(layer, {"x": 255.0})
    assert one.bias_scale == full.bias_scale > 1  # a delayed bias gets the channel it needs
    assert quantize(layer, {"x": 1.0, BIAS_SOURCE: 7.0}).bias_scale == 7.0
    assert quantize(layer, 3.0).bias_scale == 3.0  # one number: every synapse, as before


@pytest.mark.parametrize("variant", ["floating_pt", "fixed_pt"])
@pytest.mark.parametrize("scale", ["-3", "0", "2.5", "300"])
def test_input_scale_is_checked_whatever_the_variant(variant, scale, nir_data):
    from neuroedge.api import check_nir

    path = nir_data("lif/lif_norse.nir")
    with pytest.raises(ConfigError, match=f"input_scale '{scale}'.*integer in 1..255"):
        check_nir(
            path, "lava", dt=1e-4, steps=4, options={"variant": variant, "input_scale": scale}
        )


def test_default_input_scale_is_one_for_binary_input_else_255():
    from neuroedge.backends.lava import DEFAULT_INPUT_SCALE, default_input_scale
    from neuroedge.nir_check import _nir_options

    spikes = (np.random.default_rng(0).random((5, 2, 3)) < 0.3).astype(np.float32)
    assert default_input_scale(spikes) == 1.0
    assert default_input_scale(spikes * 0.5) == DEFAULT_INPUT_SCALE == 255.0
    assert _nir_options("lava", {"variant": "fixed_pt"}, spikes)["input_scale"] == "1"
    assert _nir_options("lava", None, spikes * 0.5) == {"input_scale": "255"}
    given = {"variant": "fixed_pt", "input_scale": "7"}
    assert _nir_options("lava", given, spikes) == given


@pytest.mark.loihi
def test_norse_lif_at_a_short_dt_fires_in_fixed_pt_as_in_floating_pt(require, nir_data):
    """dt=2e-5 under Norse's tau=2.5 ms: fixed_pt gave 0 spikes (vth 409587, equal 0.930)."""
    require("lava")
    from neuroedge.api import check_nir

    rows = {}
    for variant in ("floating_pt", "fixed_pt"):
        report = check_nir(
            nir_data("lif/lif_norse.nir"),
            "lava",
            dt=2e-5,
            steps=200,
            batch=1,
            density=1.0,
            options={"variant": variant, "input_scale": "1"},
        )
        rows[variant] = report["outputs"]["output"]
    assert rows["fixed_pt"]["reference_mean"] * 200 == pytest.approx(14)
    assert rows["floating_pt"]["equal_fraction"] == rows["fixed_pt"]["equal_fraction"] == 1.0


@pytest.mark.loihi
def test_two_lif_neurons_first_population_fires_in_fixed_pt(require, nir_data):
    """two_lif_neurons.nir at dt=1e-4: lif1 got vth=682500 and never fired in fixed_pt."""
    require("lava")
    from neuroedge.export.nir import read_nir
    from neuroedge.registry import get_backend
    from neuroedge.types import NIRProgram

    graph = read_nir(nir_data("lif/two_lif_neurons.nir"))
    x = np.ones((400, 1, 1), np.float32)
    spec = nir_spec(graph, 1e-4, "in", 1, "out", 1)
    lava, spikes = get_backend("lava"), {}
    for variant in ("floating_pt", "fixed_pt"):
        art = lava.compile(NIRProgram(graph, 1e-4), spec, {"variant": variant, "input_scale": "1"})
        try:
            spikes[variant] = art.handle.run(x, every_population=True)["lif1"]
        finally:
            art.handle.close()
    assert spikes["floating_pt"].sum() == 6  # steps 60, 121, ..., 365
    np.testing.assert_array_equal(spikes["fixed_pt"], spikes["floating_pt"])


@pytest.mark.loihi
def test_nir_check_defaults_to_scale_one_for_spikes_and_flags_a_silent_reference(
    require, tmp_path, capsys
):
    require("lava")
    import nir
    from neuroedge.api import check_nir
    from neuroedge.cli import main

    graph = li_hidden_graph()  # without the LI: a spiking chain, silent with zero weights
    graph = nir.NIRGraph(
        nodes={
            "in": graph.nodes["in"],
            "a1": nir.Affine(weight=np.float32(np.zeros((3, 4))), bias=np.float32(np.zeros(3))),
            "lif": graph.nodes["lif"],
            "out": graph.nodes["out"],
        },
        edges=[("in", "a1"), ("a1", "lif"), ("lif", "out")],
        metadata={"dt": 1e-3},
    )
    path = tmp_path / "quiet.nir"
    nir.write(str(path), graph)
    report = check_nir(path, "lava", steps=5, batch=1, options={"variant": "fixed_pt"})
    assert report["input_scale"] == 1.0  # the random binary input
    row = report["outputs"]["out"]
    assert row["equal_fraction"] == 1.0 and row["reference_silent"]
    assert main(["nir", str(path), "--steps", "5", "--batch", "1"]) == 0
    assert "  warning: reference output silent" in capsys.readouterr().out


@pytest.mark.loihi
def test_braille_fixed_pt_agreement_with_the_default_input_scale(require, nir_data):
    """Before: default input_scale 255 (bias channel 255 too) gave 0.634 on this input; 1 for
    the binary input and a bias channel of its own give 0.760 (0.788 mean over 30 seeds)."""
    require("lava")
    from neuroedge.api import check_nir

    report = check_nir(
        nir_data("rnn/braille_noDelay_bias_zero.nir"),
        "lava",
        dt=1e-4,
        steps=60,
        batch=3,
        options={"variant": "fixed_pt"},
    )
    row = report["outputs"]["output"]
    assert row["equal_fraction"] >= 0.72 and report["input_scale"] == 1.0
    # the host fires 32% here: kappa (agreement beyond chance) sits well below agreement
    assert 0.3 < row["spike_kappa"] < row["equal_fraction"] - 0.2, row


def test_a_voltage_leak_that_rounds_to_zero_is_refused_not_dropped():
    """tau_mem = 1 s at dt = 1e-4 gives dv = 0.41 / 4096: rounded to 0 the leaky neuron became
    integrate-and-fire silently; dv = 0 exactly (no leak) stays allowed."""
    from types import SimpleNamespace

    from neuroedge.backends.lava_fixed_point import _decays

    with pytest.raises(ExportRefused, match="dv = dt / tau = 0.0001 needs the integer 0"):
        _decays(SimpleNamespace(name="lif", dv=1e-4, du=1.0))
    assert _decays(SimpleNamespace(name="if", dv=0.0, du=1.0)) == (0, 4095)


@pytest.mark.loihi
def test_fixed_pt_refuses_inputs_whose_graded_spike_wraps_in_int32(require):
    """round(x * input_scale) was cast to int32 before the 8-bit check: 1e8 and inf wrapped to
    INT_MIN, whose abs is negative, so a huge pixel went in as a spike of about -2**31."""
    require("lava")
    from neuroedge.errors import InputError
    from neuroedge.registry import get_backend, get_model

    spec, lava = get_model("snn.lif_convnet"), get_backend("lava")
    art = lava.compile(spec.build({"smoke": True}), spec, {"variant": "fixed_pt"})
    x = spec.example_for(0, {"smoke": True})["x"]
    for big in (1e8, 1e30, 2.0):  # 2.0 (510) was refused before too
        y = x.copy()
        y.flat[0] = big
        want = re.escape(f"fixed_pt input {big:.4g} x input_scale 255 exceeds")
        with pytest.raises(InputError, match=want):
            lava.run(art, {"x": y})
    for bad in (np.inf, -np.inf, np.nan):  # the network itself, as per-layer parity calls it
        y = x.copy()
        y.flat[0] = bad
        with pytest.raises(InputError, match="fixed_pt input holds 1 NaN or inf values"):
            art.handle.run(y)
    assert not art.handle._built  # refused before any Lava process was made


BAD_OPTIONS = (
    ("input_scale=999", "input_scale '999'"),
    ("variant=bogus", "variant='bogus': expected one of floating_pt, fixed_pt"),
    ("config=xx", "config='xx': expected 'hw' or 'sim'"),
    ("chips=0", "chips='0': expected an integer >= 1"),
)


@pytest.mark.parametrize(("option", "message"), BAD_OPTIONS)
def test_a_bad_lava_option_value_is_refused_before_the_build(option, message, monkeypatch, capsys):
    """run/bench/deploy check options before the build (which may train); compile refused
    these values only after it (and after a train_if_missing training)."""
    import dataclasses

    import neuroedge.api as api
    from neuroedge.backends.lava import LavaBackend
    from neuroedge.types import Support

    if not LavaBackend().probe().ok:
        pytest.skip(LavaBackend().probe().reason)

    def boom(config):
        raise AssertionError("built before the lava options were checked")

    spec = dataclasses.replace(api.get_model("snn.lif_convnet"), build=boom)
    monkeypatch.setattr(api, "get_model", lambda name: spec)
    monkeypatch.setattr(LavaBackend, "supports", lambda self, spec: Support(True))
    args = ["run", "snn.lif_convnet", "--backend", "lava", "--option", option, "--repeats", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(("option", "message"), BAD_OPTIONS)
def test_a_bad_lava_option_value_is_named_without_lava(option, message, monkeypatch):
    """Without lava the value is the same ConfigError (was 'not available'), from compile and
    from the check before the build, and ``neuroedge nir`` still says it as given (999)."""
    import neuroedge.backends.lava as lava
    from neuroedge.backends.base import check_options_before_build

    monkeypatch.setattr(lava, "installed_problem", lambda: "lava-nc is not installed")
    key, value = option.split("=")
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_options_before_build(lava.LavaBackend(), {key: value})
    with pytest.raises(ConfigError, match=re.escape(message)):
        lava.LavaBackend().compile(None, None, {key: value})  # before the program is read


def test_nir_shows_a_bad_input_scale_as_given(monkeypatch, capsys, nir_data):
    import neuroedge.backends.lava as lava

    monkeypatch.setattr(lava, "installed_problem", lambda: "lava-nc is not installed")
    path = str(nir_data("lif/lif_norse.nir"))
    args = ["nir", path, "--backend", "lava", "--input-scale", "999", "--steps", "3"]
    assert main([*args, "--dt", "1e-4"]) == 2
    err = capsys.readouterr().err
    assert "input_scale 999:" in err and "not available" not in err
