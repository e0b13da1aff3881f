"""The Lava backend: parity with the host, fixed-point quantisation, chip fit, install step."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from neuroedge.errors import ExportRefused


def conv_graph(seed: int = 0):
    """A random spiking convnet as a NIR graph: conv -> LIF -> conv -> avgpool -> LIF ->
    flatten -> affine -> LI, weights strong enough that both layers spike."""
    import nir

    rng = np.random.default_rng(seed)

    def lif(shape):
        return nir.LIF(
            tau=np.full(shape, 2e-3),
            r=np.ones(shape),
            v_leak=np.zeros(shape),
            v_threshold=np.full(shape, 1.0),
            metadata={"reset": "zero"},
        )

    nodes = {
        "x": nir.Input({"input": np.array([1, 8, 8])}),
        "c1": nir.Conv2d(
            (8, 8), rng.normal(0.8, 1.0, (4, 1, 3, 3)), 1, 1, 1, 1, rng.normal(0, 0.1, 4)
        ),
        "l1": lif((4, 8, 8)),
        "c2": nir.Conv2d((8, 8), rng.normal(0.3, 1.0, (6, 4, 3, 3)), 1, 1, 1, 1, np.zeros(6)),
        "pool": nir.AvgPool2d(np.array([2, 2]), np.array([2, 2]), np.array([0, 0])),
        "l2": lif((6, 4, 4)),
        "flat": nir.Flatten({"input": np.array([6, 4, 4])}, 0),
        "fc": nir.Affine(rng.normal(0, 0.5, (3, 96)), np.zeros(3)),
        "ro": nir.LI(tau=np.full(3, 2e-3), r=np.ones(3), v_leak=np.zeros(3)),
        "logits": nir.Output({"output": np.array([3])}),
        "spikes1": nir.Output({"output": np.array([4, 8, 8])}),
        "spikes2": nir.Output({"output": np.array([6, 4, 4])}),
    }
    chain = ["x", "c1", "l1", "c2", "pool", "l2", "flat", "fc", "ro", "logits"]
    edges = [*pairwise(chain), ("l1", "spikes1"), ("l2", "spikes2")]
    return nir.NIRGraph(nodes, edges, metadata={"dt": 1e-3})


@pytest.fixture(scope="module")
def nir_case():
    from neuroedge.export.nir_run import run_nir
    from neuroedge.types import IOSpec, ModelSpec, NIRProgram

    graph = conv_graph()
    xs = np.random.default_rng(1).random((6, 2, 1, 8, 8)).astype(np.float32)
    spec = ModelSpec(
        "snn.nir_test",
        "snn",
        "random NIR convnet",
        (IOSpec("x", ("T", "batch", 1, 8, 8)),),
        (IOSpec("logits", ("T", "batch", 3)),),
        build=lambda cfg: NIRProgram(graph, 1e-3),
        example=lambda s: {"x": xs},
    )
    ref = run_nir(graph, {"x": xs})
    assert ref["spikes1"].sum() > 0 and ref["spikes2"].sum() > 0
    return spec, NIRProgram(graph, 1e-3), {"x": xs}, ref


@pytest.mark.loihi
@pytest.mark.parametrize("variant,min_agreement", [("floating_pt", 1.0), ("fixed_pt", 0.9)])
def test_lava_spikes_agree_with_host_per_layer(nir_case, variant, min_agreement):
    from neuroedge.bench.parity import compare
    from neuroedge.registry import get_backend

    spec, program, inputs, host_ref = nir_case
    lava = get_backend("lava")
    art = lava.compile(program, spec, {"variant": variant, "input_scale": "255"})
    try:
        out = lava.run(art, inputs)
        again = lava.run(art, inputs)  # the reused network resets its state between calls
    finally:
        art.handle.close()
    for layer in ("spikes1", "spikes2"):
        agreement = float((out[layer] == host_ref[layer]).mean())
        assert agreement >= min_agreement, (layer, agreement)
        np.testing.assert_array_equal(again[layer], out[layer])
    if variant == "floating_pt":
        assert compare(host_ref, out)["max_abs_err"].value < 1e-4
    else:
        assert art.meta["weight_quant_err"] and max(art.meta["weight_quant_err"]) > 0


@pytest.mark.loihi
def test_lif_convnet_torch_program_maps_to_three_populations():
    from neuroedge.registry import get_backend, get_model

    spec = get_model("snn.lif_convnet")
    art = get_backend("lava").compile(
        spec.build({"untrained": True}), spec, {"variant": "fixed_pt"}
    )
    fit = art.meta["chip_fit"]
    assert [row[0] for row in fit.per_layer] == ["lif1", "lif2", "readout"]
    assert [row[1] for row in fit.per_layer] == [1024, 512, 10]
    assert fit.fits and fit.cores >= 3
    assert set(art.meta["outputs"]) == {"logits", "spikes1", "spikes2"}


def test_fixed_point_formats_fit_loihi():
    from neuroedge.backends.lava_map import Layer, Synapse, quantize

    rng = np.random.default_rng(0)
    layer = Layer(
        "l", (Synapse("x", rng.normal(size=(20, 30))),), rng.normal(size=20) * 0.1, 0.5, True, (20,)
    )
    q = quantize(layer)
    (w,), (exp,) = q.weights, q.weight_exps
    assert w.min() >= -256 and w.max() <= 254 and not np.any(w % 2)
    assert np.abs(w).max() >= 127  # the exponent puts the largest weight in the top bit
    eff = w * 2.0**exp  # worst binary input: every positive (or every negative) weight on
    assert max(np.clip(eff, 0, None).sum(1).max(), -np.clip(eff, None, 0).sum(1).min()) <= 32767
    assert 0 <= q.bias_exp <= 7 and np.abs(q.bias_mant).max() <= 4096
    assert q.dv == 2048 and q.vth == int(q.scale)
    step = 2.0 ** (exp + 1) / q.scale  # even integers: two units of 2^exp
    np.testing.assert_allclose(w * 2.0**exp / q.scale, layer.synapses[0].weight, atol=step)


def test_per_channel_thresholds_fold_into_weights():
    import nir
    from neuroedge.backends.lava_map import plan

    theta = np.array([1.0, 2.0, 4.0])
    graph = nir.NIRGraph(
        nodes={
            "input": nir.Input({"input": np.array([2])}),
            "fc": nir.Affine(np.ones((3, 2)), np.ones(3)),
            "lif": nir.LIF(
                tau=np.full(3, 2e-3), r=np.ones(3), v_leak=np.zeros(3), v_threshold=theta
            ),
            "output": nir.Output({"output": np.array([3])}),
        },
        edges=[("input", "fc"), ("fc", "lif"), ("lif", "output")],
    )
    (layer,) = plan(graph, dt=1e-3)
    np.testing.assert_allclose(layer.synapses[0].weight[:, 0], 0.5 / theta)
    np.testing.assert_allclose(layer.bias, 0.5 / theta)
    assert layer.dv == pytest.approx(0.5)


def test_chip_fit_refuses_an_oversized_net_with_a_reason():
    from neuroedge.backends.lava_map import Layer, Loihi2Limits, Synapse, chip_fit

    big = Layer("huge", (Synapse("x", np.ones((9000, 100))),), np.zeros(9000), 0.5, True, (9000,))
    fit = chip_fit([big], Loihi2Limits(cores_per_chip=4))
    assert not fit.fits and "'huge'" in fit.reason and "cores" in fit.reason
    small = chip_fit(
        [Layer("s", (Synapse("x", np.ones((10, 10))),), np.zeros(10), 0.5, True, (10,))]
    )
    assert small.fits and small.cores == 1 and small.synapses == 100


def braille(name: str):
    from pathlib import Path

    from neuroedge.export.nir import read_nir

    path = (
        Path(__file__).resolve().parents[1].parent
        / "shared"
        / "data"
        / "nir"
        / "rnn"
        / f"{name}.nir"
    )
    if not path.is_file():
        pytest.skip(f"{path} is not present")
    return read_nir(path)


def test_recurrent_cuba_graph_plans_and_what_cannot_map_is_refused():
    import nir
    from neuroedge.backends.lava_map import BIAS_SOURCE, plan

    hidden, out = plan(braille("braille_noDelay_bias_zero"), dt=1e-4)
    edges = sorted((syn.source, syn.delay) for syn in hidden.synapses)
    # the self-loop arrives a step later by itself; its bias starts at step 1
    assert edges == [(BIAS_SOURCE, 0), (BIAS_SOURCE, 1), ("input", 0), ("lif1.lif", 0)]
    assert hidden.du == pytest.approx(0.45) and hidden.dv == pytest.approx(0.1)
    assert {syn.source: syn.delay for syn in out.synapses} == {"lif1.lif": 0, BIAS_SOURCE: 1}

    def lif(n):
        return nir.LIF(
            tau=np.full(n, 2e-3), r=np.ones(n), v_leak=np.zeros(n), v_threshold=np.ones(n)
        )

    feedback = nir.NIRGraph(
        nodes={
            "x": nir.Input({"input": np.array([2])}),
            "f1": nir.Affine(np.ones((2, 2)), None),
            "a": lif(2),
            "f2": nir.Affine(np.ones((2, 2)), None),
            "b": lif(2),
            "back": nir.Affine(np.ones((2, 2)), None),
            "o": nir.Output({"output": np.array([2])}),
        },
        edges=[
            ("x", "f1"),
            ("f1", "a"),
            ("a", "f2"),
            ("f2", "b"),
            ("b", "back"),
            ("back", "a"),
            ("b", "o"),
        ],
    )
    with pytest.raises(ExportRefused, match="'b' -> 'a' feeds back from a later population"):
        plan(feedback, dt=1e-3)


@pytest.mark.loihi
def test_braille_recurrent_graph_on_lava_equals_the_nir_runner(require):
    """snnTorch's Braille RNN: CubaLIF populations, a recurrent Affine onto the hidden layer,
    biases into the synaptic current (a constant input channel; the recurrent edge's bias from
    step 1, as the runner's zero-initialised edge). Several calls in a row: each after the
    first runs on a fresh network (spikes of the last call's tail would circle back)."""
    require("lava")
    import nir
    from neuroedge.export.nir_run import run_nir
    from neuroedge.registry import get_backend
    from neuroedge.types import IOSpec, ModelSpec, NIRProgram

    graph = braille("braille_noDelay_bias_zero")
    graph = nir.NIRGraph(
        {**graph.nodes, "hidden": nir.Output({"output": np.array([38])})},
        [*graph.edges, ("lif1.lif", "hidden")],
        metadata={"dt": 1e-4},
    )
    spec = ModelSpec(
        "snn.braille",
        "snn",
        "snnTorch Braille RNN",
        (IOSpec("input", ("T", "batch", 12)),),
        (IOSpec("output", ("T", "batch", 7)),),
        build=lambda cfg: NIRProgram(graph, 1e-4),
        example=lambda s: {},
    )
    lava = get_backend("lava")
    art = lava.compile(NIRProgram(graph, 1e-4), spec, {"variant": "floating_pt"})
    rng = np.random.default_rng(0)
    try:
        for _ in range(4):
            xs = (rng.random((40, 2, 12)) < 0.3).astype(np.float32)
            ref = run_nir(graph, {"input": xs})
            got = lava.run(art, {"input": xs})
            assert ref["hidden"].sum() > 0 and 0 < ref["output"].mean() < 1
            np.testing.assert_array_equal(got["hidden"], ref["hidden"])
            np.testing.assert_array_equal(got["output"], ref["output"])
    finally:
        art.handle.close()


def test_probe_gives_a_reason_either_way():
    from neuroedge.backends.lava import LavaBackend, hardware_reason

    availability = LavaBackend().probe()
    assert availability.reason
    if availability.ok:
        assert ("Loihi2SimCfg" in availability.reason) == (hardware_reason() is not None)


def test_doctor_lists_lava_with_its_reason(capsys):
    from neuroedge.backends.lava import LavaBackend
    from neuroedge.cli import main

    assert main(["doctor"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("lava "))
    assert LavaBackend().probe().reason in line


@pytest.mark.loihi
def test_hw_config_without_extension_is_refused(nir_case):
    from neuroedge.backends.lava import LavaBackend, hardware_reason

    if hardware_reason() is None:
        pytest.skip("the Loihi 2 extension is installed here")
    spec, program, _, _ = nir_case
    with pytest.raises(ExportRefused, match="hardware extension"):
        LavaBackend().compile(program, spec, {"config": "hw"})


def test_install_patch_rewrites_only_what_it_names(tmp_path):
    import zipfile

    from neuroedge.backends import lava_install as li

    stock = tmp_path / li.STOCK_WHEEL
    with zipfile.ZipFile(stock, "w") as z:
        z.writestr("lava/magma/compiler/var_model.py", "@dataclass\nclass ByteEncoder:\n")
        z.writestr("tests/test_x.py", "")
    with pytest.raises(ValueError, match="sha256"):
        li.patch_wheel(stock, tmp_path)
    assert li._patch_member(
        "lava/magma/compiler/var_model.py", b"@dataclass\nclass ByteEncoder:\n"
    ).startswith(b"@dataclass(frozen=True)")
    with pytest.raises(ValueError, match="does not apply"):
        li._patch_member("lava/magma/compiler/var_model.py", b"class Other: pass\n")


@pytest.mark.loihi
def test_fixed_point_input_beyond_8_bits_is_refused(nir_case):
    from neuroedge.registry import get_backend

    spec, program, inputs, _ = nir_case
    lava = get_backend("lava")
    art = lava.compile(program, spec, {"variant": "fixed_pt"})
    with pytest.raises(ValueError, match="8-bit graded"):
        lava.run(art, {"x": inputs["x"] * 2.0})


def test_shortcut_edges_become_delayed_synapses_and_a_bare_readout_a_population():
    import nir
    from neuroedge.backends.lava_map import Loihi2Limits, chip_fit, plan, quantize

    def lif(n: int) -> nir.LIF:
        return nir.LIF(
            tau=np.full(n, 2e-3), r=np.ones(n), v_leak=np.zeros(n), v_threshold=np.full(n, 2.0)
        )

    rng = np.random.default_rng(0)
    w1, w2, w3, w4 = (rng.normal(size=s) for s in ((4, 3), (4, 4), (4, 4), (2, 4)))
    graph = nir.NIRGraph(
        nodes={
            "input": nir.Input({"input": np.array([3])}),
            "fc1": nir.Affine(w1, np.zeros(4)),
            "a": lif(4),
            "fc2": nir.Affine(w2, np.zeros(4)),
            "b": lif(4),
            "fc3": nir.Affine(w3, np.full(4, 0.5)),
            "c": lif(4),
            "fc4": nir.Affine(w4, np.ones(2)),
            "logits": nir.Output({"output": np.array([2])}),
        },
        edges=[
            ("input", "fc1"),
            ("fc1", "a"),
            ("a", "fc2"),
            ("fc2", "b"),
            ("b", "fc3"),
            ("fc3", "c"),
            ("a", "c"),
            ("c", "fc4"),
            ("fc4", "logits"),
        ],
    )
    a, b, c, readout = plan(graph, dt=1e-3)
    assert (a.depth, b.depth, c.depth, readout.depth) == (1, 2, 3, 4)
    edges = {syn.source: syn for syn in c.synapses}
    assert set(edges) == {"a", "b"}
    assert (edges["a"].delay, edges["b"].delay) == (1, 0)  # the shortcut skips population b
    np.testing.assert_allclose(edges["a"].weight, 0.25 * np.eye(4))  # dt/tau / threshold
    np.testing.assert_allclose(edges["b"].weight, 0.25 * w3, rtol=1e-5)
    np.testing.assert_allclose(c.bias, 0.25 * 0.5)
    assert readout.name == "fc4" and not readout.spiking and readout.dv == 1.0
    np.testing.assert_allclose(readout.synapses[0].weight, w4, rtol=1e-5)
    assert chip_fit([a, b, c, readout]).synapses == 12 + 16 + 16 + 4 + 8
    late = chip_fit([a, b, c, readout], Loihi2Limits(max_delay=0))
    assert not late.fits and "'a' -> 'c' need a delay of 1" in late.reason
    q = quantize(c)
    exps = {syn.source: e for syn, e in zip(c.synapses, q.weight_exps)}
    assert exps["a"] == 0  # the delayed shortcut: DelaySparse applies no exponent
    eff = [w * 2.0**e for w, e in zip(q.weights, q.weight_exps)]
    assert sum(np.clip(x, 0, None).sum(1) for x in eff).max() <= 32767
    assert sum(-np.clip(x, None, 0).sum(1) for x in eff).max() <= 32767
    for w, e, syn in zip(q.weights, q.weight_exps, c.synapses):
        np.testing.assert_allclose(w * 2.0**e / q.scale, syn.weight, atol=2 ** (e + 1) / q.scale)


@pytest.mark.loihi
@pytest.mark.parametrize("batch", [1, 3])  # batch 1: Dense/DelayDense; else Sparse/DelaySparse
def test_shortcut_graph_runs_on_lava_as_the_nir_reference(batch, require):
    require("lava")
    import nir
    from neuroedge.export.nir_run import run_nir
    from neuroedge.registry import get_backend
    from neuroedge.types import IOSpec, ModelSpec, NIRProgram

    rng = np.random.default_rng(3)

    def lif(n):
        return nir.LIF(
            tau=np.full(n, 2e-3), r=np.ones(n), v_leak=np.zeros(n), v_threshold=np.full(n, 1.0)
        )

    nodes = {
        "x": nir.Input({"input": np.array([6])}),
        "fa": nir.Affine(rng.normal(1.0, 1.0, (8, 6)), np.zeros(8)),
        "a": lif(8),
        "fb": nir.Affine(rng.normal(0.5, 1.0, (8, 8)), np.zeros(8)),
        "b": lif(8),
        "fc": nir.Affine(rng.normal(0.3, 1.0, (8, 8)), np.zeros(8)),
        "c": lif(8),
        "skip": nir.Affine(rng.normal(0.5, 1.0, (8, 8)), np.zeros(8)),
        "spikes": nir.Output({"output": np.array([8])}),
    }
    edges = [
        ("x", "fa"),
        ("fa", "a"),
        ("a", "fb"),
        ("fb", "b"),
        ("b", "fc"),
        ("fc", "c"),
        ("a", "skip"),
        ("skip", "c"),
        ("c", "spikes"),
    ]
    graph = nir.NIRGraph(nodes, edges, metadata={"dt": 1e-3})
    xs = rng.random((8, batch, 6)).astype(np.float32)
    ref = run_nir(graph, {"x": xs})
    assert 0 < ref["spikes"].mean() < 1
    spec = ModelSpec(
        "snn.skip_test",
        "snn",
        "dense shortcut",
        (IOSpec("x", ("T", "batch", 6)),),
        (IOSpec("spikes", ("T", "batch", 8)),),
        build=lambda cfg: NIRProgram(graph, 1e-3),
        example=lambda s: {"x": xs},
    )
    lava = get_backend("lava")
    art = lava.compile(NIRProgram(graph, 1e-3), spec, {"variant": "floating_pt"})
    try:
        got = lava.run(art, {"x": xs})
    finally:
        art.handle.close()
    np.testing.assert_array_equal(got["spikes"], ref["spikes"])


@pytest.mark.loihi
def test_self_exciting_population_does_not_carry_activity_into_the_next_call(require):
    """Once it fires, the recurrent loop keeps it firing through the padding after the input:
    a reused network would feed those spikes into the next call's first step."""
    require("lava")
    import nir
    from neuroedge.export.nir_run import run_nir
    from neuroedge.registry import get_backend
    from neuroedge.types import IOSpec, ModelSpec, NIRProgram

    graph = nir.NIRGraph(
        nodes={
            "x": nir.Input({"input": np.array([3])}),
            "fin": nir.Affine(np.full((3, 3), 0.8), np.zeros(3)),
            "a": nir.LIF(
                tau=np.full(3, 2e-3),
                r=np.ones(3),
                v_leak=np.zeros(3),
                v_threshold=np.ones(3),
                v_reset=np.zeros(3),
            ),
            "rec": nir.Affine(np.full((3, 3), 1.5), np.zeros(3)),
            "spikes": nir.Output({"output": np.array([3])}),
        },
        edges=[("x", "fin"), ("fin", "a"), ("a", "rec"), ("rec", "a"), ("a", "spikes")],
        metadata={"dt": 1e-3},
    )
    spec = ModelSpec(
        "snn.self_exciting",
        "snn",
        "recurrent test",
        (IOSpec("x", ("T", "batch", 3)),),
        (IOSpec("spikes", ("T", "batch", 3)),),
        build=lambda cfg: NIRProgram(graph, 1e-3),
        example=lambda s: {},
    )
    lava = get_backend("lava")
    art = lava.compile(NIRProgram(graph, 1e-3), spec, {"variant": "floating_pt"})
    loud, quiet = np.ones((6, 1, 3), np.float32), np.zeros((6, 1, 3), np.float32)
    try:
        first = lava.run(art, {"x": loud})["spikes"]
        second = lava.run(art, {"x": quiet})["spikes"]
    finally:
        art.handle.close()
    np.testing.assert_array_equal(first, run_nir(graph, {"x": loud})["spikes"])
    assert first[-1].all()  # still firing when the input ends
    np.testing.assert_array_equal(second, run_nir(graph, {"x": quiet})["spikes"])
    assert not second.any()


@pytest.mark.parametrize("scale", ["-3", "0", "2.5", "300"])
def test_fixed_point_input_scale_outside_graded_spikes_is_refused(scale: str) -> None:
    from neuroedge.api import check_nir

    path = Path(__file__).resolve().parents[2] / "shared/data/nir/lif/lif_norse.nir"
    if not path.is_file():
        pytest.fail(f"shared NIR graphs missing at {path} (expected <repo>/../shared)")
    with pytest.raises(ValueError, match=f"input_scale '{scale}'.*integer in 1..255"):
        check_nir(
            path, "lava", dt=1e-4, steps=4, options={"variant": "fixed_pt", "input_scale": scale}
        )
