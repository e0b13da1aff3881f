"""Mapping NIR graphs to Lava populations without running Lava: threshold folding, shortcut
edges as delayed synapses, fixed-point quantisation, chip fit."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("bias_size", [0.1, 30.0])  # 30: the bias bounds the scale (exp 7)
def test_fixed_point_weights_and_bias_reconstruct_within_one_step(bias_size):
    from neuroedge.backends.lava_map import Layer, Synapse, quantize

    rng = np.random.default_rng(0)
    layer = Layer(
        "l",
        (Synapse("x", rng.normal(size=(20, 30))),),
        rng.normal(size=20) * bias_size,
        0.5,
        True,
        (20,),
    )
    q = quantize(layer)
    (w,), (exp,) = q.weights, q.weight_exps
    assert not np.any(w % 2)  # Lava's mixed-sign mode drops the lowest weight bit
    assert np.abs(w).max() >= 127  # the exponent puts the largest weight in the top bit
    eff = w * 2.0**exp  # worst binary input: every positive (or every negative) weight on
    # (the scale search's bound, not a clip: the 16-bit dendrite holds one step's input)
    assert max(np.clip(eff, 0, None).sum(1).max(), -np.clip(eff, None, 0).sum(1).min()) <= 32767
    assert q.dv == 2048 and q.vth == int(q.scale)
    step = 2.0 ** (exp + 1) / q.scale  # even integers: two units of 2^exp
    np.testing.assert_allclose(w * 2.0**exp / q.scale, layer.synapses[0].weight, atol=step)
    # v is compared with vth << 6 = 64 s (threshold 1): the bias adds bias_mant << bias_exp
    # to v, i.e. bias_mant 2^bias_exp / (64 s) in float units, one step 2^bias_exp / (64 s)
    bias_step = 2.0**q.bias_exp / (64 * q.scale)
    got = q.bias_mant * 2.0**q.bias_exp / (64 * q.scale)
    np.testing.assert_allclose(got, layer.bias, rtol=0, atol=bias_step)


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


def _readout_2d_graph() -> object:
    """A spiking conv flattened to (3, 36) (Flatten 1..2) and scaled per element: an Output
    fed by a linear chain whose output keeps two axes."""
    import nir

    rng = np.random.default_rng(0)
    f = lambda a: np.asarray(a, np.float32)  # noqa: E731
    nodes = {
        "in": nir.Input(np.array([2, 6, 6])),
        "conv": nir.Conv2d((6, 6), f(rng.normal(0.5, 1, (3, 2, 3, 3))), 1, 1, 1, 1, f([0] * 3)),
        "if": nir.IF(r=f(np.ones((3, 6, 6))), v_threshold=f(np.ones((3, 6, 6)))),
        "fl": nir.Flatten(np.array([3, 6, 6]), 1, 2),
        "sc": nir.Scale(f(rng.normal(size=(3, 36)))),
        "o": nir.Output(np.array([3, 36])),
        "spk": nir.Output(np.array([3, 6, 6])),
    }
    edges = [("in", "conv"), ("conv", "if"), ("if", "fl"), ("fl", "sc"), ("sc", "o")]
    edges.append(("if", "spk"))
    return nir.NIRGraph(nodes, edges, metadata={"dt": 1.0}, type_check=False)


def test_bare_readout_with_two_output_axes_keeps_the_hosts_shape_and_order():
    """The readout's value (Lava's synaptic input integrated on the host) has the reference's
    per-step shape (3, 36), element for element: it was flat (108,) and `neuroedge nir`
    crashed comparing (T, B, 3, 36) with (T, B, 108)."""
    from neuroedge.backends.lava import _integrate
    from neuroedge.backends.lava_map import plan
    from neuroedge.export.nir_run import run_nir

    graph = _readout_2d_graph()
    x = (np.random.default_rng(1).random((5, 2, 2, 6, 6)) < 0.5).astype(np.float32)
    ref = run_nir(graph, {"in": x}, dt=1.0)
    readout = plan(graph, dt=1.0)[-1]
    assert readout.name == "sc" and not readout.spiking
    assert readout.shape == np.shape(ref["o"])[2:] == (3, 36)
    (syn,) = readout.synapses
    assert syn.source == "if"
    synaptic = np.asarray(ref["spk"], np.float64).reshape(5, 2, -1) @ syn.weight.T
    got = _integrate(readout, synaptic, 1.0)
    np.testing.assert_allclose(got, ref["o"], rtol=1e-5, atol=1e-5)


def test_bare_readout_with_two_output_axes_runs_on_lava(require, tmp_path):
    """End to end (`neuroedge nir FILE --backend lava`): equal to the host, not a crash."""
    import nir
    from neuroedge.api import check_nir

    require("lava")
    path = tmp_path / "readout2d.nir"
    nir.write(path, _readout_2d_graph())
    report = check_nir(path, "lava", steps=5, batch=2)
    for name, shape in (("o", [5, 2, 3, 36]), ("spk", [5, 2, 3, 6, 6])):
        assert report["outputs"][name]["shape"] == shape
        assert report["outputs"][name]["max_abs_err"] < 1e-4
