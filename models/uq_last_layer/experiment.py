"""The uq.last_layer benchmark: last-layer vs full GLM on five datasets plus the RMT setting.

Per dataset: one MAP network, then both GLMs fitted on the same network under two tunings of
the prior precision (and noise for regression), with test NLL, ECE and accuracy, OOD
AUROC (functional variance for regression, predictive entropy for classification; also, as
ood_auroc_var, the predictive variance), Spearman correlation of the per-point predictive
variances between the two GLMs (tr S_f for regression, the variance of the predicted
probabilities tr G S_f G^T for classification; see functional.py), and the GLM fit time of
each measured side by side in one run (bench.latency.measure_side_by_side). NLL is reported as
it comes out, including where the two differ. Rows are {dataset}/{tuning}/{last_layer, full,
compare}; report.md adds a table of both tunings side by side.

Tunings (``functional.TUNINGS``), each GLM tuned separately, on the same grids:

* ``evidence`` (primary, as the issue asks): GGN on every training row, (sigma^2, lambda)
  maximising the Laplace marginal likelihood.
* ``val_nll`` (second mode, research notes 1.4 Test B): (sigma^2, lambda) minimising the mean
  predictive NLL of the validation rows, the first ``VAL_FRACTION`` of the training split (the
  rows the MAP held out for early stopping: no gradient step saw them). They are held out of
  this mode's GGN too, which is built on the other 80 %, so the choice is scored on points the
  posterior has not seen; the test and OOD sets never reach it (a test poisons them). The
  smaller GGN is not what changes the results: evidence tuning on the same 80 % gives gaps
  0.158 / 0.147 / 0.037 (wine / breast cancer / digits) against 0.157 / 0.143 / 0.043.

Why the second mode (the notes' reasoning, measured here, bench seed 0): the evidence is a
poor tuner of predictive calibration in these small tabular nets. It scores how well the prior
explains the training fit, not how calibrated the predictive is; with few data and confident
training predictions it settles on lambda ~ 1-2.5, where both posteriors stay near the prior,
and the full GLM, whose prior variance grows with |x| through the input layer, is then
under-confident in distribution (digits test NLL 0.347 and ECE 0.238 against the MAP's 0.082;
wine 0.248 against 0.185). Validation NLL picks lambda 40-1000 for the full GLM on the
classification sets (NLL digits 0.084, wine 0.176; ECE 0.023, 0.075) and brings the OOD gap
under the bound on every dataset (0.001-0.038), but mostly by shrinking the full GLM's
variance, not by raising the LL's: OOD AUROC full 0.853 -> 0.706 on wine, 0.869 -> 0.763
on breast cancer, LL 0.696 -> 0.672 and 0.726 -> 0.725. Several choices sit on the grid's edge
(lambda = 1e3: LL on wine, both GLMs on digits and diabetes; 1e-4: the synthetic LL): there
the validation rows prefer the MAP's own predictive (or, synthetic LL, the widest); the
lambda grid is the notes' and is kept. Costs of this mode: the classification search
evaluates the Monte Carlo predictive at 36 prior precisions on the validation rows, the same
work for both GLMs, so its full/LL time ratio is 1-3x (regression: closed form, > 100x);
and on diabetes, with both GLMs at lambda = 1e3, variances follow the Jacobian norms, whose
rankings differ (Spearman 0.65, evidence 0.92).

Evidence mode: checks made for the OOD AUROC gap (full - LL, entropy score) of 0.14 on breast
cancer and 0.16 on wine (the "comparable" bound is 0.08; digits 0.04, the regressions <=
0.002), none of which found a defect that closes it:

* both GLMs score the same OOD array (``Split.x_ood``, 3 N(0, I) in the standardised space)
  with the same entropy of their own predictive; prior precisions are tuned separately by
  each GLM's evidence with P = its own parameter count and sit inside the grid (LL 1.6, full
  1.0 on both datasets); the GGN equals sum J^T (diag pi - pi pi^T) J (a test).
* The classification predictive was the multi-class probit, which is not shift-invariant (see
  functional.py); it is now Monte Carlo on the centred logits. Gap before -> after: breast
  cancer 0.126 -> 0.143, wine 0.132 -> 0.157, digits 0.065 -> 0.043.
* MAP weight decay vs the prior: wd = 1e-3 means lambda_train = n_fit wd = 0.1 (wine) to 1.0
  (digits) against the evidence's 1.0-2.5. ``evidence_rounds`` = 1 retrains with the weight
  decay of the full GLM's evidence-optimal prior (``consistent_weight_decay``); lambda is then
  a fixed point on wine and breast cancer (1.0 -> 1.0; digits reaches 4.0 after two rounds)
  but the gap grows (wine 0.21, breast cancer 0.16, digits 0.06), MAP NLL worsens on wine,
  digits and synthetic, and the digits full GLM stays under-confident (NLL 0.29 against the
  MAP's 0.11 at the fixed point), so the default stays 0 (post-hoc tuning, as laplace-torch).
* Not adopted either (measured on wine / breast cancer, seed 0): hidden width 32 or 64 (gap
  0.13-0.21, probit predictive; width 64 with the MC predictive: 0.139 / 0.157), ReLU instead
  of tanh (0.20-0.38, probit; MC predictive: 0.253 / 0.344, validation NLL of the MAP 0.120 /
  0.242), one evidence-tuned prior precision per parameter tensor for both GLMs (MacKay fixed
  point, MC predictive; gap 0.15 / 0.14, and digits full NLL 0.35 -> 0.31 at 3x the full fit
  time).

* The notes' other OOD construction, test inputs scaled x3 (measured 2026-12-04, seed 0,
  evidence tuning, entropy score; a throwaway patch of ``Split.x_ood``, not kept): neither GLM
  detects those; both grow more confident along the ray (AUROC LL 0.31 / 0.49 / 0.44 and
  full 0.50 / 0.72 / 0.57 on breast cancer / wine / digits; validation-NLL tuning 0.26-0.48
  for both), so the gap there is larger (0.19 / 0.23 / 0.14), and 3 N(0, I) stays the OOD set.

**Over seeds** (``--config 'seeds=[...]' workers=N``: every seed trains its own MAP net on its
own split; mean rows, ``<row>@seed=S`` rows and ``claim`` in report.json, read by
``claim_over_seeds``: on every dataset mean gap <= 0.08, mean Spearman >= 0.8, mean time ratio
>= 20x). Declared before the run (2026-12-04), seeds 2-11 (seed 0 known; a plumbing check had
shown seed 1 on wine and diabetes), default config, 5 min with ``workers=2``:

* evidence (the issue's reading): **does not hold**. Gap (mean +- SE over seeds) synthetic
  0.004 +- 0.001, diabetes 0.000, breast cancer **0.181 +- 0.014** (AUROC LL 0.680 / full
  0.861), wine **0.165 +- 0.013** (0.696 / 0.862), digits 0.046 +- 0.004; Spearman 0.91-0.98
  (min over seeds 0.87); time ratio 59-589x (mean; single seeds down to 7x on breast cancer).
  Seed 0's gaps (0.143 / 0.157) were not an unlucky draw: the two small tabular
  classification sets fail on every seed.
* val_nll: gaps 0.003-0.021 and Spearman 0.88-0.99 on all five (diabetes 0.877; seed 0's 0.65
  is its low tail, min 0.67), but the time ratio is 2-3x on the three classification sets:
  the validation search evaluates the Monte Carlo predictive (1000 draws) at 36 prior
  precisions, the same work for both GLMs, and that work, not the GLM, is most of both fit
  times (breast cancer, seed 0: search 0.18 s of LL 0.19 s and full 0.26 s). No
  re-implementation of that same computation removes it (it is softmax of 36 x 1000 draws
  per point); cheaper estimators (quadrature for C = 2, fewer draws, a line search over
  lambda) would change what is tuned and are not adopted.

So neither tuning meets every part of the claim: evidence misses OOD detection on breast cancer
and wine, validation NLL misses the cost ratio wherever the predictive is Monte Carlo.

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.models.uq_last_layer import functional as F
from neuroedge.models.uq_last_layer import rmt
from neuroedge.models.uq_last_layer.data import DATASETS, Split, load_split
from neuroedge.types import Measurement, Report

NAME = "uq.last_layer"
DEFAULTS: dict[str, Any] = {
    "datasets": list(DATASETS),
    "seed": 0,
    "steps": 1000,
    "lr": 5e-3,
    "weight_decay": 1e-3,
    "hidden_regression": 32,
    "hidden_classification": 16,
    "n_synthetic": 2000,
    "timing_repeats": 3,
    "rmt_sizes": [[200, 100, 200], [400, 200, 400], [800, 400, 800]],
    "rmt_seeds": 3,
    "evidence_rounds": 0,
}
VAL_FRACTION = 0.2  # rows of the training split held out for the MAP's early stopping


def consistent_weight_decay(post: F.GLMPosterior, n_fit: int) -> float:
    """The Adam weight decay whose MAP is the mode under the GLM's prior N(0, lambda^-1 I).

    Adam's L2 adds wd theta to the gradient of the mean loss. Cross-entropy: mean loss =
    NLL / n, so wd = lambda / n. MSE = 2 sigma^2 / n times the Gaussian NLL (up to a
    constant), so wd = 2 sigma^2 lambda / n.
    """
    scale = 2.0 * post.noise_var if post.task == "regression" else 1.0
    return scale * post.prior_prec / n_fit


def train_network(split: Split, cfg: Mapping[str, Any]) -> Any:
    """The MAP MLP; with ``evidence_rounds`` > 0, retrained (same seed) with the weight decay
    of the full GLM's evidence-optimal prior, that many times (see the module docstring)."""
    hidden = cfg["hidden_regression" if split.task == "regression" else "hidden_classification"]
    wd, rounds = cfg["weight_decay"], int(cfg.get("evidence_rounds", 0))
    n_fit = len(split.y_train) - int(len(split.y_train) * VAL_FRACTION)
    for round_ in range(rounds + 1):
        net = F.make_mlp(split.x_train.shape[1], hidden, split.classes, cfg["seed"])
        F.train_map(
            net,
            split.x_train,
            split.y_train,
            split.task,
            steps=cfg["steps"],
            lr=cfg["lr"],
            weight_decay=wd,
            val_fraction=VAL_FRACTION,
        )
        if round_ < rounds:
            wd = consistent_weight_decay(fit_posterior(net, split, "full"), n_fit)
    return net


def fit_posterior(net: Any, split: Split, subset: str, tuning: str = "evidence") -> F.GLMPosterior:
    """Jacobians, GGN, eigendecomposition and hyper-parameter tuning of one GLM.

    ``evidence`` (primary): GGN on every training row, (sigma^2, lambda) by the evidence.
    ``val_nll``: GGN on the rows the MAP was fitted on, (sigma^2, lambda) minimising the NLL
    of the held-out validation rows (the MAP's early-stopping rows). Only ``x_train`` and
    ``y_train`` are read: the test and OOD sets never reach the tuning.
    """
    if tuning not in F.TUNINGS:
        raise ValueError(f"tuning {tuning!r} is not one of {', '.join(F.TUNINGS)}")
    theta = F.theta_of(net, subset)
    if tuning == "evidence":
        f, jac = F.jacobians(net, split.x_train, subset)
        return F.fit_glm(f, jac, split.y_train, theta, split.task)
    n_val = int(len(split.y_train) * VAL_FRACTION)
    f, jac = F.jacobians(net, split.x_train[n_val:], subset)
    val = (*F.jacobians(net, split.x_train[:n_val], subset), split.y_train[:n_val])
    return F.fit_glm(f, jac, split.y_train[n_val:], theta, split.task, validation=val)


def map_nll(net: Any, split: Split) -> float:
    """NLL of the MAP network alone (regression: sigma^2 = training MSE)."""
    f_tr, _ = F.jacobians(net, split.x_train, "last_layer")
    f_te, _ = F.jacobians(net, split.x_test, "last_layer")
    if split.task == "regression":
        noise = float(np.mean((f_tr[:, 0] - split.y_train) ** 2))
        pred = F.Prediction(f_te[:, 0], np.zeros(len(f_te)), np.full(len(f_te), noise))
        return F.nll(pred, split.y_test, split.task)
    return F.nll(F.Prediction(F.softmax(f_te), np.zeros(0), np.zeros(0)), split.y_test, split.task)


def evaluate_subset(
    net: Any, split: Split, post: F.GLMPosterior, subset: str
) -> tuple[dict[str, Measurement], np.ndarray]:
    """Test metrics of one GLM and its per-point test variances."""
    pred = F.predict(post, *F.jacobians(net, split.x_test, subset))
    ood = F.predict(post, *F.jacobians(net, split.x_ood, subset))
    score = "variance" if split.task == "regression" else "total_var"
    m = {
        "nll": Measurement(F.nll(pred, split.y_test, split.task), "nats/sample"),
        "ood_auroc": Measurement(F.auroc(getattr(pred, score), getattr(ood, score)), "fraction"),
        "ood_auroc_var": Measurement(F.auroc(pred.variance, ood.variance), "fraction"),
        "log_evidence_per_n": Measurement(post.log_evidence / len(split.y_train), "nats/sample"),
        "prior_prec": Measurement(post.prior_prec, "1/param^2"),
        "params": Measurement(post.eigvals.size, "parameters", "counted"),
    }
    if split.task == "classification":
        m["ece"] = Measurement(F.ece(pred.mean, split.y_test), "fraction")
        m["accuracy"] = Measurement(
            float((pred.mean.argmax(-1) == split.y_test).mean()), "fraction"
        )
    else:
        m["noise_var"] = Measurement(post.noise_var, "y^2 (standardised)")
    return m, pred.variance


def compare_dataset(name: str, cfg: Mapping[str, Any]) -> list[Report]:
    """Rows {tuning}/last_layer, {tuning}/full and {tuning}/compare for one dataset, for
    both tunings, all four GLM fits timed side by side in one run."""
    from neuroedge.bench.latency import measure_side_by_side

    split = load_split(name, cfg["seed"], cfg["n_synthetic"])
    net = train_network(split, cfg)
    baseline = map_nll(net, split)
    posts: dict[tuple[str, str], F.GLMPosterior] = {}

    def fit(key: tuple[str, str]) -> None:
        posts[key] = fit_posterior(net, split, key[1], key[0])

    keys = [(t, s) for t in F.TUNINGS for s in F.SUBSETS]
    timings = measure_side_by_side(
        {k: (lambda k=k: fit(k)) for k in keys},
        repeats=cfg["timing_repeats"],
        warmup=0,
        block=cfg["timing_repeats"],
    )
    rows = []
    for tuning in F.TUNINGS:
        variances, metrics = {}, {}
        for subset in F.SUBSETS:
            m, variances[subset] = evaluate_subset(net, split, posts[tuning, subset], subset)
            m["fit_time_s"] = Measurement(timings[tuning, subset].percentile(50) / 1000, "s")
            m["map_nll"] = Measurement(baseline, "nats/sample")
            metrics[subset] = m
            rows.append(Report(NAME, "host", f"{name}/{tuning}/{subset}", metrics=m))
        rows.append(compare_row(f"{name}/{tuning}", split, metrics, variances, cfg, tuning))
    return rows


def compare_row(
    variant: str,
    split: Split,
    metrics: Mapping[str, Mapping[str, Measurement]],
    variances: Mapping[str, np.ndarray],
    cfg: Mapping[str, Any],
    tuning: str,
) -> Report:
    """Spearman of the per-point variances, time ratio and the full - LL differences."""
    from scipy.stats import spearmanr

    ll, full = metrics["last_layer"], metrics["full"]
    how = (
        "Laplace evidence on all training rows"
        if tuning == "evidence"
        else f"validation NLL on {int(len(split.y_train) * VAL_FRACTION)} held-out training "
        "rows, GGN on the rest"
    )
    return Report(
        NAME,
        "host",
        f"{variant}/compare",
        metrics={
            "spearman_var": Measurement(
                float(spearmanr(variances["last_layer"], variances["full"])[0]), "rank corr"
            ),
            "time_ratio": Measurement(
                full["fit_time_s"].value / ll["fit_time_s"].value, "full/last-layer"
            ),
            "auroc_diff": Measurement(full["ood_auroc"].value - ll["ood_auroc"].value, "full-LL"),
            "nll_diff": Measurement(full["nll"].value - ll["nll"].value, "full-LL"),
        },
        notes=(
            (
                f"{split.task}; hyper-parameters by {how}; n_train={len(split.y_train)}; "
                f"fit times side by side, p50 of {cfg['timing_repeats']}"
                + (
                    ""
                    if split.task == "regression"
                    else f"; Monte Carlo predictive, {F.MC_SAMPLES} draws"
                )
            ),
        ),
    )


def rmt_rows(cfg: Mapping[str, Any]) -> list[Report]:
    """CK vs NTK free energy and test NLL, averaged over seeds, at growing (n, d, m)."""
    rows = []
    for n, d, m in cfg["rmt_sizes"]:
        fits = [rmt.compare(n, d, m, seed) for seed in range(cfg["rmt_seeds"])]
        mean = {
            k: float(np.mean([getattr(f[kern], attr) for f in fits]))
            for k, (kern, attr) in {
                "bfe_ck": ("ck", "bfe_per_n"),
                "bfe_ntk": ("ntk", "bfe_per_n"),
                "nll_ck": ("ck", "test_nll"),
                "nll_ntk": ("ntk", "test_nll"),
            }.items()
        }
        metrics = {k: Measurement(v, "nats/sample") for k, v in mean.items()}
        metrics["bfe_rel_gap"] = Measurement(
            float(np.mean([rmt.relative_gap(f) for f in fits])), "fraction"
        )
        rows.append(
            Report(
                NAME,
                "host",
                f"rmt_n{n}_d{d}_m{m}",
                metrics=metrics,
                notes=(f"random init, mean of {cfg['rmt_seeds']} seeds",),
            )
        )
    return rows


GAP_BOUND = 0.08  # "comparable" OOD detection: AUROC_full - AUROC_LL <= 0.08 (notes 1.4 B)
CLAIM_SPEARMAN, CLAIM_TIME_RATIO = 0.8, 20.0  # the variance ranking and cost bounds


def modes_section(doc: Mapping[str, Any]) -> list[str]:
    """report.md section: both tunings side by side per dataset (LL / full pairs)."""
    by = {r["variant"]: r["metrics"] for r in doc["rows"]}

    def pair(key: str, metric: str) -> str:
        got = [by[f"{key}/{s}"].get(metric) for s in F.SUBSETS]
        return " / ".join("-" if g is None else f"{g['value']:.3g}" for g in got)

    lines = [
        "## Hyper-parameter tuning: evidence (primary) vs validation NLL",
        "",
        "Pairs are last layer / full. Gap = OOD AUROC full - LL, bound "
        f"{GAP_BOUND}; evidence: Laplace marginal likelihood on all training rows; "
        "val_nll: NLL of the held-out validation rows (GGN on the other rows).",
        "",
        "| dataset | tuning | NLL | ECE | OOD AUROC | gap | gap <= bound | Spearman | "
        "time ratio | lambda | sigma^2 |",
        "|" + "---|" * 11,
    ]
    for name in doc["config"]["datasets"]:
        for tuning in F.TUNINGS:
            key = f"{name}/{tuning}"
            if f"{key}/compare" not in by:
                continue
            cmp = by[f"{key}/compare"]
            gap = cmp["auroc_diff"]["value"]
            lines.append(
                " | ".join(
                    [
                        f"| {name}",
                        tuning,
                        pair(key, "nll"),
                        pair(key, "ece"),
                        pair(key, "ood_auroc"),
                        f"{gap:.3f}",
                        "yes" if gap <= GAP_BOUND else "**no**",
                        f"{cmp['spearman_var']['value']:.3f}",
                        f"{cmp['time_ratio']['value']:.0f}x",
                        pair(key, "prior_prec"),
                        pair(key, "noise_var"),
                    ]
                )
                + " |"
            )
    return lines


def summary_plot(doc: dict[str, Any], path: Path) -> Path:
    """OOD AUROC, its full - LL gap, test NLL (and the MAP's) and GLM fit time per dataset,
    four bars each: last layer / full under evidence and under validation-NLL tuning."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()
    by = {r["variant"]: r["metrics"] for r in doc["rows"]}
    names = [n for n in doc["config"]["datasets"] if f"{n}/evidence/compare" in by]
    keys = [(t, s) for t in F.TUNINGS for s in F.SUBSETS]
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    x = np.arange(len(names))
    for ax, metric, label in zip(
        axes,
        ("ood_auroc", "auroc_diff", "nll", "fit_time_s"),
        ("OOD AUROC", "OOD AUROC gap, full - LL", "test NLL (nats)", "GLM fit time (s, log)"),
    ):
        bars = [(t, "compare") for t in F.TUNINGS] if metric == "auroc_diff" else keys
        width = 0.8 / len(bars)
        for k, (tuning, subset) in enumerate(bars):
            ax.bar(
                x + width * (k - (len(bars) - 1) / 2),
                [by[f"{n}/{tuning}/{subset}"][metric]["value"] for n in names],
                width,
                label=f"{subset.replace('_', ' ')}, {tuning}" if subset != "compare" else tuning,
            )
        if metric == "nll":
            ax.scatter(
                x,
                [by[f"{n}/evidence/full"]["map_nll"]["value"] for n in names],
                marker="_",
                s=500,
                color="k",
                label="MAP network",
                zorder=3,
            )
        if metric == "auroc_diff":
            ax.axhline(GAP_BOUND, color="k", ls="--", label=f"bound {GAP_BOUND}")
        if metric == "fit_time_s":
            ax.set_yscale("log")
        if metric == "ood_auroc":
            ax.set_ylim(0.5, 1.15)
        ax.set_xticks(x, names, rotation=30)
        ax.set_title(label)
        ax.legend(fontsize=7, ncol=2 if metric == "ood_auroc" else 1)
    fig.suptitle(
        f"{NAME}: last-layer vs full linearised Laplace, evidence vs validation-NLL tuning"
    )
    return finish_figure(fig, path)


def seed_rows_of(cfg: Mapping[str, Any]) -> list[Report]:
    """Every dataset's rows for ``cfg["seed"]`` (module-level and picklable: a worker's job)."""
    from tqdm import tqdm

    return [
        row
        for name in tqdm(
            cfg["datasets"], desc=f"{NAME} datasets", disable=not cfg.get("progress", True)
        )
        for row in compare_dataset(name, cfg)
    ]


def claim_over_seeds(per_seed: Mapping[int, Sequence[Report]]) -> dict[str, Any]:
    """The claim per tuning, read over seeds: on every dataset the mean OOD AUROC gap
    (full - LL, paired by seed, with its SE) <= GAP_BOUND, the mean Spearman of the per-point
    variances >= CLAIM_SPEARMAN and the mean full/LL fit time ratio >= CLAIM_TIME_RATIO."""
    from neuroedge.bench.seeds import paired_difference

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
            cells[name]["holds"] = bool(
                gap <= GAP_BOUND
                and cells[name]["spearman"] >= CLAIM_SPEARMAN
                and cells[name]["time_ratio"] >= CLAIM_TIME_RATIO
            )
        out["tunings"][tuning] = {
            "datasets": cells,
            "holds": all(c["holds"] for c in cells.values()),
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
        lines.append(f"- {tuning}: {'HOLDS' if t['holds'] else 'DOES NOT HOLD'}")
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
                f"{'yes' if c['holds'] else '**no**'} |"
            )
    return lines


def bench(
    out_dir: str,
    backends: Sequence[str] = ("host",),
    config: Mapping[str, Any] | None = None,
    history: str | None = None,
) -> dict[str, Any]:
    """Run every dataset (both tunings) and the RMT sizes; write report.json/report.md/
    summary.png. With ``seeds=[...]`` every seed runs the datasets (``workers`` processes at
    a time): mean rows plus ``<row>@seed=S``, and the claim read over the seeds."""
    from neuroedge.bench.report import build_document, write_report
    from neuroedge.bench.seeds import check_workers, map_seeds, seed_list, seed_rows

    cfg = {**DEFAULTS, **(config or {})}
    seeds = seed_list(cfg)
    jobs = {s: {**cfg, "seed": s, "progress": len(seeds) == 1} for s in seeds}
    per_seed = map_seeds(
        seed_rows_of,
        jobs,
        check_workers(cfg.get("workers", 1)),
        f"{NAME} seeds",
        progress=len(seeds) > 1,
    )
    rows = (
        per_seed[seeds[0]]
        if len(seeds) == 1
        else seed_rows(per_seed, ("ood_auroc", "auroc_diff", "spearman_var", "time_ratio"))
    )
    claim = claim_over_seeds(per_seed)
    rows += rmt_rows(cfg)
    columns = [
        "nll",
        "map_nll",
        "ece",
        "accuracy",
        "ood_auroc",
        "prior_prec",
        "fit_time_s",
        "auroc_diff",
        "spearman_var",
        "time_ratio",
        "bfe_ck",
        "bfe_ntk",
        "bfe_rel_gap",
        "nll_ck",
        "nll_ntk",
    ]
    doc = build_document(NAME, rows, config=cfg, columns=columns, claim=claim)
    write_report(
        doc,
        out_dir,
        columns=columns,
        sections=[*claim_section(claim), "", *modes_section(doc)],
        plots=[summary_plot],
        history=history,
    )
    return doc
