"""theory.lora_meanfield: the spectral bound, the eta/sqrt(L) collapse and the time to deviation."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.models.lora_meanfield import experiments as ex
from neuroedge.models.lora_meanfield.functional import (
    attention_layer,
    check_tokens,
    run_flow,
    sphere_tokens,
    wasserstein2,
)


@pytest.fixture(scope="module")
def phase() -> ex.PhaseResult:
    return ex.phase_transition(seeds=3)


def test_layer_keeps_tokens_on_the_sphere() -> None:
    x = sphere_tokens(16, 8, 0)
    v = ex.base_value()
    y = attention_layer(x, v, v + 0.1 * np.eye(8), 1.0, 0.5)
    assert np.allclose(np.linalg.norm(y, axis=1), 1.0, atol=1e-14)


def test_base_flow_collapses_to_top_eigenvector() -> None:
    v = ex.base_value()
    x = run_flow(sphere_tokens(32, 8, 1), v, v, 60.0, 1200)
    assert np.abs(x[:, 0]).min() > 1 - 1e-6


def test_w2_is_a_metric_on_permuted_clouds() -> None:
    x = sphere_tokens(20, 4, 2)
    assert wasserstein2(x, x[::-1]) == pytest.approx(0.0, abs=1e-12)
    y = sphere_tokens(20, 4, 3)
    assert wasserstein2(x, y) == pytest.approx(wasserstein2(y, x), rel=1e-12)
    assert wasserstein2(x, y) > 0.1


def test_spectral_stability_bound_never_violated() -> None:
    result = ex.stability(n_adapters=30)
    assert len(result.drifts) >= 20
    assert result.violations == 0
    assert 0 < result.max_ratio < 1
    # the adapted flow lands on V + dV's top eigenvector: the drifts are the adapter's, not ~0
    np.testing.assert_allclose(result.drifts, result.eigen_drifts, atol=1e-5)
    assert min(result.eigen_drifts) > 1e-3


def test_small_c_gives_small_w2_and_large_c_large(phase: ex.PhaseResult) -> None:
    assert (phase.w2[:, 0] < 0.05).all(), phase.w2
    assert (phase.w2[:, -1] > 1.0).all(), phase.w2


def test_w2_collapses_on_eta_over_sqrt_depth(phase: ex.PhaseResult) -> None:
    ratio = phase.w2[-1] / phase.w2[0]
    assert ((ratio >= 0.5) & (ratio <= 2.5)).all(), ratio


def test_w2_increases_with_c(phase: ex.PhaseResult) -> None:
    assert (np.diff(phase.w2, axis=1) > 0).all(), phase.w2


def test_time_to_deviation_matches_prediction() -> None:
    dev = ex.time_to_deviation()
    assert 0.8 <= dev.ratio <= 1.25, (dev.measured, dev.predicted)
    assert dev.overlap_at(0.5 * dev.predicted) < 0.05
    assert dev.overlap_at(1.5 * dev.predicted) > 0.95


def test_deviation_time_grows_linearly_in_log_inverse_overlap() -> None:
    devs = [ex.time_to_deviation(kick=k) for k in (0.0, 1e-6, 1e-3)]
    logs = np.log(1 / np.array([d.eps0 for d in devs]))
    slope = np.polyfit(logs, [d.measured for d in devs], 1)[0]
    assert slope == pytest.approx(1 / 0.3, rel=0.1)


def test_bad_tokens_name_the_row() -> None:
    x = sphere_tokens(5, 3, 0)
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match="row 3"):
        check_tokens(x)
    with pytest.raises(ValueError, match="row 0 is the zero vector"):
        check_tokens(np.zeros((2, 3)))
