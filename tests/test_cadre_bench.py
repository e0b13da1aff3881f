"""causal.cadre bench: the CaDRe-vs-beta-VAE claim read over seeds (per-seed rows, paired SE,
wins/ties/losses, the rule), one seed with ``seed``, and the user-series path."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.cadre import bench as B
from neuroedge.types import Measurement, Report

TINY = {"steps": 3, "n": 48, "batch": 8, "jac_batch": 2, "hidden": 8}


def _rows(cadre: float, vae: float) -> list[Report]:
    metrics = {"mcc": Measurement(cadre, "correlation"), "f1": Measurement(0.5, "fraction")}
    metrics["shd"] = Measurement(3, "edges")
    return [
        Report("causal.cadre", "host", "cadre", metrics=metrics),
        Report("causal.cadre", "host", "beta-vae", metrics={"mcc": Measurement(vae, "c")}),
    ]


def _claim(pairs: list[tuple[float, float]], identity: float = 0.0) -> dict:
    return B.claim_over_seeds({s: _rows(a, b) for s, (a, b) in enumerate(pairs)}, identity)


def test_claim_needs_mean_above_paired_se_and_a_majority_of_wins() -> None:
    held = _claim([(0.60, 0.43), (0.51, 0.54), (0.62, 0.59), (0.58, 0.50), (0.55, 0.50)])
    assert held["holds"] and (held["wins"], held["ties"], held["losses"]) == (4, 0, 1)
    diffs = np.array(held["mcc_difference"])
    assert held["cadre_minus_beta_vae"]["mean"] == pytest.approx(diffs.mean())
    assert held["cadre_minus_beta_vae"]["se"] == pytest.approx(diffs.std(ddof=1) / math.sqrt(5))
    assert held["mcc_cadre_mean"] == pytest.approx(0.572) and held["shd_cadre"] == [3] * 5
    # one large win, four small losses: the mean (0.092) within its SE (0.102), one win
    lucky = _claim([(0.9, 0.4), (0.50, 0.51), (0.50, 0.51), (0.50, 0.51), (0.50, 0.51)])
    assert not lucky["parts"]["mean_difference_above_paired_se"]
    assert not lucky["parts"]["cadre_wins_a_majority_of_seeds"] and not lucky["holds"]
    # a majority of wins, but the mean difference within its SE
    noisy = _claim([(0.51, 0.50), (0.51, 0.50), (0.51, 0.50), (0.30, 0.60), (0.50, 0.50)])
    assert noisy["parts"]["cadre_wins_a_majority_of_seeds"]
    assert not noisy["parts"]["mean_difference_above_paired_se"] and not noisy["holds"]
    assert (noisy["wins"], noisy["ties"], noisy["losses"]) == (3, 1, 1)
    one = _claim([(0.9, 0.1)])  # one seed has no SE: never holds
    assert math.isnan(one["cadre_minus_beta_vae"]["se"]) and not one["holds"]


WINS = [(0.60, 0.43), (0.51, 0.54), (0.62, 0.59), (0.58, 0.50), (0.55, 0.50)]  # holds


@pytest.mark.parametrize(
    ("identity", "holds"),
    [(0.0, True), (B.IDENTITY_TOL, True), (np.nextafter(B.IDENTITY_TOL, 1), False), (0.5, False)],
)
def test_the_identity_part_is_read_with_the_mcc_parts(identity: float, holds: bool) -> None:
    """Issue #10's two claims: J_g = B to 1e-10 and MCC above beta-VAE; an identity error of
    0.5 beside MCC wins held until 2026-12-07 (the identity row was added after the verdict)."""
    claim = _claim(WINS, identity)
    assert claim["parts"]["identity_to_1e-10"] is holds and claim["holds"] is holds
    assert claim["identity_max_abs_err"] == identity and "1e-10" in claim["rule"]
    assert claim["parts"]["mean_difference_above_paired_se"]  # the MCC parts hold throughout
    assert claim["parts"]["cadre_wins_a_majority_of_seeds"]
    assert not _claim(WINS, float("nan"))["holds"]


@pytest.mark.parametrize(
    ("pairs", "wins", "ties", "majority"),
    [
        ([(B.TIE, 0.0)] * 3 + [(0.2, 0.0)] * 2, 2, 3, False),  # exactly TIE: a tie
        ([(np.nextafter(B.TIE, 1), 0.0)] * 3 + [(0.2, 0.0)] * 2, 5, 0, True),  # past it: wins
        ([(0.5005, 0.5)] * 3 + [(0.7, 0.5)] * 2, 2, 3, False),  # a 0.0005 difference ties
        ([(0.7, 0.5)] * 2 + [(0.5, 0.5)] * 2, 2, 2, False),  # 2 wins of 4 seeds: no majority
        ([(0.7, 0.5)] * 3 + [(0.5, 0.5)] * 2, 3, 2, True),  # 3 of 5
    ],
)
def test_a_tie_is_not_a_win_and_half_the_seeds_is_no_majority(
    pairs: list, wins: int, ties: int, majority: bool
) -> None:
    claim = _claim(pairs)
    assert (claim["wins"], claim["ties"]) == (wins, ties)
    assert claim["parts"]["cadre_wins_a_majority_of_seeds"] is majority
    assert claim["parts"]["mean_difference_above_paired_se"]  # the mean is clear of its SE
    assert claim["holds"] is majority


@pytest.mark.parametrize(("loss", "above"), [(0.48, False), (0.481, True)])
def test_a_mean_difference_equal_to_its_se_is_not_above_it(loss: float, above: bool) -> None:
    """Three wins of +0.02 and a loss of -0.02: mean 0.01 equals its paired SE (in floats too);
    a smaller loss puts the mean above it."""
    claim = _claim([(0.52, 0.5)] * 3 + [(loss, 0.5)])
    d = claim["cadre_minus_beta_vae"]
    assert (d["mean"] == d["se"]) is not above and claim["wins"] == 3
    assert claim["parts"]["mean_difference_above_paired_se"] is above
    assert claim["holds"] is above


def test_bench_runs_every_seed_and_writes_the_claim(tmp_path: Path) -> None:
    doc = B.bench(str(tmp_path), ["host"], {**TINY, "seeds": [3, 5]})
    claim = doc["claim"]
    assert claim["seeds"] == [3, 5] and len(claim["mcc_cadre"]) == 2
    variants = [r["variant"] for r in doc["rows"]]
    for v in ("cadre", "beta-vae", "cadre@seed=3", "beta-vae@seed=5", "identity"):
        assert v in variants
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["claim"]["holds"] is claim["holds"] and set(report["graphs"]) == {"3", "5"}
    assert report["true_graphs"]["3"] != report["true_graphs"]["5"]  # a generator per seed
    text = (tmp_path / "report.md").read_text()
    assert "## Claim over seeds [3, 5]" in text and "paired by seed" in text
    assert "rule: holds when" in text and "wins / ties / losses" in text


def test_seed_alone_runs_one_seed_and_bad_seeds_are_refused(tmp_path: Path) -> None:
    doc = B.bench(str(tmp_path / "one"), ["host"], {**TINY, "seed": 2})
    assert doc["claim"]["seeds"] == [2] and not doc["claim"]["holds"]
    assert [r["variant"] for r in doc["rows"]] == ["cadre", "beta-vae", "identity"]
    with pytest.raises(ConfigError, match=r"seeds=\[0, -1\]"):
        B.bench(str(tmp_path / "bad"), ["host"], {**TINY, "seeds": [0, -1]})
    with pytest.raises(ConfigError, match="workers=0"):
        B.bench(str(tmp_path / "bad"), ["host"], {**TINY, "workers": 0})
    assert not (tmp_path / "bad").exists()


def test_a_user_series_is_trained_once_and_refuses_seeds(tmp_path: Path) -> None:
    rows = [f"{np.sin(i)},{np.cos(i / 3)},{np.sin(i / 7) + 0.1 * i % 3}" for i in range(60)]
    series = tmp_path / "s.csv"
    series.write_text("a,b,c\n" + "\n".join(rows) + "\n")
    doc = B.bench(str(tmp_path / "out"), ["host"], {**TINY, "series": str(series)})
    assert doc["variables"] == ["a", "b", "c"] and np.array(doc["graph"]).shape == (3, 3)
    assert "claim" not in doc and "seeds" not in doc["config"]
    with pytest.raises(ConfigError, match="seeds=.*only read on the synthetic generator"):
        B.bench(str(tmp_path / "no"), ["host"], {**TINY, "series": str(series), "seeds": [0]})


def test_a_missing_or_folder_series_names_the_key_and_path(tmp_path: Path, capsys) -> None:
    from neuroedge.cli import main

    missing = tmp_path / "missing.csv"
    for path, what in ((missing, "no such file"), (tmp_path, "a directory")):
        out = tmp_path / "out"
        assert main(["bench", "causal.cadre", "--out", str(out), "--config", f"series={path}"])
        err = capsys.readouterr().err  # was a bare "[Errno 2] No such file or directory"
        assert f"series='{path}': {what}; expected a CSV or NetCDF file" in err
        assert not out.exists()


def test_a_nan_jacobian_graph_reaches_the_identity_part_as_nan(monkeypatch) -> None:
    """identity_check kept the running max with max(worst, err): max(0.0, nan) is 0.0, so
    a J_g of NaN read as exact and the identity part held."""
    import numpy as np
    from neuroedge.models.cadre import functional as F
    from neuroedge.models.cadre.spec import identity_check

    real = F.jacobian_graph
    calls = iter(range(10**6))
    monkeypatch.setattr(
        F, "jacobian_graph", lambda j: real(j) * np.nan if next(calls) == 1 else real(j)
    )
    error = identity_check(trials=3)
    assert np.isnan(error)
    assert _claim([(0.9, 0.1)] * 5, error)["holds"] is False
