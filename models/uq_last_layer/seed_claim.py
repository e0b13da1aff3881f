"""The claim read over seeds (``claim_over_seeds``), its bounds and its report.md section.

**Over seeds** (``--config 'seeds=[...]' workers=N``: every seed trains its own MAP net on its
own split; mean rows, ``<row>@seed=S`` rows and ``claim`` in report.json, read by
``claim_over_seeds``: on every dataset mean gap <= 0.08, mean Spearman >= 0.8, mean time ratio
>= 20x). Declared before the run (2026-12-04), seeds 2-11 (seed 0 known; a plumbing check had
shown seed 1 on wine and diabetes), default config, 5 min with ``workers=2``:

* evidence (the issue's reading): **does not hold**. Gap (mean +- SE over seeds) synthetic
  0.004 +- 0.001, diabetes 0.000, breast cancer **0.181 +- 0.014** (AUROC LL 0.680 / full
  0.861), wine **0.165 +- 0.013** (0.696 / 0.862), digits 0.046 +- 0.004; Spearman 0.91-0.98
  (min over seeds 0.87); time ratio 59-589x (mean; single seeds down to 7x on breast cancer;
  the 2026-12-05 rerun, evidence fits unchanged: 28-479x, down to 5x on wine: timing noise).
  Seed 0's gaps (0.143 / 0.157) were not an unlucky draw: the two small tabular
  classification sets fail on every seed.
* val_nll: first run (Monte Carlo search) gaps 0.003-0.021 and Spearman 0.88-0.99 on all
  five, but time ratio 2-3x on the three classification sets: the search scored the Monte
  Carlo predictive (1000 draws) at 36 prior precisions, the same work for both GLMs and most
  of both fit times. With the search scoring the mean-field predictive, vectorised over lambda
  (functional.py; same lambda as the Monte Carlo search in 48 of 66 fits, at most 0.0021 nats
  of validation NLL from its minimum), rerun 2026-12-05 on the same seeds: **holds** on all
  five. Gap synthetic 0.003, diabetes 0.004 +- 0.003, breast cancer 0.012 +- 0.006, wine
  0.016 +- 0.004, digits 0.020 +- 0.001; Spearman 0.877 (diabetes; min 0.67) to 0.988; time
  ratio 84x, 217x, 122x, 51x, 35x (mean; min over seeds 22x, 143x, 13x, 32x, 25x).

So the claim holds with validation-NLL tuning and fails with the Laplace evidence, the
issue's reading, on OOD detection on breast cancer and wine.

What remains is the mechanism, not a bug (measured on wine, breast cancer in brackets): the
training predictions are confident (mean top probability 0.96 [0.985]), so Lambda and the GGN
are small and both posteriors stay near the prior in most directions. The LL variance then
follows |phi(x)|^2, which the saturating tanh features keep alike for test and OOD inputs
(9.5 vs 8.9 [12.5 vs 9.7]): the LL's centred logit variance grows only from 1.9 to 2.3 [0.48
to 0.64] on OOD inputs. The full GLM's grows from 12 to 77 [2.3 to 103], mostly through the
input-layer block, whose Jacobian scales with x (|x| 3.9 -> 10.7 [5.2 -> 16.3]; this OOD set
differs from the data mostly in norm); even without that block its variance ranks OOD inputs
better than the LL's (AUROC 0.87 vs 0.76 [0.81 vs 0.70]). The same prior-dominated variance
makes the full GLM under-confident on digits (NLL 0.35 against the MAP's 0.08).

**Not an artefact of the OOD set (2026-12-06, seeds 2-4, evidence tuning, the bench's nets and
posteriors; a throwaway script scoring other OOD arrays, not kept).** Gap full - LL of the
total-variance AUROC, wine / breast cancer, mean of the three seeds: 3 N(0, I) (the bench's)
0.152 / 0.200; 1.5 N(0, I) 0.107 / 0.179; test rows with every feature column permuted
independently (the marginals kept, the correlations broken) 0.068 / 0.124; uniform draws in
the training box 0.103 / 0.074 (per seed -0.043 to 0.211). Only the permuted wine rows and
the box draws on breast cancer come under 0.08, so the full GLM detects these small tabular
sets' outliers better than the last layer under near and far shifts alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from neuroedge.models.uq_last_layer import functional as F
from neuroedge.types import Report

GAP_BOUND = 0.08  # "comparable" OOD detection: AUROC_full - AUROC_LL <= 0.08 (notes 1.4 B)
CLAIM_SPEARMAN, CLAIM_TIME_RATIO = 0.8, 20.0  # the variance ranking and cost bounds
# test rows a dataset's claim needs: its Spearman and AUROC (test rows against as many OOD rows)
# are read over them, and below 30 one row moves either by several hundredths (a 12-row CSV,
# 4 test rows, "held" with Spearman 1 and gap 0); fewer: the cell is not measured (holds None)
CLAIM_MIN_TEST_ROWS = 30
# test NLL (nats/sample) by which the MAP net must beat the constant predictor (``const_nll``)
# for its GLMs to count: both GLMs linearise the MAP, so a collapsed one makes both predictives
# worthless and their gap, Spearman and time ratio say nothing (weight_decay=10 collapsed wine
# to accuracy 0.45, NLL 1.083 ~ ln 3, and the claim read "holds"). Collapsed nets (weight_decay
# 1 and 10, the five datasets, seeds 0 and 2) came within 0.0004-0.014 of it, the default
# config's 0.25-2.2 below it.
MAP_MIN_GAIN = 0.05


def const_nll(split: Any) -> float:
    """Test NLL of the constant predictor a net that learned nothing of x converges to: the
    training label frequencies (add-one smoothed: a class missing from the training rows would
    be infinitely surprising), or, regression, N(mean, variance) of the training targets."""
    n = len(split.y_test)
    if split.task == "regression":
        y = np.asarray(split.y_train, float)
        pred = F.Prediction(np.full(n, y.mean()), np.zeros(n), np.full(n, y.var()))
    else:
        counts = np.bincount(np.asarray(split.y_train, int), minlength=split.classes) + 1.0
        pred = F.Prediction(np.tile(counts / counts.sum(), (n, 1)), np.zeros(n), np.zeros(n))
    return F.nll(pred, split.y_test, split.task)


def _map_learned(
    cell: dict[str, Any], fits: list[Mapping[str, Any]], seeds: list[int], min_gain: float
) -> bool:
    """False, with ``reason``, when in some seed the MAP's test NLL is not ``min_gain`` below
    the constant predictor's (``fits``: each seed's row metrics; rows without ``const_nll``,
    written before it was recorded, are read as before)."""
    short = [
        (s, f["map_nll"].value, f["const_nll"].value)
        for s, f in zip(seeds, fits)
        if "const_nll" in f and not f["map_nll"].value <= f["const_nll"].value - min_gain
    ]
    if short:
        s, got, const = short[0]
        cell["reason"] = (
            f"not measured: in seed(s) {[x[0] for x in short]} the MAP net gained less than "
            f"map_min_gain={min_gain:g} nats over the constant predictor (seed {s}: test NLL "
            f"{got:.4g} against {const:.4g}): a collapsed net, whose GLMs' figures say nothing, "
            "or data with little signal (then lower map_min_gain to read them)"
        )
    return not short


def _cell_verdict(
    cell: dict[str, Any],
    test_rows: list[float],
    fits: Sequence[Mapping[str, Any]] = (),
    seeds: Sequence[int] = (),
    min_gain: float = MAP_MIN_GAIN,
) -> None:
    """``cell["holds"]`` from its means, or None with a ``reason`` on too few test rows
    (``test_rows`` empty: rows written before the count was recorded, read as before) or on a
    MAP net that did not learn in some seed (``_map_learned``)."""
    if test_rows and min(test_rows) < CLAIM_MIN_TEST_ROWS:
        n = int(min(test_rows))
        cell["test_rows"] = n
        cell["holds"] = None
        cell["reason"] = f"not measured ({n} test rows < {CLAIM_MIN_TEST_ROWS})"
        return
    if not _map_learned(cell, list(fits), list(seeds), min_gain):
        cell["holds"] = None
        return
    cell["holds"] = bool(
        cell["gap"] <= GAP_BOUND
        and cell["spearman"] >= CLAIM_SPEARMAN
        and cell["time_ratio"] >= CLAIM_TIME_RATIO
    )


def claim_over_seeds(
    per_seed: Mapping[int, Sequence[Report]], min_gain: float = MAP_MIN_GAIN
) -> dict[str, Any]:
    """The claim per tuning, read over seeds: on every dataset the mean OOD AUROC gap
    (full - LL, paired by seed, with its SE) <= GAP_BOUND, the mean Spearman of the per-point
    variances >= CLAIM_SPEARMAN and the mean full/LL fit time ratio >= CLAIM_TIME_RATIO. A
    dataset with fewer than CLAIM_MIN_TEST_ROWS test rows, or whose MAP net did not beat the
    constant predictor by ``min_gain`` nats in some seed (config ``map_min_gain``), is not
    measured (holds None, with a reason); a tuning
    fails when a dataset fails, else is None when one is not measured. It does not hold over
    no datasets."""
    from neuroedge.bench.seeds import paired_difference, verdict

    seeds = list(per_seed)
    by = {s: {r.variant: r.metrics for r in rows} for s, rows in per_seed.items()}
    names = list(dict.fromkeys(v.split("/", 1)[0] for v in by[seeds[0]]))
    out: dict[str, Any] = {"seeds": seeds, "tunings": {}}
    for tuning in F.TUNINGS:
        cells = {}
        for name in names:

            def per(subset: str, metric: str, key: str = f"{name}/{tuning}") -> list[float]:
                return [by[s][f"{key}/{subset}"][metric].value for s in seeds]

            gap, gap_se = paired_difference(
                per("full", "ood_auroc"), per("last_layer", "ood_auroc")
            )
            rho, ratio = per("compare", "spearman_var"), per("compare", "time_ratio")
            cells[name] = {
                "gap": gap,
                "gap_se": gap_se if len(seeds) > 1 else None,
                "gap_per_seed": per("compare", "auroc_diff"),
                "spearman": float(np.mean(rho)),
                "spearman_min": min(rho),
                "time_ratio": float(np.mean(ratio)),
                "time_ratio_min": min(ratio),
            }
            compare = [by[s][f"{name}/{tuning}/compare"] for s in seeds]
            rows = [c["test_rows"].value for c in compare if "test_rows" in c]
            fits = [by[s][f"{name}/{tuning}/full"] for s in seeds]
            _cell_verdict(cells[name], rows, fits, seeds, min_gain)
        out["tunings"][tuning] = {
            "datasets": cells,
            "holds": verdict([c["holds"] for c in cells.values()]) if cells else False,
        }
    out["holds"] = out["tunings"]["evidence"]["holds"]
    return out


def claim_section(claim: Mapping[str, Any]) -> list[str]:
    """report.md lines: the claim per tuning and dataset over the run's seeds."""
    seeds = claim["seeds"]
    over = (
        f"seed {seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds ({seeds[0]}..{seeds[-1]})"
    )
    lines = [
        f"## Claim over {over}",
        "",
        f"Per dataset: mean OOD AUROC gap (full - LL) <= {GAP_BOUND}, mean Spearman >= "
        f"{CLAIM_SPEARMAN}, mean time ratio >= {CLAIM_TIME_RATIO:g}x. Evidence tuning is "
        "the issue's reading.",
        "",
    ]
    for tuning, t in claim["tunings"].items():
        said = {True: "HOLDS", False: "DOES NOT HOLD", None: "not all measured, none failed"}
        lines.append(f"- {tuning}: {said[t['holds']]}")
    lines += [
        "",
        "| dataset | tuning | gap (mean +- SE) | Spearman mean (min) | time ratio mean "
        "(min) | holds |",
        "|" + "---|" * 6,
    ]
    for tuning, t in claim["tunings"].items():
        for name, c in t["datasets"].items():
            se = "" if c["gap_se"] is None else f" +- {c['gap_se']:.3f}"  # one seed: no SE
            lines.append(
                f"| {name} | {tuning} | {c['gap']:.3f}{se} | "
                f"{c['spearman']:.3f} ({c['spearman_min']:.3f}) | "
                f"{c['time_ratio']:.0f}x ({c['time_ratio_min']:.0f}x) | "
                f"{c['reason'] if c['holds'] is None else 'yes' if c['holds'] else '**no**'} |"
            )
    return lines
