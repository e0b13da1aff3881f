"""graph.influence_max: IC simulator, oracle, node-level MLE, online regret, edge-list errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from neuroedge.models.influence_max import functional as F
from neuroedge.models.influence_max import learner as L
from neuroedge.models.influence_max.data import load_edge_list
from neuroedge.models.influence_max.experiment import loglog_slope
from scipy.optimize import minimize


def path_graph(p: float) -> F.ICGraph:
    return F.ICGraph(3, np.array([0, 1]), np.array([1, 2]), np.array([p, p]))


def test_cascade_on_a_path_matches_the_closed_form_spread():
    rng = np.random.default_rng(0)
    g = path_graph(0.5)
    sizes = [(F.simulate_cascade(g, np.array([0]), rng) >= 0).sum() for _ in range(20000)]
    assert np.mean(sizes) == pytest.approx(1 + 0.5 + 0.25, abs=0.03)


def test_activation_steps_follow_edges():
    g = path_graph(1.0)
    assert F.simulate_cascade(g, np.array([0]), np.random.default_rng(0)).tolist() == [0, 1, 2]


def test_live_edge_spread_matches_cascade_simulation():
    g = F.random_graph(12, 1)
    reach = F.Worlds.draw(g, 4000, 2).reach(g)
    rng = np.random.default_rng(3)
    sim = np.mean([(F.simulate_cascade(g, np.array([0, 5]), rng) >= 0).sum() for _ in range(4000)])
    assert F.spread(reach, (0, 5)) == pytest.approx(sim, rel=0.05)


def test_exact_oracle_is_the_brute_force_argmax_and_greedy_is_near_it():
    g = F.random_graph(14, 4)
    reach = F.Worlds.draw(g, 300, 5).reach(g)
    brute = max(itertools.combinations(range(14), 2), key=lambda s: F.spread(reach, s))
    assert F.spread(reach, F.best_seed_set(reach, 2)) == pytest.approx(F.spread(reach, brute))
    F.EXACT_LIMIT, saved = 0, F.EXACT_LIMIT
    try:
        greedy = F.best_seed_set(reach, 3)
    finally:
        F.EXACT_LIMIT = saved
    best3 = max(F.spread(reach, s) for s in itertools.combinations(range(14), 3))
    assert F.spread(reach, greedy) >= (1 - 1 / np.e) * best3


def test_node_mle_never_decreases_the_concave_likelihood_and_recovers_theta():
    rng = np.random.default_rng(6)
    theta_true = np.array([0.2, 0.7, 1.2])
    x = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1]], float)
    trials = np.full(5, 4000.0)
    succ = rng.binomial(4000, -np.expm1(-x @ theta_true)).astype(float)
    start = np.full(3, 0.1)
    fit = L.node_mle(start, x, trials, succ)
    assert L.node_loglik(fit, x, trials, succ) >= L.node_loglik(start, x, trials, succ)
    reference = minimize(
        lambda t: -L.node_loglik(t, x, trials, succ),
        start,
        method="L-BFGS-B",
        bounds=[(L.THETA_MIN, L.THETA_MAX)] * 3,
        options={"ftol": 1e-14},
    )
    assert np.abs(fit - reference.x).max() < 1e-4
    assert np.abs(fit - theta_true).max() < 0.1
    # concavity along a random chord
    a, b = rng.uniform(0.1, 2, 3), rng.uniform(0.1, 2, 3)
    mid = L.node_loglik((a + b) / 2, x, trials, succ)
    assert mid >= (L.node_loglik(a, x, trials, succ) + L.node_loglik(b, x, trials, succ)) / 2


def test_node_level_observations_estimate_edge_probabilities():
    g = F.random_graph(10, 7)
    model = L.NodeLevelModel(g)
    rng = np.random.default_rng(8)
    for _ in range(1500):
        model.observe(F.simulate_cascade(g, rng.choice(10, 2, replace=False), rng))
    p_hat = -np.expm1(-model.theta_hat())
    # an edge is identified by the trials where its source was the only newly active
    # in-neighbour (joint patterns only pin down sums of theta)
    attempts = np.zeros(len(g.src))
    for node in model.nodes:
        for pattern, (trials, _) in node.patterns.items():
            if len(pattern) == 1:
                attempts[node.edges[pattern[0]]] += trials
    well_seen = attempts >= 200
    assert well_seen.sum() >= 5
    assert np.abs(p_hat - g.prob)[well_seen].max() < 0.1


def test_ucb_regret_is_sublinear_and_far_below_random():
    g = F.random_graph(20, 0)
    ref = L.RegretReference.build(g, 2, 1000, 1)
    worlds = F.Worlds.draw(g, 200, 2)
    horizon = 400
    ucb = L.run_online(g, L.ucb_policy(2, worlds), ref, horizon, 3)
    rnd = L.run_online(g, L.random_policy(2), ref, horizon, 3, learn=False)
    assert loglog_slope(ucb) < 0.6
    assert ucb[-1] < 0.25 * rnd[-1]
    assert ucb[-1] / horizon < ucb[horizon // 4 - 1] / (horizon // 4)


@pytest.mark.parametrize(
    "text, match",
    [
        ("0 1 0.5\n1 2 -0.1\n", "line 2: probability -0.1 is not in"),
        ("0 1 0.5\n1 2 nan\n", "line 2: probability nan is not in"),
        ("0 1\n1 x\n", "line 2: target 'x' is not an integer"),
        ("0 1\n1 2 0.3\n", "line 2 has 3 fields, expected 2"),
        ("0 1\n1 4\n", r"ids \[2, 3\] appear in no edge"),
        ("0 1\n1 1\n", "line 2: self-loop"),
        ("0 1\n-1 2\n", "line 2: source -1 is negative"),
    ],
)
def test_bad_edge_lists_name_the_line(tmp_path, text, match):
    path = tmp_path / "edges.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_edge_list(path)


def test_edge_list_with_header_gets_weighted_cascade(tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text("src,dst\n0,2\n1,2\n2,0\n")
    g = load_edge_list(path)
    assert g.n == 3 and g.prob.tolist() == [0.5, 0.5, 1.0]


def test_graph_record_refuses_bad_probabilities():
    with pytest.raises(ValueError, match=r"edge 1 \(1->2\): probability 1.5"):
        F.ICGraph(3, np.array([0, 1]), np.array([1, 2]), np.array([0.5, 1.5]))
