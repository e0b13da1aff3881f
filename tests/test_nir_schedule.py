"""Which edges of a NIR cycle carry the previous step, and the shapes propagated from the
Inputs, checked against the reference simulator of test_nir_semantics (which imports nothing of
neuroedge) on graphs where an earlier rule or a missing guard changed the result."""

from __future__ import annotations

import numpy as np
from test_nir_semantics import assert_matches, chains, neuron, simulate, to_graph


def chord_spec(rng, names="ABC"):
    """A -> B -> C -> A (populations, each edge through a Linear) with a chord A -> C,
    entered only at A; ``names`` renames the populations."""
    a, b, c = names
    n = 3
    spec = {
        "in": {"kind": "Input", "shape": [n]},
        "o": {"kind": "Output", "shape": [n]},
        **{w: {"kind": "Linear", "weight": rng.normal(0.5, 1, (n, n))} for w in ("wa", "wb")},
        **{w: {"kind": "Linear", "weight": rng.normal(0.5, 1, (n, n))} for w in ("wc", "wca")},
        "wac": {"kind": "Linear", "weight": rng.normal(0.5, 1, (n, n))},
        **{p: neuron(rng, "LIF", n) for p in names},
    }
    return spec, chains(f"in wa {a} wb {b} wc {c} wca {a}; {a} wac {c} o")


def test_chord_delays_only_the_edge_into_the_cycles_shallowest_node():
    """C is entered deeper than A (through the chord): only C -> A carries the previous step,
    and C sums B's and A's current steps, whatever the names and the edge order. The rule
    before ("delayed unless one step deeper") also delayed B -> C: the loop took two steps."""
    from neuroedge.export.nir_run import graph_order, run_nir

    rng = np.random.default_rng(5)
    x = (rng.random((40, 2, 3)) < 0.5).astype(np.float32)
    runs = []
    for names, flip in (("ABC", False), ("zyx", False), ("ABC", True)):
        spec, edges = chord_spec(np.random.default_rng(6), names)
        edges = edges[::-1] if flip else edges
        graph = to_graph(spec, edges)
        assert graph_order(graph)[1] == {("wca", names[0])}
        runs.append(run_nir(graph, {"in": x})["o"])
    spec, edges = chord_spec(np.random.default_rng(6))
    ref = simulate(spec, edges, {"in": x}, {("wca", "A")})
    for got in runs:
        assert_matches(ref["o"], got, "o")
        np.testing.assert_array_equal(got, runs[0])
    twice = simulate(spec, edges, {"in": x}, {("wca", "A"), ("wc", "C")})["o"]
    assert np.mean(twice != ref["o"]) > 0.05  # the test tells the two rules apart


def test_input_with_leading_ones_keeps_its_shape():
    """An Input of shape (1, 3): the LIF's (4,) parameters fit the (1, 4) it receives (leading
    ones do not count), and each sample's output stays (1, 4) (it was (batch, 4) when the
    state took the parameters' shape and broadcast against the input)."""
    from neuroedge.export.nir_run import run_nir

    rng = np.random.default_rng(7)
    spec = {
        "x": {"kind": "Input", "shape": [1, 3]},
        "lin": {"kind": "Linear", "weight": rng.normal(0.6, 1, (4, 3))},
        "lif": neuron(rng, "LIF", 4),
        "o": {"kind": "Output", "shape": [1, 4]},
    }
    edges = chains("x lin lif o")
    xs = (rng.random((30, 3, 1, 3)) < 0.4).astype(np.float32)
    ref = simulate(spec, edges, {"x": xs})["o"]
    got = run_nir(to_graph(spec, edges), {"x": xs})["o"]
    assert got.shape == ref.shape == (30, 3, 1, 4)
    assert_matches(ref, got, "o")


def test_flatten_keeps_the_axes_after_its_end_dim():
    """Flatten(start 0, end 1) of (2, 3, 4) gives (6, 4), which the LI's (6, 4) parameters
    fit. Ignoring end_dim made it (24,) and refused them."""
    from neuroedge.export.nir_run import run_nir

    rng = np.random.default_rng(8)
    spec = {
        "x": {"kind": "Input", "shape": [2, 3, 4]},
        "flat": {"kind": "Flatten", "in_shape": [2, 3, 4], "start_dim": 0, "end_dim": 1},
        "li": neuron(rng, "LI", (6, 4)),
        "o": {"kind": "Output", "shape": [6, 4]},
    }
    edges = chains("x flat li o")
    xs = rng.normal(0, 1, (10, 2, 2, 3, 4)).astype(np.float32)
    ref = simulate(spec, edges, {"x": xs})["o"]
    assert ref.shape == (10, 2, 6, 4)
    assert_matches(ref, run_nir(to_graph(spec, edges), {"x": xs})["o"], "o")
