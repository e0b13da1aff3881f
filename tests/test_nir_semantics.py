"""NIR graphs run as NIR's equations say: the host runner (and the Lava route) against a small
numpy simulator written here from NIR's documented node equations, on hand-made graphs.

The reference imports nothing of neuroedge. Each neuron is NIR's continuous equation stepped by
forward Euler at dt (the discretisation neuroedge.export.nir_run documents)::

    LIF      tau dv/dt = v_leak - v + r x          spike v > v_threshold, reset to v_reset
    IF           dv/dt = r x                       (or v - v_threshold: reset "subtract")
    LI / I   as LIF / IF, output v, no spike
    CubaLIF  tau_syn di/dt = w_in x - i;  tau_mem dv/dt = v_leak - v + r i  (v takes the new i)
    CubaLI   the same, output v
    Threshold  x > threshold;  Scale  scale x;  Affine  W x + b;  Linear  W x

Convolutions and pools are written out as loops (torch.nn.Conv2d's definition: groups,
stride, padding, dilation per axis). A delayed edge carries its source's previous step.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

DT = 1e-3


def ref_conv2d(x, w, b, stride, pad, dil, groups):
    """x (B, C, H, W), w (O, C / groups, kh, kw): torch.nn.Conv2d by its definition."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    outs, per_group, kh, kw = w.shape
    ho = (xp.shape[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (xp.shape[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((x.shape[0], outs, ho, wo)) + b[:, None, None]
    for o in range(outs):
        g = o // (outs // groups)
        for a in range(kh):
            for c in range(kw):  # tap (a, c) of every output pixel
                rows = slice(a * dil[0], a * dil[0] + stride[0] * (ho - 1) + 1, stride[0])
                cols = slice(c * dil[1], c * dil[1] + stride[1] * (wo - 1) + 1, stride[1])
                tap = xp[:, g * per_group : (g + 1) * per_group, rows, cols]
                y[:, o] += np.einsum("bchw,c->bhw", tap, w[o, :, a, c])
    return y


def ref_pool(x, k, s, p, mean):
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))  # zeros: counted
    ho, wo = (xp.shape[2] - k[0]) // s[0] + 1, (xp.shape[3] - k[1]) // s[1] + 1
    y = np.zeros((*x.shape[:2], ho, wo))
    for i in range(ho):
        for j in range(wo):
            y[:, :, i, j] = xp[:, :, i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1]].sum(
                (2, 3)
            )
    return y / (k[0] * k[1]) if mean else y


def ref_stateless(kind, p, x):
    if kind in ("Affine", "Linear"):
        return x @ p["weight"].T + (p["bias"] if kind == "Affine" else 0.0)
    if kind == "Scale":
        return x * p["scale"]
    if kind == "Threshold":
        return (x > p["threshold"]).astype(np.float64)
    if kind == "Conv2d":
        return ref_conv2d(
            x, p["weight"], p["bias"], p["stride"], p["padding"], p["dilation"], p["groups"]
        )
    if kind in ("SumPool2d", "AvgPool2d"):
        return ref_pool(x, p["kernel_size"], p["stride"], p["padding"], kind == "AvgPool2d")
    if kind == "Flatten":  # dims without the batch axis
        start, end = (d % (x.ndim - 1) for d in (p["start_dim"], p.get("end_dim", -1)))
        return x.reshape(*x.shape[: start + 1], -1, *x.shape[end + 2 :])
    raise AssertionError(kind)


def ref_neuron(kind, p, x, state, reset):
    """One Euler step; state (i, v); returns (output, state)."""
    i, v = state
    if kind in ("CubaLIF", "CubaLI"):
        i = i + DT / p["tau_syn"] * (p["w_in"] * x - i)
        v = v + DT / p["tau_mem"] * (p["v_leak"] - v + p["r"] * i)
    elif kind in ("LIF", "LI"):
        v = v + DT / p["tau"] * (p["v_leak"] - v + p["r"] * x)
    else:  # IF, I
        v = v + DT * p["r"] * x
    if kind in ("LI", "I", "CubaLI"):
        return v, (i, v)
    z = (v > p["v_threshold"]).astype(np.float64)
    v = v - p["v_threshold"] * z if reset == "subtract" else np.where(z > 0, p["v_reset"], v)
    return z, (i, v)


def simulate(spec, edges, inputs, delayed=(), reset="zero"):
    """Outputs {Output node: (T, B, ...)} of the graph ``spec`` ({name: {"kind", params}})."""
    as_float = lambda v: np.asarray(v, np.float64) if isinstance(v, np.ndarray) else v  # noqa: E731
    params = {n: {k: as_float(v) for k, v in s.items()} for n, s in spec.items()}
    steps = len(next(iter(inputs.values())))
    state = {n: (0.0, 0.0) for n in spec}
    prev = {e: 0.0 for e in delayed}
    outs = {n: [] for n, s in spec.items() if s["kind"] == "Output"}
    for t in range(steps):
        val = {n: np.asarray(inputs[n][t], np.float64) for n in inputs}
        while len(val) < len(spec):
            for n, p in params.items():
                srcs = [s for s, d in edges if d == n and (s, d) not in delayed]
                if n in val or not all(s in val for s in srcs):
                    continue
                x = sum([val[s] for s in srcs] + [prev[(s, d)] for s, d in delayed if d == n])
                if p["kind"] == "Output":
                    val[n] = x
                elif p["kind"] in ("LIF", "IF", "LI", "I", "CubaLIF", "CubaLI"):
                    val[n], state[n] = ref_neuron(p["kind"], p, x, state[n], reset)
                else:
                    val[n] = ref_stateless(p["kind"], p, x)
        prev = {(s, d): val[s] for s, d in delayed}
        for n in outs:
            outs[n].append(val[n])
    return {n: np.stack(v) for n, v in outs.items()}


def to_graph(spec, edges):
    """The same graph as NIR nodes."""
    import nir

    nodes = {}
    for name, s in spec.items():
        kind = s["kind"]
        p = {k: np.float32(v) if isinstance(v, np.ndarray) else v for k, v in s.items()}
        del p["kind"]
        if kind in ("Input", "Output"):
            nodes[name] = getattr(nir, kind)({kind.lower(): np.array(p["shape"])})
        elif kind == "Flatten":
            nodes[name] = nir.Flatten(
                {"input": np.array(p["in_shape"])}, p["start_dim"], p.get("end_dim", -1)
            )
        elif kind in ("SumPool2d", "AvgPool2d"):
            nodes[name] = getattr(nir, kind)(
                *(np.array(p[k]) for k in ("kernel_size", "stride", "padding"))
            )
        else:
            nodes[name] = getattr(nir, kind)(**p)
    return nir.NIRGraph(nodes, edges, metadata={"dt": DT}, type_check=False)


def assert_matches(ref, got, name):
    assert got.shape == ref.shape, (name, got.shape, ref.shape)
    if np.isin(ref, (0.0, 1.0)).all():  # spikes: float32 against float64 may flip one
        assert 0 < ref.mean() < 1, f"{name}: the reference is constant ({ref.mean()})"
        assert np.mean(got != ref) <= 0.01, f"{name}: {np.mean(got != ref):.3f} of spikes differ"
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, err_msg=name)


RANGES = {
    "tau": (2e-3, 8e-3),
    "tau_syn": (2e-3, 5e-3),
    "tau_mem": (4e-3, 1e-2),
    "r": (0.5, 2),
    "v_leak": (0.1, 0.4),
    "v_threshold": (0.2, 0.5),
    "v_reset": (-0.3, -0.1),
    "w_in": (0.5, 3),
}
PARAMS = {
    "LIF": "tau r v_leak v_threshold v_reset",
    "IF": "r v_threshold v_reset",
    "I": "r",
    "LI": "tau r v_leak",
    "CubaLIF": "tau_syn tau_mem r v_leak v_threshold v_reset w_in",
    "CubaLI": "tau_syn tau_mem r v_leak w_in",
}


def neuron(rng, kind, n=4, **fixed):
    """A neuron node spec (``n`` neurons or shape ``n``): every parameter drawn per neuron
    from RANGES unless ``fixed``."""
    drawn = {p: rng.uniform(*RANGES[p], n) for p in PARAMS[kind].split()}
    return {"kind": kind, **drawn, **fixed}


def chains(paths):
    """Edges along each path (node names, paths separated by ';')."""
    return [e for path in paths.split(";") for e in pairwise(path.split())]


def neuron_spec(rng, n=4):
    """Every neuron type with r != 1, v_leak != 0, v_reset != 0, plus Scale and Threshold."""
    spec = {
        "x": {"kind": "Input", "shape": [3]},
        "aff": {"kind": "Affine", "weight": rng.normal(0.6, 1, (n, 3)), "bias": np.full(n, 0.1)},
        "lif": neuron(rng, "LIF", v_threshold=rng.uniform(0.3, 0.6, n)),
        "if": neuron(rng, "IF", r=rng.uniform(50, 200, n)),
        "i": neuron(rng, "I"),
        "lin": {"kind": "Linear", "weight": rng.normal(0.5, 1, (n, 3))},
        "cuba": neuron(rng, "CubaLIF", v_leak=rng.uniform(0, 0.1, n)),
        "sc": {"kind": "Scale", "scale": np.array([-0.8, 0.5, 1.7, 2.5])},
        "li": neuron(rng, "LI", v_leak=rng.uniform(-0.1, 0.1, n)),
        "cli": neuron(rng, "CubaLI", v_leak=rng.uniform(0, 0.1, n)),
        "th": {"kind": "Threshold", "threshold": np.array([0.05, 0.1, 0.15, 0.2])},
    }
    outs = ("o_lif", "o_if", "o_i", "o_li", "o_cuba", "o_cli", "o_th")
    spec.update({o: {"kind": "Output", "shape": [n]} for o in outs})
    paths = "x aff lif o_lif; aff if o_if; aff i o_i; x lin cuba sc li o_li; cuba o_cuba; "
    return spec, chains(paths + "lin cli th o_th; cli o_cli")


@pytest.mark.parametrize("reset", ["zero", "subtract"])
def test_host_neurons_follow_nir_equations(reset, tmp_path):
    from neuroedge.export.nir import read_nir, write_nir
    from neuroedge.export.nir_run import run_nir

    rng = np.random.default_rng(0)
    spec, edges = neuron_spec(rng)
    xs = (rng.random((30, 3, 3)) < 0.4).astype(np.float32)
    graph = read_nir(write_nir(to_graph(spec, edges), tmp_path / "neurons.nir"))
    ref = simulate(spec, edges, {"x": xs}, reset=reset)
    got = run_nir(graph, {"x": xs}, reset=reset)
    for name in ref:
        assert_matches(ref[name], got[name], name)
    assert not np.isin(ref["o_cli"], (0.0, 1.0)).all()  # CubaLI outputs its membrane


def conv_spec(rng):
    """A grouped, dilated, strided convolution with a 3x2 kernel, then pools and a readout."""
    spec = {
        "x": {"kind": "Input", "shape": [4, 9, 8]},
        "conv": {
            "kind": "Conv2d",
            "input_shape": (9, 8),
            "weight": rng.normal(0.3, 1, (6, 2, 3, 2)),
            "bias": rng.normal(0, 0.3, 6),
            "stride": (2, 1),
            "padding": (1, 0),
            "dilation": (1, 2),
            "groups": 2,
        },
        "if": neuron(rng, "IF", (6, 5, 6), r=np.full((6, 5, 6), 30.0)),
        "sp": {"kind": "SumPool2d", "kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 1)},
        "ap": {"kind": "AvgPool2d", "kernel_size": (2, 2), "stride": (2, 1), "padding": (0, 0)},
        "flat": {"kind": "Flatten", "in_shape": [6, 3, 2], "start_dim": 0},
        "aff": {"kind": "Affine", "weight": rng.normal(0, 1, (5, 36)), "bias": rng.normal(0, 1, 5)},
        "li": {"kind": "LI", "tau": np.full(5, 1e-2), "r": np.ones(5), "v_leak": np.zeros(5)},
        "out": {"kind": "Output", "shape": [5]},
        "spikes": {"kind": "Output", "shape": [6, 5, 6]},
    }
    return spec, chains("x conv if sp ap flat aff li out; if spikes")


def test_grouped_non_square_conv_reads_and_runs_as_torch_defines_it(tmp_path):
    """nir 1.0.8 declares this Conv2d's input with 2 channels (no groups) and its output 7
    wide (kernel height for both axes): read_nir refused it before it computed the shapes."""
    import nir
    from neuroedge.export.nir import read_nir
    from neuroedge.export.nir_run import run_nir

    rng = np.random.default_rng(1)
    spec, edges = conv_spec(rng)
    path = tmp_path / "conv.nir"
    nir.write(str(path), to_graph(spec, edges))  # as another tool writes it
    xs = (rng.random((8, 2, 4, 9, 8)) < 0.4).astype(np.float32)
    ref = simulate(spec, edges, {"x": xs})
    got = run_nir(read_nir(path), {"x": xs})
    for name in ref:
        assert_matches(ref[name], got[name], name)


def cycle_spec(rng, first="inA"):
    """Two populations in a cycle, each entered from its own input (lif from ``first``)."""
    n = 5

    spec = {
        first: {"kind": "Input", "shape": [3]},
        "inB": {"kind": "Input", "shape": [2]},
        "la": {"kind": "Linear", "weight": rng.normal(0.5, 1, (n, 3))},
        "lb": {"kind": "Linear", "weight": rng.normal(0.5, 1, (n, 2))},
        "l2": {"kind": "Linear", "weight": rng.normal(0.5, 1, (n, n))},
        "back": {"kind": "Linear", "weight": rng.normal(0, 1, (n, n))},
        "lif": neuron(rng, "LIF", n),
        "lif2": neuron(rng, "LIF", n),
        "oA": {"kind": "Output", "shape": [n]},
        "oB": {"kind": "Output", "shape": [n]},
    }
    return spec, chains(f"{first} la lif l2 lif2 back lif oA; lif2 oB; inB lb lif2")


def test_delayed_edges_do_not_depend_on_names_or_edge_order(tmp_path):
    """A cycle entered at two nodes: each edge arriving at an entry (lif, lif2, both two
    edges from an input) carries the previous step. Before, a depth-first walk in the order
    of the node names picked one of them: renaming an Input changed the spikes."""
    from neuroedge.export.nir import read_nir, write_nir
    from neuroedge.export.nir_run import graph_order, run_nir

    rng = np.random.default_rng(1)
    xa = (rng.random((30, 2, 3)) < 0.4).astype(np.float32)
    xb = (rng.random((30, 2, 2)) < 0.5).astype(np.float32)
    runs = []
    for first, flip in (("inA", False), ("z_inA", False), ("inA", True)):
        spec, edges = cycle_spec(np.random.default_rng(2), first)
        edges = edges[::-1] if flip else edges
        graph = read_nir(write_nir(to_graph(spec, edges), tmp_path / f"{first}{flip}.nir"))
        assert graph_order(graph)[1] == {("back", "lif"), ("l2", "lif2")}
        runs.append(run_nir(graph, {first: xa, "inB": xb}))
    ref = simulate(spec, edges, {"inA": xa, "inB": xb}, {("back", "lif"), ("l2", "lif2")})
    for got in runs:
        for name in ref:
            assert_matches(ref[name], got[name], name)
            np.testing.assert_array_equal(got[name], runs[0][name])


@pytest.mark.parametrize("loop", ["through_linear", "self"])
def test_population_onto_itself_reads_its_previous_step(loop):
    from neuroedge.export.nir_run import graph_order, run_nir

    rng = np.random.default_rng(3)
    spec, _ = cycle_spec(rng)
    edges = [("inA", "la"), ("la", "lif"), ("lif", "oA")]
    if loop == "self":
        edges, delayed = [*edges, ("lif", "lif")], {("lif", "lif")}
    else:
        edges, delayed = [*edges, ("lif", "back"), ("back", "lif")], {("back", "lif")}
    names = {a for e in edges for a in e}
    spec = {n: s for n, s in spec.items() if n in names}
    xs = (rng.random((30, 2, 3)) < 0.4).astype(np.float32)
    graph = to_graph(spec, edges)
    assert graph_order(graph)[1] == delayed
    ref = simulate(spec, edges, {"inA": xs}, delayed)
    assert_matches(ref["oA"], run_nir(graph, {"inA": xs})["oA"], "oA")


def lava_spec(rng, scalar):
    """IF and LIF populations Lava maps (one tau, reset to 0); ``scalar``: the LIF's
    parameters are 0-d, as norse's to_nir writes them."""
    lif = {"tau": 5e-3, "r": 1.7, "v_leak": 0.2, "v_threshold": 0.4, "v_reset": 0.0}
    lif = {k: np.asarray(v if scalar else np.full(4, v)) for k, v in lif.items()}
    spec = {
        "x": {"kind": "Input", "shape": [3]},
        "aff": {"kind": "Affine", "weight": rng.normal(0.6, 1, (4, 3)), "bias": np.zeros(4)},
        "if": neuron(rng, "IF", r=rng.uniform(50, 200, 4), v_reset=np.zeros(4)),
        "lif": {"kind": "LIF", **lif},
        "o_if": {"kind": "Output", "shape": [4]},
        "o_lif": {"kind": "Output", "shape": [4]},
    }
    return spec, chains("x aff if o_if; aff lif o_lif")


@pytest.mark.parametrize("scalar", [False, True])
def test_lava_plan_steps_as_nir_equations(scalar):
    """Lava's LIF (u = a_in; v' = (1 - dv) v + u + bias; spike v' > 1, reset to 0) on the
    planned layers, in numpy, against the reference (no Lava needed)."""
    from neuroedge.backends.lava_map import plan

    rng = np.random.default_rng(4)
    spec, edges = lava_spec(rng, scalar)
    xs = (rng.random((30, 3, 3)) < 0.4).astype(np.float32)
    ref = simulate(spec, edges, {"x": xs})
    layers = {layer.name: layer for layer in plan(to_graph(spec, edges), DT)}
    for name in ("if", "lif"):
        layer = layers[name]
        assert layer.shape == (4,) and layer.spiking
        (syn,) = layer.synapses
        v, spikes = np.zeros((3, 4)), []
        for x in xs:
            v = (1 - layer.dv) * v + x @ syn.weight.T + layer.bias
            spikes.append((v > 1).astype(np.float64))
            v = np.where(v > 1, 0.0, v)
        assert_matches(ref[f"o_{name}"], np.stack(spikes), name)


@pytest.mark.loihi
@pytest.mark.parametrize("scalar", [False, True])
def test_lava_runs_as_nir_equations(scalar, require):
    """The Lava route end to end (floating_pt) against the reference; 0-d parameters (norse)
    crashed the build before the population took its shape from its synapse."""
    require("lava")
    from neuroedge.registry import get_backend
    from neuroedge.types import IOSpec, ModelSpec, NIRProgram

    rng = np.random.default_rng(4)
    spec, edges = lava_spec(rng, scalar)
    xs = (rng.random((30, 3, 3)) < 0.4).astype(np.float32)
    graph = to_graph(spec, edges)
    model = ModelSpec(
        "snn.nir_semantics",
        "snn",
        "IF and LIF on Lava",
        (IOSpec("x", ("T", "batch", 3)),),
        (IOSpec("o_if", ("T", "batch", 4)), IOSpec("o_lif", ("T", "batch", 4))),
        build=lambda cfg: NIRProgram(graph, DT),
        example=lambda s: {"x": xs},
    )
    lava = get_backend("lava")
    art = lava.compile(NIRProgram(graph, DT), model, {"variant": "floating_pt"})
    try:
        got = lava.run(art, {"x": xs})
    finally:
        art.handle.close()
    ref = simulate(spec, edges, {"x": xs})
    for name in ref:
        assert_matches(ref[name], got[name], name)
