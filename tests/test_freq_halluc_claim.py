"""halluc.freq_attention: the claim read over seeds on hand-built rows. Every part is per seed
(Fourier-HF AUROC >= 0.80, above the Lookback-Lens ratio's, hallucination rate in [0.3, 0.7]),
so one bad seed fails it, even when the means over seeds would pass."""

from __future__ import annotations

import pytest
from neuroedge.models.freq_halluc import experiment as X
from neuroedge.types import Measurement, Report

GOOD = {"hf": 0.86, "lookback": 0.76, "rate": 0.5}


def rows(hf: float, lookback: float, rate: float) -> dict:
    """One seed's result as run_seed returns it (only the rows the claim reads)."""

    def row(variant: str, **metrics: float) -> Report:
        m = {k: Measurement(v, "fraction") for k, v in metrics.items()}
        return Report(X.NAME, "host", variant, metrics=m)

    return {
        "rows": [
            row("fourier_hf", auroc=hf),
            row("lookback", auroc=lookback),
            row("lm", hallucination_rate=rate),
            row("energy", ctx_hf_hallucinated=0.15, ctx_hf_grounded=0.17),
        ]
    }


def claim(*seeds: dict) -> dict:
    return X.claim_over_seeds({i: rows(**{**GOOD, **s}) for i, s in enumerate(seeds)})


def test_three_good_seeds_meet_every_part() -> None:
    c = claim({}, {"hf": 0.84}, {"rate": 0.45})
    assert c["holds"] is True and all(c["parts"].values()), c["parts"]
    assert c["auroc_hf"] == [0.86, 0.84, 0.86] and c["hallucination_rate"] == [0.5, 0.5, 0.45]
    assert c["auroc_hf_minus_lookback"] == pytest.approx(0.0933333, abs=1e-6)


def test_one_seed_with_a_low_fourier_auroc_fails_though_the_mean_passes() -> None:
    c = claim({"hf": 0.9}, {"hf": 0.9}, {"hf": 0.7, "lookback": 0.6})  # mean 0.833 >= 0.80
    assert c["parts"]["auroc_hf_ge_bound_every_seed"] is False
    assert c["parts"]["hf_above_lookback_every_seed"] and c["parts"]["rate_in_range_every_seed"]
    assert c["holds"] is False
    just_below = claim({}, {"hf": 0.79, "lookback": 0.7})
    assert not just_below["parts"]["auroc_hf_ge_bound_every_seed"] and not just_below["holds"]
    at_bound = claim({}, {"hf": X.AUROC_BOUND, "lookback": 0.7})
    assert at_bound["parts"]["auroc_hf_ge_bound_every_seed"] and at_bound["holds"]


def test_fourier_below_or_level_with_lookback_on_one_seed_fails() -> None:
    below = claim({}, {"hf": 0.84, "lookback": 0.85}, {})
    assert below["parts"]["hf_above_lookback_every_seed"] is False and below["holds"] is False
    assert below["parts"]["auroc_hf_ge_bound_every_seed"]  # only that part fails
    level = claim({}, {"hf": 0.84, "lookback": 0.84})
    assert level["parts"]["hf_above_lookback_every_seed"] is False  # strictly above


@pytest.mark.parametrize("rate, ok", [(0.25, False), (0.3, True), (0.7, True), (0.75, False)])
def test_a_hallucination_rate_outside_the_range_on_one_seed_fails(rate: float, ok: bool) -> None:
    c = claim({}, {"rate": rate}, {})
    assert c["parts"]["rate_in_range_every_seed"] is ok and c["holds"] is ok
    assert X.RATE_RANGE == (0.3, 0.7) and X.AUROC_BOUND == 0.80  # the notes' section 2.4


def test_the_report_reads_the_bound_per_seed_and_names_the_lowest_seed() -> None:
    c = claim({"hf": 0.9}, {"hf": 0.9}, {"hf": 0.7, "lookback": 0.6})
    text = "\n".join(X.claim_section(c))
    assert "## Claim over seeds [0, 1, 2]: not met" in text
    assert "AUROC >= 0.8 in every seed (lowest 0.700, mean 0.833): False" in text
    assert "| 2 | 0.700 | 0.600 | 0.500 | -0.0200 |" in text
