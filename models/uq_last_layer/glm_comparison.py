"""Last-layer vs full GLM on one dataset: the MAP network, both GLMs under both tunings, rows.

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
wine 0.248 against 0.185). Validation NLL picks lambda 100-1000 for the full GLM on the
classification sets (NLL digits 0.084, wine 0.182; ECE 0.023, 0.078) and brings the OOD gap
under the bound on every dataset (0.001-0.030), but mostly by shrinking the full GLM's
variance, not by raising the LL's: OOD AUROC full 0.853 -> 0.679 on wine, 0.869 -> 0.747
on breast cancer, LL 0.696 -> 0.672 and 0.726 -> 0.725. Several choices sit on the grid's edge
(lambda = 1e3: LL on breast cancer, both GLMs on wine, digits and diabetes; 1e-4: the
synthetic LL): there
the validation rows prefer the MAP's own predictive (or, synthetic LL, the widest); the
lambda grid is the notes' and is kept. Costs of this mode: the classification search scores
each lambda with the mean-field predictive (functional.py; it was the Monte Carlo one, whose
shared cost held the full/LL time ratio to 1-3x until 2026-12-05; now 35-122x, mean over
seeds 2-11, regression closed form, 84-217x);
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
  time), one hidden layer instead of two (2026-12-06, seeds 2-4, a throwaway patch of
  ``make_mlp``; its features tanh(Wx + b) see the input's norm, so OOD rows saturate them),
  width 16 / 64: gap wine 0.115 / 0.114, breast cancer 0.204 / 0.212 (validation-NLL tuning,
  width 16: 0.009 / 0.018): wine moves towards the bound, breast cancer away from it.

* The notes' other OOD construction, test inputs scaled x3 (measured 2026-12-04, seed 0,
  evidence tuning, entropy score; a throwaway patch of ``Split.x_ood``, not kept): neither GLM
  detects those; both grow more confident along the ray (AUROC LL 0.31 / 0.49 / 0.44 and
  full 0.50 / 0.72 / 0.57 on breast cancer / wine / digits; validation-NLL tuning 0.26-0.48
  for both), so the gap there is larger (0.19 / 0.23 / 0.14), and 3 N(0, I) stays the OOD set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.uq_last_layer import functional as F
from neuroedge.models.uq_last_layer.data import Split, parse_dataset
from neuroedge.models.uq_last_layer.predictive import MC_SAMPLES
from neuroedge.models.uq_last_layer.seed_claim import const_nll
from neuroedge.types import Measurement, Report

NAME = "uq.last_layer"
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


def compare_dataset(entry: str, cfg: Mapping[str, Any]) -> list[Report]:
    """Rows {name}/{tuning}/last_layer, .../full and .../compare for one ``datasets`` entry
    (a DATASETS name, or 'file.csv:task' named by its file name; see data.py), for both
    tunings, all four GLM fits timed side by side in one run."""
    from neuroedge.bench.latency import measure_side_by_side

    dataset = parse_dataset(entry)
    name = dataset.label
    split = dataset.load(cfg["seed"], cfg["n_synthetic"])
    net = train_network(split, cfg)
    baseline = map_nll(net, split)
    const = const_nll(split)  # the claim counts the dataset only where the MAP beat it
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
            m["const_nll"] = Measurement(const, "nats/sample")
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
    predictive = (
        "" if split.task == "regression" else f"; Monte Carlo predictive, {MC_SAMPLES} draws"
    )
    if split.task != "regression" and tuning != "evidence":
        predictive += "; lambda searched with the mean-field predictive"
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
            # the claim's Spearman and AUROC (test vs as many OOD rows) are read over these
            "test_rows": Measurement(len(split.y_test), "rows", "counted"),
        },
        notes=(
            f"{split.task}; hyper-parameters by {how}; n_train={len(split.y_train)}; "
            f"fit times side by side, p50 of {cfg['timing_repeats']}{predictive}",
        ),
    )
