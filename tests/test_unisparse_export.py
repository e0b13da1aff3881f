"""snn.unisparse export: ONNX with explicit membranes and NIR, both matching the host."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from neuroedge.models.unisparse import spec as spec_mod
from neuroedge.models.unisparse.module import fold

from unisparse_nets import random_net


def _folded(seed: int = 0) -> torch.nn.Module:
    """A random folded mini-ResNet that fires (beta raised) with half its weights masked."""
    return fold(random_net(seed, beta=(0.6, 1.2)))


def test_onnx_step_export_agrees_with_host_on_every_spike(tmp_path: Path, require) -> None:
    require("onnxrt")
    from neuroedge.backends.host import run_torch_program
    from neuroedge.bench.parity import compare, require_nonzero_state
    from neuroedge.registry import get_backend

    folded = _folded()
    program = spec_mod.folded_program(folded)
    backend = get_backend("onnxrt")
    art = backend.compile(
        program, spec_mod.SPEC, {"form": "step", "path": str(tmp_path / "u.onnx")}
    )
    xs = {"x": np.random.default_rng(0).random((6, 3, 1, 8, 8), dtype=np.float32)}
    host = run_torch_program(program, xs)
    require_nonzero_state(host)
    assert host["spikes"].mean() > 0.01
    metrics = compare(host, backend.run(art, xs))
    assert metrics["spike_agreement"].value == 1.0
    assert metrics["max_abs_err"].value < 1e-4


def test_nir_graph_round_trips_through_file_and_norse(tmp_path: Path) -> None:
    pytest.importorskip("nir")
    pytest.importorskip("norse")
    import nir
    from neuroedge.export.nir import write_nir
    from neuroedge.models.unisparse.export import norse_logits, to_nir
    from neuroedge.types import NIRProgram

    folded = _folded(1)
    program = to_nir(folded)
    path = write_nir(program.graph, tmp_path / "u.nir")
    loaded = NIRProgram(nir.read(str(path)), dt=program.dt)
    assert sum(isinstance(n, nir.LIF) for n in loaded.graph.nodes.values()) == 7
    into_lif2 = [src for src, dst in loaded.graph.edges if dst == "b1_lif2"]
    assert sorted(into_lif2) == ["b1_conv2", "b1_shortcut"]  # membrane shortcut: two edges
    xs = torch.rand(5, 2, 1, 8, 8)
    with torch.no_grad():
        states, host = folded.init_state(2), []
        for x in xs:
            y, spikes, *states = folded(x, *states)
            host.append(y)
    assert float(spikes.mean()) > 0.01
    assert float((torch.stack(host) - norse_logits(loaded, xs)).abs().max()) < 1e-5


def test_smoke_build_runs_example_with_declared_shapes() -> None:
    from neuroedge.registry import get_backend, get_model
    from neuroedge.shapes import bind_inputs, resolve_shape

    spec = get_model("snn.unisparse")
    program = spec.build({"smoke": True})
    assert program.meta["trained"] is False
    inputs = spec.example(0)
    host = get_backend("host")
    outputs = host.run(host.compile(program, spec), inputs)
    symbols = bind_inputs(spec, inputs)
    for io in spec.outputs:
        assert outputs[io.name].shape == resolve_shape(io, symbols)


def test_program_exposes_its_nir_description() -> None:
    pytest.importorskip("nir")
    program = spec_mod.build({"smoke": True})
    nir_program = program.meta["nir"]()
    assert nir_program.dt == pytest.approx(1e-3)
    assert {"input", "logits", "stem", "fc"} <= set(nir_program.graph.nodes)


def test_neuroedge_nir_runner_reproduces_host_logits_and_membranes() -> None:
    pytest.importorskip("nir")
    nir_run = pytest.importorskip("neuroedge.export.nir_run")
    from neuroedge.backends.host import run_torch_program
    from neuroedge.models.unisparse.export import to_nir

    folded = _folded(2)
    program = spec_mod.folded_program(folded)
    xs = np.random.default_rng(1).random((5, 2, 1, 8, 8), dtype=np.float32)
    host = run_torch_program(program, {"x": xs})
    ran = nir_run.run_nir(to_nir(folded).graph, {"input": xs})
    assert host["spikes"].mean() > 0.01
    assert np.abs(ran["logits"] - host["logits"]).max() < 1e-5
    assert np.abs(ran["b1_lif2_v_final"] - host["v_b1b_final"]).max() < 1e-5


@pytest.mark.loihi
def test_lava_runs_the_residual_net_spike_for_spike(require) -> None:
    require("lava")
    from neuroedge.backends.host import run_torch_program
    from neuroedge.bench.parity import compare
    from neuroedge.models.unisparse.export import to_nir
    from neuroedge.registry import get_backend

    folded = _folded(3)
    program = spec_mod.folded_program(folded, nir=lambda: to_nir(folded))
    xs = np.random.default_rng(2).random((4, 3, 1, 8, 8), dtype=np.float32)
    host = run_torch_program(program, {"x": xs})
    assert host["spikes"].mean() > 0.01
    lava = get_backend("lava")
    art = lava.compile(program, spec_mod.SPEC, {"variant": "floating_pt"})
    try:
        # every block's shortcut (identity or 1x1 conv) skips a population: one step of delay
        delayed = {
            layer.name: syn.source
            for layer in art.handle.layers
            for syn in layer.synapses
            if syn.delay == 1
        }
        assert delayed == {"b0_lif2": "stem_lif", "b1_lif2": "b0_lif2", "b2_lif2": "b1_lif2"}
        metrics = compare(host, lava.run(art, {"x": xs}))
    finally:
        art.handle.close()
    assert metrics["spike_agreement"].value == 1.0
    assert metrics["max_abs_err"].value < 1e-4
