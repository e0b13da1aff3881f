"""Recurrent graphs on Lava: snnTorch's Braille RNN planned and run against the NIR runner, what
cannot map refused, and no activity carried from one call into the next."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.errors import ExportRefused


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
    from lava.magma.core.process.process import ProcessServer

    lava = get_backend("lava")
    art = lava.compile(NIRProgram(graph, 1e-3), spec, {"variant": "floating_pt"})
    loud, quiet = np.ones((6, 1, 3), np.float32), np.zeros((6, 1, 3), np.float32)
    registered = len(ProcessServer().processes)
    try:
        first = lava.run(art, {"x": loud})["spikes"]
        one_network = len(ProcessServer().processes)
        second = lava.run(art, {"x": quiet})["spikes"]
        # the fresh network of each call replaces the last one in Lava's registry, not beside
        # it (a recurrent artifact called in a loop kept every network: ~1,300 objects a call)
        assert len(ProcessServer().processes) == one_network > registered
    finally:
        art.handle.close()
    assert len(ProcessServer().processes) == registered
    np.testing.assert_array_equal(first, run_nir(graph, {"x": loud})["spikes"])
    assert first[-1].all()  # still firing when the input ends
    np.testing.assert_array_equal(second, run_nir(graph, {"x": quiet})["spikes"])
    assert not second.any()
