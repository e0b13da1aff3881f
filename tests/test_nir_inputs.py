"""NIR files and graphs the host runner and ``neuroedge nir`` must refuse or flag: corrupt HDF5
metadata, infinite parameters, a dt longer than a time constant or different from the file's,
negative Flatten dims, a reference output that never changes, and parameters or convolutions
that do not fit the shape arriving from the Input."""

from __future__ import annotations


import numpy as np
import pytest
from neuroedge.errors import ArtifactError, ConfigError, ExportRefused


def lif(n: int, tau: float = 0.01):
    import nir

    return nir.LIF(
        tau=np.float32(np.full(n, tau)),
        r=np.float32(np.ones(n)),
        v_leak=np.float32(np.zeros(n)),
        v_threshold=np.float32(np.full(n, 0.05)),
        v_reset=np.float32(np.zeros(n)),
    )


def chain(weight, tau: float = 0.01, dt: float | None = 1e-3):
    """Input -> Affine(weight) -> LIF -> Output."""
    import nir

    n_out, n_in = np.shape(weight)
    return nir.NIRGraph(
        nodes={
            "in": nir.Input({"input": np.array([n_in])}),
            "aff": nir.Affine(weight=np.float32(weight), bias=np.float32(np.zeros(n_out))),
            "lif": lif(n_out, tau),
            "out": nir.Output({"output": np.array([n_out])}),
        },
        edges=[("in", "aff"), ("aff", "lif"), ("lif", "out")],
        metadata={} if dt is None else {"dt": dt},
    )


def test_bit_flipped_file_is_an_unreadable_nir_error(tmp_path, nir_data):
    """One flipped bit in HDF5 metadata makes h5py raise RuntimeError ('bad heap free list'),
    which escaped as a traceback."""
    from neuroedge.cli import main
    from neuroedge.export.nir import read_nir

    data = bytearray(nir_data("lif/lif_norse.nir").read_bytes())
    data[13948] ^= 4
    bad = tmp_path / "flip.nir"
    bad.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=r"flip\.nir: unreadable NIR file .*RuntimeError"):
        read_nir(bad)
    assert main(["nir", str(bad), "--dt", "1e-4"]) == 2


def test_infinite_parameter_is_refused_naming_node_and_parameter(tmp_path):
    import nir
    from neuroedge.export.nir import read_nir, validate

    graph = chain([[np.inf]])
    with pytest.raises(ArtifactError, match=r"node 'aff' parameter 'weight' holds 1 infinite"):
        validate(graph)
    nir.write(str(tmp_path / "inf_w.nir"), graph)
    with pytest.raises(ArtifactError, match=r"inf_w\.nir: node 'aff' parameter 'weight'"):
        read_nir(tmp_path / "inf_w.nir")
    graph.nodes["lif"].v_threshold[0] = -np.inf
    graph.nodes["aff"].weight[0, 0] = 1.0
    with pytest.raises(ArtifactError, match=r"'lif' parameter 'v_threshold' holds 1 infinite"):
        validate(graph)


@pytest.mark.parametrize(
    "start,end,shape",
    [(-3, -1, (5, 24)), (-2, -1, (5, 2, 12)), (0, -2, (5, 6, 4)), (1, 2, (5, 2, 12))],
)
def test_flatten_dims_exclude_the_batch_negative_ones_too(start, end, shape):
    """NIR's Flatten dims count the sample's axes; the runner's tensors carry a batch axis in
    front: a negative dim must not be shifted (start_dim=-3 flattened only the last two)."""
    import nir
    import torch
    from neuroedge.export.nir_run import _Ops

    node = nir.Flatten({"input": np.array([2, 3, 4])}, start_dim=start, end_dim=end)
    x = torch.arange(5 * 24, dtype=torch.float32).reshape(5, 2, 3, 4)
    y = _Ops.apply("Flatten", node, x)
    assert tuple(y.shape) == shape
    assert tuple(node.output_type["output"]) == shape[1:]  # NIR's own type inference agrees


def flat_graph(start_dim: int):
    import nir

    w = np.random.default_rng(0).normal(size=(5, 24))
    nodes = {
        "in": nir.Input({"input": np.array([2, 3, 4])}),
        "fl": nir.Flatten({"input": np.array([2, 3, 4])}, start_dim=start_dim, end_dim=-1),
        "aff": nir.Affine(weight=np.float32(w), bias=np.float32(np.zeros(5))),
        "lif": lif(5),
        "out": nir.Output({"output": np.array([5])}),
    }
    edges = [("in", "fl"), ("fl", "aff"), ("aff", "lif"), ("lif", "out")]
    return nir.NIRGraph(nodes=nodes, edges=edges, metadata={"dt": 1e-3}), np.float32(w)


def test_negative_flatten_runs_on_the_host_and_composes_for_lava():
    from neuroedge.backends.lava_map import plan
    from neuroedge.export.nir_run import run_nir

    graph, w = flat_graph(-3)
    same, _ = flat_graph(0)
    xs = (np.random.default_rng(1).random((8, 2, 2, 3, 4)) < 0.5).astype(np.float32)
    out = run_nir(graph, {"in": xs})["out"]  # crashed: (2x12) @ (24x5)
    assert out.sum() > 0
    np.testing.assert_array_equal(out, run_nir(same, {"in": xs})["out"])
    (layer,) = plan(graph, dt=1e-3)
    # dt / tau / threshold = 0.1 / 0.05: the composed chain is the Affine itself
    np.testing.assert_allclose(layer.synapses[0].weight, 2.0 * w, rtol=1e-5)


def test_dt_longer_than_tau_is_refused_on_the_host_and_on_lava():
    from neuroedge.backends.lava_map import plan
    from neuroedge.export.nir_run import from_nir, run_nir

    graph = chain([[1.0]], tau=2e-3)
    xs = np.ones((4, 1, 1), np.float32)
    unstable = r"node 'lif': dt 0.003 s > tau 0.002 s.*forward Euler is unstable, use dt <= tau"
    with pytest.raises(ExportRefused, match=unstable):
        from_nir(graph, dt=3e-3)
    with pytest.raises(ExportRefused, match=unstable):
        plan(graph, dt=3e-3)
    run_nir(graph, {"in": xs}, dt=2e-3)  # dt = tau: allowed (no memory)
    assert plan(graph, dt=2e-3)[0].dv == pytest.approx(1.0)


def test_braille_at_dt_beyond_its_time_constants_is_refused(nir_data):
    """The audit's case: snnTorch's Braille RNN at dt=1e-3 (tau_mem 1 ms, tau_syn 0.22 ms) ran
    with du = 4.5 (and in fixed_pt du silently clipped to 4095)."""
    from neuroedge.api import check_nir

    path = nir_data("rnn/braille_noDelay_bias_zero.nir")
    with pytest.raises(ExportRefused, match=r"'lif1\.lif'.*tau_syn.*forward Euler is unstable"):
        check_nir(path, "lava", dt=1e-3, steps=4, batch=1, options={"variant": "fixed_pt"})


def test_dt_different_from_the_files_is_refused_naming_both(tmp_path, capsys):
    """--dt is for files without one: it silently replaced the file's dt."""
    from neuroedge.api import check_nir
    from neuroedge.cli import main
    from neuroedge.export.nir import write_nir

    graph = chain([[1.0]], dt=1e-3)
    path = write_nir(graph, tmp_path / "timed.nir")
    conflict = r"timed\.nir: dt 0\.0001 s \(given, --dt\) differs from the dt 0\.001 s"
    with pytest.raises(ConfigError, match=conflict):
        check_nir(path, "lava", dt=1e-4)
    assert main(["nir", str(path), "--dt", "1e-4"]) == 2
    err = capsys.readouterr().err
    assert "0.0001 s" in err and "0.001 s the file stores" in err
    from neuroedge.nir_check import _nir_dt

    assert _nir_dt(graph, path, None) == 1e-3
    assert _nir_dt(graph, path, 1e-3) == 1e-3
    assert _nir_dt(graph, path, float(np.float32(1e-3))) == 1e-3  # rounding is no conflict
    bare = chain([[1.0]], dt=None)
    assert _nir_dt(bare, path, 2e-4) == 2e-4
    with pytest.raises(ValueError, match="carries no dt"):
        _nir_dt(bare, path, None)


def test_silent_reference_is_flagged_in_the_comparison():
    from neuroedge.nir_check import _nir_compare

    zeros = np.zeros((6, 2, 3), np.float32)
    spikes = zeros.copy()
    spikes[2, 0, 1] = 1.0
    rows = _nir_compare(["a", "b"], {"a": zeros, "b": spikes}, {"a": zeros, "b": spikes})
    assert rows["a"]["equal_fraction"] == 1.0 and rows["a"]["reference_silent"]
    assert rows["a"]["warning"].startswith("reference output silent")
    assert "proves nothing" in rows["a"]["warning"] and "dt" in rows["a"]["warning"]
    assert not rows["b"]["reference_silent"] and "warning" not in rows["b"]


def test_graph_that_does_not_read_back_leaves_the_older_file(tmp_path, monkeypatch):
    from neuroedge.export import nir as nir_export

    path = nir_export.write_nir(chain(np.eye(2)), tmp_path / "g.nir")
    before = path.read_bytes()

    def unreadable(written):
        raise ArtifactError(f"{written}: unreadable NIR file (a writer bug)")

    monkeypatch.setattr(nir_export, "read_nir", unreadable)  # the read-back check fails
    with pytest.raises(ArtifactError, match=r"g\.nir: not written: the graph does not read back"):
        nir_export.write_nir(chain(2 * np.eye(2)), path)
    assert path.read_bytes() == before  # was: replaced by the file that failed the check
    assert [p.name for p in tmp_path.iterdir()] == ["g.nir"]


def pooled_if_graph(threshold_shape, declared, channels=2, groups=1):
    """conv (3 channels, 8x8) -> SumPool2d 2x2 -> IF: the IF receives (3, 4, 4). The IF
    declares ``declared`` (from r); its thresholds have ``threshold_shape``."""
    import nir

    weight = np.random.default_rng(0).normal(0.5, 1, (3, channels, 3, 3)).astype(np.float32)
    nodes = {
        "x": nir.Input({"input": np.array([2, 8, 8])}),
        "conv": nir.Conv2d((8, 8), weight, 1, 1, 1, groups, np.zeros(3, np.float32)),
        "sp": nir.SumPool2d(np.array([2, 2]), np.array([2, 2]), np.array([0, 0])),
        "if": nir.IF(r=np.ones(declared, np.float32), v_threshold=np.ones(declared, np.float32)),
        "o": nir.Output({"output": np.array(declared or (3, 4, 4))}),
    }
    nodes["if"].v_threshold = np.ones(threshold_shape, np.float32)
    edges = [("x", "conv"), ("conv", "sp"), ("sp", "if"), ("if", "o")]
    return nir.NIRGraph(nodes, edges, metadata={"dt": 1.0}, type_check=False)


def test_neuron_parameters_that_do_not_fit_a_pooled_map_are_refused(tmp_path):
    """SumPool2d declares no shape; the IF's four thresholds broadcast along the last axis of
    the (3, 4, 4) map it receives: the runner ran that, silently, before shapes were
    propagated from the Input."""
    import nir
    from neuroedge.export.nir import read_nir
    from neuroedge.export.nir_run import run_nir

    path = tmp_path / "bad.nir"
    nir.write(str(path), pooled_if_graph((4,), (4,)))
    with pytest.raises(ArtifactError, match=r"'if' \(IF\) expects shape \[4\] but receives \[3, 4"):
        read_nir(path)
    x = np.ones((2, 1, 2, 8, 8), np.float32)
    # a 0-d r declares nothing: the thresholds are checked against what arrives
    with pytest.raises(ArtifactError, match=r"'v_threshold' has shape \[4\], but the node rec"):
        run_nir(pooled_if_graph((4,), ()), {"x": x})
    assert run_nir(pooled_if_graph((3, 4, 4), ()), {"x": x})["o"].shape == (2, 1, 3, 4, 4)


def test_conv_with_the_wrong_channel_count_is_still_refused():
    """A grouped convolution takes weight.shape[1] * groups channels (4 here); one that does
    not fit its input is refused, naming both shapes."""
    from neuroedge.export.nir import validate

    with pytest.raises(ArtifactError, match=r"'x' outputs shape \[2, 8, 8\].*expects \[4, 8"):
        validate(pooled_if_graph((3, 4, 4), (3, 4, 4), channels=2, groups=2))


def shape_graph(case: str):
    """Graphs whose shapes only propagation from the Input finds wrong (the LIF's 0-d
    parameters declare none): ``back`` feeds the LIF's previous step with 4 values where the
    LIF receives 5; ``sum`` adds 1 value to 4 (a sum broadcasts them); ``affine`` gives an
    Affine of weight (5, 24) a (6, 4) input (24 values, but the product runs on the last axis)."""
    import nir

    w = lambda *shape: np.ones(shape, np.float32)  # noqa: E731
    # tau, r, v_leak, v_threshold, v_reset: 0-d, as norse writes them
    cell = nir.LIF(*(np.asarray(v, np.float32) for v in (0.01, 1, 0, 0.05, 0)))
    nodes = {
        "a": nir.Input({"input": np.array([3])}),
        "lif": cell,
        "o": nir.Output({"output": np.array([])}),
    }
    nodes["la"] = nir.Linear(w(1 if case == "sum" else 5, 3))
    edges = [("a", "la"), ("la", "lif"), ("lif", "o")]
    if case == "back":
        nodes["back"] = nir.Linear(w(4, 5))
        edges += [("lif", "back"), ("back", "lif")]
    elif case == "sum":
        nodes.update(b=nir.Input({"input": np.array([2])}), lb=nir.Linear(w(4, 2)))
        edges += [("b", "lb"), ("lb", "lif")]
    else:
        nodes.update(a=nir.Input({"input": np.array([6, 4])}), la=nir.Affine(w(5, 24), w(5)))
    return nir.NIRGraph(nodes, edges, metadata={"dt": 1e-3}, type_check=False)


@pytest.mark.parametrize(
    "case,message",
    [
        ("back", r"'lif' sums inputs of different shapes: \[5\] and \[4\] from 'back' \(its pr"),
        ("sum", r"'lif' sums inputs of different shapes: \[1\] from 'la', \[4\] from 'lb'"),
        ("affine", r"'la' \(Affine, weight \[5, 24\]\) receives shape \[6, 4\]: expected a last"),
    ],
)
def test_shapes_that_do_not_fit_are_refused_naming_the_node(case, message, tmp_path):
    """In a file and in memory, before any step: each case would otherwise broadcast or crash
    inside torch (no test reached these three checks before)."""
    import nir
    from neuroedge.export.nir import read_nir
    from neuroedge.export.nir_run import run_nir

    nir.write(str(tmp_path / "g.nir"), shape_graph(case), compression=None)  # 0-d arrays
    with pytest.raises(ArtifactError, match=message):
        read_nir(tmp_path / "g.nir")
    with pytest.raises(ArtifactError, match=message):
        run_nir(shape_graph(case), {"a": np.ones((2, 1, 3), np.float32)})
