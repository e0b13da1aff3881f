"""graph.influence_max: the UCB policy hands the oracle optimistic probabilities: theta_hat +
rho sqrt(log(1 + t)) sqrt(diag V^-1), at or above the MLE's, shrinking as trials accumulate,
and exactly the MLE's at rho = 0."""

from __future__ import annotations

import math

import numpy as np
from neuroedge.models.influence_max import functional as F
from neuroedge.models.influence_max import learner as L


class RecordingWorlds:
    """Worlds that remember the probabilities every oracle call was given."""

    def __init__(self, worlds: F.Worlds) -> None:
        self.worlds, self.seen = worlds, []

    def reach(self, graph: F.ICGraph, p: np.ndarray) -> np.ndarray:
        self.seen.append(np.array(p))
        return self.worlds.reach(graph, p)


def observed_model(graph: F.ICGraph, cascades: int, rng: np.random.Generator, model=None):
    model = model or L.NodeLevelModel(graph)
    for _ in range(cascades):
        model.observe(F.simulate_cascade(graph, rng.choice(graph.n, 2, replace=False), rng))
    return model


def oracle_theta(policy_rho: float, model: L.NodeLevelModel, t: int, worlds) -> np.ndarray:
    rec = RecordingWorlds(worlds)
    L.ucb_policy(2, rec, policy_rho)(t, model, np.random.default_rng(0))
    (p,) = rec.seen
    return -np.log1p(-p)


def test_ucb_bonus_is_optimistic_and_shrinks_with_trials():
    g = F.random_graph(12, 3)
    worlds = F.Worlds.draw(g, 50, 4)
    rng = np.random.default_rng(5)
    model = observed_model(g, 20, rng)
    t, rho = 50, 0.5
    first = oracle_theta(rho, model, t, worlds) - model.theta_hat()
    expected = rho * math.sqrt(math.log(1 + t)) * model.widths()
    np.testing.assert_allclose(first, expected, rtol=1e-9, atol=1e-12)
    assert np.all(first > 0)  # every edge, seen or not, is pushed up
    tried_before = model.widths() < 1
    assert tried_before.sum() >= 5
    observed_model(g, 300, rng, model)
    second = oracle_theta(rho, model, t, worlds) - model.theta_hat()
    assert np.all(second <= first + 1e-12)  # V only grows, so diag V^-1 only shrinks
    assert np.all(second[tried_before] < 0.5 * first[tried_before])
    assert np.all(second > 0)


def test_rho0_hands_the_oracle_the_mle():
    g = F.random_graph(12, 3)
    worlds = F.Worlds.draw(g, 50, 4)
    model = observed_model(g, 30, np.random.default_rng(6))
    np.testing.assert_allclose(
        oracle_theta(0.0, model, 40, worlds), model.theta_hat(), rtol=1e-9, atol=1e-12
    )


def test_optimism_unsticks_greedy_on_the_mle():
    """On random_graph(20, 5) greedy on the MLE (rho = 0) locks onto a set it learnt early,
    e.g. (0, 9), and never learns the edges that would show it the better sets (the unseen ones
    sit at theta_min): about 2.1 nodes of regret per round, as much as random's, in 4 of 5 run
    seeds at T = 400. UCB (rho = 0.1) settles within 0.25 of sigma(S*) in every seed."""
    g = F.random_graph(20, 5)
    ref = L.RegretReference.build(g, 2, 1000, 6)
    worlds = F.Worlds.draw(g, 200, 7)
    horizon, quarter = 400, 100
    late = {}
    for rho in (0.0, 0.1):
        curves = [L.run_online(g, L.ucb_policy(2, worlds, rho), ref, horizon, s) for s in range(3)]
        late[rho] = [(c[-1] - c[-quarter - 1]) / quarter for c in curves]
    assert max(late[0.1]) < 0.3, late
    assert sorted(late[0.0])[1] > 1.5, late  # stuck in at least two of the three seeds
    assert sum(late[0.1]) < 0.25 * sum(late[0.0]), late
