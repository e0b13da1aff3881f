"""Cohen's kappa of spike trains (bench.parity.spike_kappa): hand-computed cases, and the
``spike_kappa`` that parity.compare and ``neuroedge nir``'s comparison report beside agreement."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.bench import parity
from neuroedge.nir_check import _nir_compare


def train(n: int, on: range | list[int]) -> np.ndarray:
    """A binary train of ``n`` slots with spikes at ``on``."""
    x = np.zeros(n, dtype=np.float32)
    x[list(on)] = 1.0
    return x


def test_identical_trains_score_one() -> None:
    x = (np.random.default_rng(0).random((8, 3, 20)) < 0.1).astype(np.float32)
    assert parity.spike_kappa(x, x.copy()) == 1.0
    assert parity.spike_kappa(x.astype(bool), x) == 1.0


def test_a_silent_train_scores_zero_where_agreement_is_095() -> None:
    ref, silent = train(400, range(20)), np.zeros(400, dtype=np.float32)  # 5% vs none
    assert np.mean(ref == silent) == 0.95
    assert parity.spike_kappa(ref, silent) == pytest.approx(0.0, abs=1e-12)
    assert parity.spike_kappa(silent, ref) == pytest.approx(0.0, abs=1e-12)


def test_independent_trains_at_one_rate_score_zero() -> None:
    # 5% each, one shared spike (400 * 0.05^2): agreement 0.905 = 1 - 2r(1 - r), all chance
    a, b = train(400, range(20)), train(400, range(19, 39))
    assert np.mean(a == b) == pytest.approx(0.905)
    assert parity.spike_kappa(a, b) == pytest.approx(0.0, abs=1e-12)
    rng = np.random.default_rng(1)
    x, y = (rng.random((2, 200_000)) < 0.05).astype(np.float32)
    assert abs(parity.spike_kappa(x, y)) < 0.02


def test_partial_and_anti_correlated_trains() -> None:
    # r = 0.2 each, agreement 0.8, chance 0.04 + 0.64 = 0.68: kappa 0.12 / 0.32
    assert parity.spike_kappa(train(10, [0, 1]), train(10, [0, 2])) == pytest.approx(0.375)
    alt = train(4, [0, 2])
    assert parity.spike_kappa(alt, 1 - alt) == pytest.approx(-1.0)
    # rates 0.5 / 0.25, agreement 0.25, chance 0.125 + 0.375: (0.25 - 0.5) / 0.5
    assert parity.spike_kappa(train(4, [0, 1]), train(4, [2])) == pytest.approx(-0.5)


def test_constant_equal_trains_score_one_and_bad_input_is_refused() -> None:
    """p_e == 1 only for two equal constant trains (identical): kappa 1.0 by definition."""
    zeros, ones = np.zeros((5, 2)), np.ones((5, 2))
    assert parity.spike_kappa(zeros, zeros) == parity.spike_kappa(ones, ones) == 1.0
    assert parity.spike_kappa(zeros, ones) == 0.0  # rates 0 and 1: chance agreement 0
    with pytest.raises(ValueError, match="only 0 and 1"):
        parity.spike_kappa(np.array([0.0, 0.5]), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="shapes"):
        parity.spike_kappa(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="shapes"):
        parity.spike_kappa(np.zeros(0), np.zeros(0))


def test_compare_reports_the_mean_of_each_spike_outputs_kappa_beside_agreement() -> None:
    ref = {"spikes1": train(200, range(10)), "spikes2": train(200, range(10, 20)), "y": [1.0]}
    got = {"spikes1": np.zeros(200), "spikes2": np.zeros(200), "y": [1.0]}
    metrics = parity.compare(ref, got)
    assert metrics["spike_agreement"].value == 0.95
    assert metrics["spike_kappa"].value == pytest.approx(0.0, abs=1e-12)
    assert metrics["spike_kappa"].unit == "kappa"
    half = {**got, "spikes1": ref["spikes1"]}  # one output right (kappa 1), one silent (0)
    assert parity.compare(ref, half)["spike_kappa"].value == pytest.approx(0.5)
    # pooled, outputs firing at 90% and 10% that each ignore their reference scored ~0.64
    rng = np.random.default_rng(0)
    busy, quiet = (rng.random((2, 5000)) < p for p in (0.9, 0.1))
    ref2, got2 = (
        {"spikes1": busy[0], "spikes2": quiet[0]},
        {"spikes1": busy[1], "spikes2": quiet[1]},
    )
    assert abs(parity.compare(ref2, got2)["spike_kappa"].value) < 0.03
    graded = parity.compare({"spikes": np.array([0.0, 0.5])}, {"spikes": np.array([0.0, 0.5])})
    assert "spike_kappa" not in graded and graded["spike_agreement"].value == 1.0


def test_nir_comparison_reports_kappa_for_spike_outputs_only() -> None:
    ref = {"spk": train(100, range(5)).reshape(10, 10, 1), "readout": np.linspace(0, 1, 10)}
    got = {"spk": np.zeros((10, 10, 1)), "readout": np.linspace(0, 1, 10)}
    rows = _nir_compare(["spk", "readout"], ref, got)
    assert rows["spk"]["equal_fraction"] == 0.95
    assert rows["spk"]["spike_kappa"] == pytest.approx(0.0, abs=1e-12)
    assert "spike_kappa" not in rows["readout"]
    quiet = _nir_compare(["spk"], {"spk": np.zeros((4, 1, 2))}, {"spk": np.zeros((4, 1, 2))})
    assert quiet["spk"]["spike_kappa"] == 1.0 and quiet["spk"]["reference_silent"]
    assert quiet["spk"]["warning"].startswith("reference output silent")
