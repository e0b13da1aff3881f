"""NIR export/import: round trips, graphs written by other frameworks, and bad files."""

from __future__ import annotations


import numpy as np
import pytest
from neuroedge.errors import ArtifactError


@pytest.fixture(scope="module")
def convnet():
    import torch
    from neuroedge.registry import get_model

    spec = get_model("snn.lif_convnet")
    torch.manual_seed(0)
    program = spec.build({"untrained": True})
    with torch.no_grad():  # untrained weights are too weak for layer 2 to spike
        program.module.conv2.weight.mul_(4.0)
    return spec, program


@pytest.fixture(scope="module")
def strong_input(convnet):
    """Digits scaled up so the untrained net spikes in both layers (nonzero state)."""
    spec, _ = convnet
    x = np.concatenate([spec.example(s)["x"] for s in range(2)], axis=1)
    return {"x": (x * 4.0).astype(np.float32)}


@pytest.fixture(scope="module")
def host_ref(convnet, strong_input):
    from neuroedge.backends.host import run_torch_program

    ref = run_torch_program(convnet[1], strong_input)
    assert ref["spikes1"].sum() > 0 and ref["spikes2"].sum() > 0
    return ref


def test_export_carries_dt_reset_and_every_layer(convnet):
    from neuroedge.export.nir import to_nir

    spec, program = convnet
    graph = to_nir(program, spec)
    kinds = {name: type(node).__name__ for name, node in graph.nodes.items()}
    assert kinds == {
        "x": "Input",
        "conv1": "Conv2d",
        "lif1": "LIF",
        "conv2": "Conv2d",
        "avg_pool2d": "AvgPool2d",
        "lif2": "LIF",
        "flatten": "Flatten",
        "fc": "Affine",
        "readout": "LI",
        "logits": "Output",
        "spikes1": "Output",
        "spikes2": "Output",
    }
    assert graph.metadata["dt"] == 1e-3
    assert graph.nodes["lif1"].metadata["reset"] == "zero"
    assert graph.nodes["lif1"].tau.shape == (16, 8, 8)
    np.testing.assert_allclose(graph.nodes["lif1"].tau, 2e-3)


def test_write_read_round_trip_runs_like_the_host(convnet, strong_input, host_ref, tmp_path):
    from neuroedge.export.nir import read_nir, to_nir, write_nir
    from neuroedge.export.nir_run import run_nir

    spec, program = convnet
    path = write_nir(to_nir(program, spec), tmp_path / "net.nir")
    out = run_nir(read_nir(path), strong_input)
    for name in ("spikes1", "spikes2"):
        np.testing.assert_array_equal(out[name], host_ref[name])
    np.testing.assert_allclose(out["logits"], host_ref["logits"], atol=1e-4)


def test_avgpool_fold_is_exact(convnet, strong_input, host_ref):
    from neuroedge.export.nir import to_nir
    from neuroedge.export.nir_run import run_nir

    spec, program = convnet
    graph = to_nir(program, spec, pool="fold")
    assert not any(type(n).__name__ == "AvgPool2d" for n in graph.nodes.values())
    out = run_nir(graph, strong_input)
    np.testing.assert_array_equal(out["spikes2"], host_ref["spikes2"])


@pytest.mark.filterwarnings("ignore:nirtorch.load is being deprecated")
def test_norse_import_of_our_export_gives_host_spikes(convnet, strong_input, host_ref):
    pytest.importorskip("norse")
    import nir
    import nirtorch
    import torch
    from neuroedge.export.nir import to_nir
    from norse.torch.module.leaky_integrator_box import LIBoxCell, LIBoxParameters
    from norse.torch.utils.import_nir import _import_norse_module

    spec, program = convnet
    graph = to_nir(program, spec, pool="fold")  # norse 1.1 imports no AvgPool2d
    dt = graph.metadata["dt"]

    def node_map(node):
        if isinstance(node, nir.LI):  # norse 1.1's importer lacks LI; its LIBoxCell is it
            return LIBoxCell(
                LIBoxParameters(
                    tau_mem_inv=torch.as_tensor(1 / node.tau), v_leak=torch.as_tensor(node.v_leak)
                ),
                dt=dt,
            )
        if isinstance(node, nir.Flatten):  # norse 1.1 forgets NIR's dims exclude batch
            return torch.nn.Flatten(node.start_dim + 1)
        return _import_norse_module(node, dt=dt)

    keep = {k: v for k, v in graph.nodes.items() if k not in ("logits", "spikes2")}
    graph = nir.NIRGraph(keep, [e for e in graph.edges if e[1] in keep], type_check=False)
    net = nirtorch.load(graph, node_map)  # one Output: spikes1
    x = torch.as_tensor(strong_input["x"])
    state, spikes1 = None, []
    with torch.no_grad():
        for t in range(x.shape[0]):
            out, state = net(x[t], state)
            spikes1.append(out)
    np.testing.assert_array_equal(torch.stack(spikes1).numpy(), host_ref["spikes1"])


def test_norse_written_lif_graph_matches_norse_and_exact_spikes(nir_data):
    from neuroedge.export.nir import read_nir
    from neuroedge.export.nir_run import run_nir

    graph = read_nir(nir_data("lif/lif_norse.nir"))
    norse = np.loadtxt(nir_data("lif/lif_norse.csv"), delimiter=",")
    exact = np.loadtxt(nir_data("lif/lif_exact.csv"), delimiter=",")
    x = norse[:, 0].astype(np.float32)[:, None, None]
    with pytest.raises(ValueError, match="dt"):
        run_nir(graph, {"input": x})  # norse writes no dt: refusing beats guessing
    z = run_nir(graph, {"input": x}, dt=1e-4)["output"][:, 0, 0]
    np.testing.assert_array_equal(z, norse[:, 2])
    np.testing.assert_array_equal(np.nonzero(z)[0], np.nonzero(exact[:, 2])[0])


@pytest.mark.loihi
@pytest.mark.parametrize("variant", ["floating_pt", "fixed_pt"])
def test_norse_written_lif_graph_on_lava_spikes_at_the_exact_times(variant, require, nir_data):
    """The NIR paper's Lava runs of this file spike at 461, 511, 711, 761: Lava's one step of
    synaptic delay, not realigned there. The backend realigns it: the exact solution's times."""
    require("lava")
    from neuroedge.export.nir import read_nir
    from neuroedge.registry import get_backend
    from neuroedge.types import IOSpec, ModelSpec, NIRProgram

    graph = read_nir(nir_data("lif/lif_norse.nir"))
    exact = np.loadtxt(nir_data("lif/lif_exact.csv"), delimiter=",")
    paper_file = {"floating_pt": "lif_lava_cpu_float.csv", "fixed_pt": "lif_lava_cpu_fixed.csv"}
    paper_lava = np.loadtxt(nir_data(f"lif/{paper_file[variant]}"), delimiter=",")
    x = exact[:, 0].astype(np.float32)[:, None, None]
    spec = ModelSpec(
        "snn.lif_norse",
        "snn",
        "one LIF neuron written by Norse",
        (IOSpec("input", ("T", "batch", 1)),),
        (IOSpec("output", ("T", "batch", 1)),),
        build=lambda cfg: NIRProgram(graph, 1e-4),
        example=lambda s: {"input": x},
    )
    lava = get_backend("lava")
    art = lava.compile(NIRProgram(graph, 1e-4), spec, {"variant": variant})
    try:
        z = lava.run(art, {"input": x})["output"][:, 0, 0]
    finally:
        art.handle.close()
    np.testing.assert_array_equal(np.nonzero(z)[0], np.nonzero(exact[:, 2])[0])
    np.testing.assert_array_equal(np.nonzero(z)[0] + 1, np.nonzero(paper_lava[:, 2])[0])


def _norse_graph_run(tmp_path):
    pytest.importorskip("norse")
    import torch
    from neuroedge.export.nir import read_nir, write_nir
    from neuroedge.export.nir_run import run_nir
    from norse.torch import LIFBoxCell, SequentialState, to_nir

    torch.manual_seed(0)
    net = SequentialState(torch.nn.Linear(3, 4), LIFBoxCell())
    # norse 1.1 writes tau = dt / tau_mem_inv (1000x too small with its dt=1e-3 default);
    # dt=1 makes it write the true tau = 1 / tau_mem_inv
    graph = to_nir(net, torch.randn(3), dt=1.0)
    path = write_nir(graph, tmp_path / "norse.nir")
    xs = np.full((20, 2, 3), 20.0, dtype=np.float32)
    out = run_nir(read_nir(path), {"input": xs}, dt=1e-3)["output"]
    state, ref = None, []
    with torch.no_grad():
        for t in range(20):
            z, state = net(torch.as_tensor(xs[t]), state)
            ref.append(z)
    return out, torch.stack(ref).numpy()


def test_norse_generated_graph_at_test_time_matches_norse(tmp_path):
    out, ref = _norse_graph_run(tmp_path)
    assert out.shape == ref.shape == (20, 2, 4)
    assert ref.sum() > 0
    np.testing.assert_array_equal(out, ref)


def test_sinabs_cnn_graph_imports_and_runs(nir_data):
    from neuroedge.export.nir import read_nir
    from neuroedge.export.nir_run import run_nir

    graph = read_nir(nir_data("cnn/cnn_sinabs.nir"))
    xs = (np.random.default_rng(0).random((3, 1, 2, 34, 34)) < 0.2).astype(np.float32)
    out = run_nir(graph, {"input": xs}, dt=1.0)
    assert out["output"].shape == (3, 1, 10)


@pytest.mark.loihi
def test_sinabs_cnn_graph_runs_on_lava_as_the_nir_reference(require, nir_data):
    """Sinabs' N-MNIST convnet ends in a spiking IF population (no readout neuron): Lava's run
    must last one step longer to record it; its output equals neuroedge's NIR runner."""
    require("lava")
    from neuroedge.export.nir import read_nir
    from neuroedge.export.nir_run import run_nir
    from neuroedge.registry import get_backend
    from neuroedge.types import IOSpec, ModelSpec, NIRProgram

    graph = read_nir(nir_data("cnn/cnn_sinabs.nir"))
    xs = (np.random.default_rng(0).random((6, 2, 2, 34, 34)) < 0.2).astype(np.float32)
    ref = run_nir(graph, {"input": xs}, dt=1.0)["output"]
    assert ref.sum() > 0
    spec = ModelSpec(
        "snn.cnn_sinabs",
        "snn",
        "Sinabs N-MNIST convnet",
        (IOSpec("input", ("T", "batch", 2, 34, 34)),),
        (IOSpec("output", ("T", "batch", 10)),),
        build=lambda cfg: NIRProgram(graph, 1.0),
        example=lambda s: {"input": xs},
    )
    lava = get_backend("lava")
    art = lava.compile(NIRProgram(graph, 1.0), spec, {"variant": "floating_pt"})
    try:
        out = lava.run(art, {"input": xs})["output"]
    finally:
        art.handle.close()
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize(
    "name,reset",
    [("braille_noDelay_bias_zero", "zero"), ("braille_noDelay_noBias_subtract", "subtract")],
)
def test_braille_recurrent_graph_runs_with_its_reset(name, reset, nir_data):
    from neuroedge.export.nir import read_nir
    from neuroedge.export.nir_run import from_nir, graph_order, run_nir

    graph = read_nir(nir_data(f"rnn/{name}.nir"))
    assert graph_order(graph)[1] == {("lif1.w_rec", "lif1.lif")}
    assert "lif1_w_rec_prev" in from_nir(graph, dt=1e-4).state_names
    xs = (np.random.default_rng(1).random((30, 2, 12)) < 0.5).astype(np.float32)
    a = run_nir(graph, {"input": xs}, dt=1e-4, reset=reset)
    b = run_nir(graph, {"input": xs}, dt=1e-4, reset="subtract" if reset == "zero" else "zero")
    assert a["output"].shape == (30, 2, 7)
    assert not np.array_equal(a["lif1_lif_v_final"], b["lif1_lif_v_final"])


def test_truncated_file_names_file_and_size(tmp_path, nir_data):
    from neuroedge.export.nir import read_nir

    data = nir_data("lif/lif_norse.nir").read_bytes()
    bad = tmp_path / "cut.nir"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match=r"cut\.nir.*bytes"):
        read_nir(bad)


def test_non_hdf5_file_names_first_bytes(tmp_path):
    from neuroedge.export.nir import read_nir

    bad = tmp_path / "text.nir"
    bad.write_text("not a graph")
    with pytest.raises(ArtifactError, match="byte 0"):
        read_nir(bad)


def test_unknown_node_type_names_the_node(tmp_path, nir_data):
    import shutil

    import h5py
    from neuroedge.export.nir import read_nir

    path = tmp_path / "odd.nir"
    shutil.copy(nir_data("lif/lif_norse.nir"), path)
    with h5py.File(path, "r+") as f:
        del f["node/nodes/1/type"]
        f["node/nodes/1/type"] = b"Memristor"
    with pytest.raises(ArtifactError, match="node '1' has unknown type 'Memristor'"):
        read_nir(path)


def test_shape_mismatch_names_the_edge():
    import nir
    from neuroedge.export.nir import validate

    graph = nir.NIRGraph(
        nodes={
            "input": nir.Input({"input": np.array([3])}),
            "fc": nir.Affine(np.ones((4, 5)), np.zeros(4)),
            "output": nir.Output({"output": np.array([4])}),
        },
        edges=[("input", "fc"), ("fc", "output")],
        type_check=False,
    )
    with pytest.raises(ArtifactError, match=r"edge 'input' -> 'fc'.*\[3\].*\[5\]"):
        validate(graph)


def test_edge_to_missing_node_is_named():
    import nir
    from neuroedge.export.nir import validate

    graph = nir.NIRGraph(
        nodes={"input": nir.Input({"input": np.array([3])})},
        edges=[("input", "ghost")],
        type_check=False,
    )
    with pytest.raises(ArtifactError, match="'ghost'"):
        validate(graph)


def test_euler_decay_and_tau_are_inverse():
    from neuroedge.export.nir import euler_decay, tau_from_decay

    assert euler_decay(2e-3, 1e-3) == pytest.approx(0.5)
    assert tau_from_decay(euler_decay(0.02, 1e-4), 1e-4) == pytest.approx(0.02)
    with pytest.raises(ValueError, match=r"decay must lie in \[0, 1\), got 1.0"):
        tau_from_decay(1.0, 1e-3)


def test_nan_parameter_is_refused_naming_the_node() -> None:
    import nir
    import numpy as np
    from neuroedge.errors import ArtifactError
    from neuroedge.export.nir import validate

    w = np.ones((2, 3))
    w[1, 2] = np.nan
    graph = nir.NIRGraph.from_list(
        nir.Input(np.array([3])), nir.Affine(w, np.zeros(2)), nir.Output(np.array([2]))
    )
    with pytest.raises(ArtifactError, match=r"parameter 'weight' holds 1 NaN"):
        validate(graph)


@pytest.mark.parametrize("tau", [-0.02, 0.0])
def test_non_positive_time_constant_is_refused_naming_the_node(tau: float) -> None:
    import nir
    import numpy as np
    from neuroedge.errors import ArtifactError
    from neuroedge.export.nir import validate

    n = np.array([2])
    lif = nir.LIF(
        tau=np.array([0.02, tau]), r=np.ones(2), v_leak=np.zeros(2), v_threshold=np.ones(2)
    )
    graph = nir.NIRGraph.from_list(nir.Input(n), lif, nir.Output(n))
    with pytest.raises(ArtifactError, match=r"time constant 'tau' must be > 0"):
        validate(graph)
    lif.tau[1] = 0.01  # the same graph with a positive tau is valid
    validate(graph)


@pytest.mark.loihi
def test_nir_check_reports_spike_kappa_beside_agreement(require, nir_data):
    """``neuroedge nir``'s comparison: Cohen's kappa per spike output next to the agreement
    (the Braille RNN's fixed_pt kappa: test_lava_limits)."""
    require("lava")
    from neuroedge.api import check_nir

    exact = check_nir(nir_data("lif/lif_norse.nir"), "lava", dt=1e-4)["outputs"]["output"]
    assert exact["equal_fraction"] == exact["spike_kappa"] == 1.0
