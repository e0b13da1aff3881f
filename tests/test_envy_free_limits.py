"""alloc.envy_free: trials x m (and budget_trials x m) bounded by the memory of a probe,
refused with a ConfigError naming both and the estimate before any sweep runs."""

from __future__ import annotations

import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.envy_free import experiment as X


def _no_sweeps(*args: object) -> None:
    raise AssertionError("a sweep ran before the memory check")


@pytest.mark.parametrize(
    "over, match",
    [
        (
            {"trials": 100_000, "ms": [100_000, 99_998], "delta_sweep_m": 100_000},
            r"trials=100000 with m=100000 \(ms\): .* 1192\.1 GiB, above the 4 GiB cap",
        ),
        (
            {"trials": 1000, "delta_sweep_m": 40_000},
            r"trials=1000 with m=40000 \(delta_sweep_m\): .* = 4\.8 GiB",
        ),
        (
            {"budget_trials": 100_000, "budget_cases": [[400, 10], [100_000, 10]]},
            r"budget_trials=100000 with m=100000 \(budget_cases\).* x m <= 33,554,432",
        ),
    ],
)
def test_trials_times_m_is_refused_before_any_sweep(tmp_path, monkeypatch, over, match) -> None:
    monkeypatch.setattr(X, "run_sweeps", _no_sweeps)
    with pytest.raises(ConfigError, match=match):
        X.bench(str(tmp_path / "out"), config=over)


def test_products_under_the_cap_pass_the_check() -> None:
    cfg = X.check_config({**X.DEFAULTS, "trials": 200, "ms": [100_000, 99_998]})
    assert cfg["trials"] * max(cfg["ms"]) * X.PROBE_ARRAYS * 8 <= X.MAX_PROBE_BYTES
