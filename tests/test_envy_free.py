"""alloc.envy_free: threshold rule vs brute force, noisy-query success, sweeps, bad files."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from neuroedge.models.envy_free import functional as F
from neuroedge.models.envy_free.spec import allocate, load_valuations


def test_threshold_rule_picks_the_best_prefix_of_the_ratio_order():
    rng = np.random.default_rng(0)
    for _ in range(50):
        est = rng.uniform(0.01, 1, (9, 2))
        order = np.argsort(est[:, 1] / est[:, 0])
        prefix_envies = []
        for k in range(10):
            to_b = np.ones(9, bool)
            to_b[order[:k]] = False
            prefix_envies.append(F.envy(est, to_b))
        assert F.envy(est, F.threshold_allocation(est)) == pytest.approx(min(prefix_envies))


def test_threshold_on_exact_values_is_within_one_item_of_the_brute_force_optimum():
    rng = np.random.default_rng(1)
    for m in (4, 7, 10, 12):
        for _ in range(15):
            vals = rng.uniform(0, 1, (m, 2)) + rng.uniform(0, 1e-9, (m, 2))
            vals = np.clip(vals, 0, 1)
            opt = F.brute_force_allocation(vals)
            ours = float(F.envy(vals, F.threshold_allocation(vals)))
            assert opt.envy <= ours + 1e-12
            assert ours <= opt.envy + 1.0


def test_brute_force_matches_enumeration_with_itertools():
    vals = np.random.default_rng(2).uniform(0, 1, (6, 2))
    best = min(F.envy(vals, np.array(bits, bool)) for bits in itertools.product([0, 1], repeat=6))
    assert F.brute_force_allocation(vals).envy == pytest.approx(best)


def test_envy_free_is_proportionality_for_two_agents():
    rng = np.random.default_rng(3)
    for _ in range(200):
        vals = rng.uniform(0, 1, (8, 2))
        to_b = rng.uniform(size=8) < 0.5
        proportional = (
            vals[~to_b, 0].sum() >= vals[:, 0].sum() / 2
            and vals[to_b, 1].sum() >= vals[:, 1].sum() / 2
        )
        assert (F.envy(vals, to_b) <= 0) == proportional


def test_exact_queries_and_direct_means_have_the_same_law():
    rng = np.random.default_rng(4)
    vals = F.hard_instance(10, 2.0, rng)
    exact = F.query_means(vals, 16, 1.0, rng, trials=4000, exact=True)
    direct = F.query_means(vals, 16, 1.0, rng, trials=4000)
    for draws in (exact, direct):
        assert np.abs(draws.mean(0) - vals).max() < 0.02
        assert np.abs(draws.std(0) - 0.25).max() < 0.02


def test_success_at_theorem_budget_and_failure_far_below_it():
    rng = np.random.default_rng(5)
    tau_star = F.theorem_budget(400, 10)
    vals = F.hard_instances(400, 10, rng, 300)
    assert F.success_rate(vals, tau_star, 1.0, rng) >= 0.95
    assert F.success_rate(vals, tau_star / 1000, 1.0, rng) <= 0.5


def test_tau90_slopes_against_delta_and_m():
    def tau(m, d):
        return F.tau_for_success(lambda rng, n: F.hard_instances(m, d, rng, n), trials=150)

    deltas = [8, 16, 32]
    slope_delta = F.loglog_slope(deltas, [tau(400, d) for d in deltas])
    assert -2.8 <= slope_delta <= -1.6
    ms = [100, 200, 400]
    slope_m = F.loglog_slope(ms, [tau(m, 12) for m in ms])
    assert slope_m >= 1.1 and slope_m <= 1.9


def _hard(rng: np.random.Generator, n: int) -> np.ndarray:
    return F.hard_instances(8, 2.0, rng, n)


def _tau90(sigma: float = 1.0, **kw) -> float:
    return F.tau_for_success(_hard, sigma=sigma, trials=100, **kw)


def _rate(tau: float) -> float:
    """Success at ``tau`` with tau_for_success's common random numbers (seed 0, 100 trials)."""
    rng = np.random.default_rng(0)
    return F.success_rate(_hard(rng, 100), tau, 1.0, rng, 100)


def test_tau90_scales_as_sigma_squared_and_is_never_the_bracket_bound():
    # the means are N(u, sigma^2 / tau): tau_90 at sigma=1e-3 is 1e-6 x the one at sigma=1
    # (it was the bracket's lower bound 0.0100006 at every m, Delta)
    base = _tau90()
    assert 0.01 * 1.001 < base < 1e5 / 1.001  # inside the bracket, not one of its ends
    assert _rate(base) >= 0.9 > _rate(base / 1.001)  # where success crosses the target
    assert _tau90(1e-3) == pytest.approx(1e-6 * base, rel=1e-6)
    assert _tau90(30.0) == pytest.approx(900 * base, rel=1e-6)


def test_a_bracket_already_at_target_moves_down_not_reported():
    assert _tau90(lo=100.0) == pytest.approx(_tau90(), rel=1e-3)


def test_success_at_target_even_at_the_lowest_tau_is_an_error():
    zeros = lambda rng, n: np.zeros((n, 4, 2))  # noqa: E731 every allocation is envy-free
    with pytest.raises(ValueError, match=r"already >= 0.9 at tau=1e-06 .*not measurable"):
        F.tau_for_success(zeros, trials=10)


def test_host_program_allocates_and_reports_estimated_envy():
    est = np.array([[0.9, 0.1], [0.1, 0.9], [0.5, 0.5]])
    out = allocate(est)
    assert out["to_b"][0] == np.False_ and out["to_b"][1] == np.True_
    assert out["estimated_envy"][0] == pytest.approx(F.envy(est, out["to_b"]))


@pytest.mark.parametrize(
    "text, match",
    [
        ("0.5,0.5\n0.2\n", "line 2 has 1 fields"),
        ("0.5,0.5\nnan,0.1\n", "line 2 column 0.*not finite"),
        ("0.5,0.5\n0.3,-0.1\n", "line 2 column 1 \\(0-based, agent b\\) value -0.1 is outside"),
        ("0.5,0.5\n0.3,abc\n", r"line 2 column 1 \(0-based\): 'abc' is not a number"),
    ],
)
def test_bad_valuation_files_name_the_row(tmp_path, text, match):
    path = tmp_path / "vals.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_valuations(path)


def test_valuation_file_with_header_loads(tmp_path):
    path = tmp_path / "vals.csv"
    path.write_text("agent_a,agent_b\n0.5,0.25\n1,0\n")
    assert load_valuations(path).tolist() == [[0.5, 0.25], [1.0, 0.0]]


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="expected shape"):
        allocate(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="m=21 exceeds"):
        F.brute_force_allocation(np.zeros((21, 2)))
