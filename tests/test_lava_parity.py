"""Feed-forward graphs on Lava: parity with the host per layer (floating_pt and fixed_pt), a
shortcut graph, and the inputs and options compile and run refuse."""

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
# skill: how much of the gap between the best constant output (all spikes or none, whichever
# agrees more with host) and full agreement a layer closes; fixed_pt rounds weights to 8 bits
@pytest.mark.parametrize("variant,min_skill", [("floating_pt", 1.0), ("fixed_pt", 0.75)])
def test_lava_spikes_agree_with_host_per_layer(nir_case, variant, min_skill):
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
        density = float(host_ref[layer].mean())
        assert 0 < density < 1, (layer, density)  # else a constant output agrees fully
        constant = max(density, 1 - density)
        agreement = float((out[layer] == host_ref[layer]).mean())
        skill = (agreement - constant) / (1 - constant)
        assert skill >= min_skill, (layer, agreement, constant)
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


@pytest.mark.loihi
def test_hw_config_without_extension_is_refused(nir_case):
    from neuroedge.backends.lava import LavaBackend, hardware_reason

    if hardware_reason() is None:
        pytest.skip("the Loihi 2 extension is installed here")
    spec, program, _, _ = nir_case
    with pytest.raises(ExportRefused, match="hardware extension"):
        LavaBackend().compile(program, spec, {"config": "hw"})


@pytest.mark.loihi
def test_fixed_point_input_beyond_8_bits_is_refused(nir_case):
    from neuroedge.registry import get_backend

    spec, program, inputs, _ = nir_case
    lava = get_backend("lava")
    art = lava.compile(program, spec, {"variant": "fixed_pt"})
    with pytest.raises(ValueError, match="8-bit graded"):
        lava.run(art, {"x": inputs["x"] * 2.0})


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
