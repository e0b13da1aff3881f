"""The uq.last_layer benchmark: last-layer vs full GLM on five datasets plus the RMT setting.

Per dataset: one MAP network, then both GLMs fitted on the same network (evidence-tuned prior
precision, and noise for regression), with test NLL, ECE and accuracy (classification), OOD
AUROC (functional variance for regression, predictive entropy for classification; also, as
ood_auroc_var, the predictive variance), Spearman correlation of the per-point predictive
variances between the two GLMs (tr S_f for regression, the variance of the predicted
probabilities tr G S_f G^T for classification; see functional.py), and the GLM fit time of
each measured side by side in one run (bench.latency.measure_side_by_side). NLL is reported as
it comes out, including where the two differ.
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
    "datasets": list(DATASETS), "seed": 0, "steps": 1000, "lr": 5e-3, "weight_decay": 1e-3,
    "hidden_regression": 32, "hidden_classification": 16, "n_synthetic": 2000,
    "timing_repeats": 3, "rmt_sizes": [[200, 100, 200], [400, 200, 400], [800, 400, 800]],
    "rmt_seeds": 3,
}


def train_network(split: Split, cfg: Mapping[str, Any]) -> Any:
    hidden = cfg["hidden_regression" if split.task == "regression" else "hidden_classification"]
    net = F.make_mlp(split.x_train.shape[1], hidden, split.classes, cfg["seed"])
    return F.train_map(net, split.x_train, split.y_train, split.task, steps=cfg["steps"],
                       lr=cfg["lr"], weight_decay=cfg["weight_decay"])


def fit_posterior(net: Any, split: Split, subset: str) -> F.GLMPosterior:
    """Jacobians on the training set, GGN, eigendecomposition and evidence tuning."""
    f, jac = F.jacobians(net, split.x_train, subset)
    return F.fit_glm(f, jac, split.y_train, F.theta_of(net, subset), split.task)


def map_nll(net: Any, split: Split) -> float:
    """NLL of the MAP network alone (regression: sigma^2 = training MSE)."""
    f_tr, _ = F.jacobians(net, split.x_train, "last_layer")
    f_te, _ = F.jacobians(net, split.x_test, "last_layer")
    if split.task == "regression":
        noise = float(np.mean((f_tr[:, 0] - split.y_train) ** 2))
        pred = F.Prediction(f_te[:, 0], np.zeros(len(f_te)), np.full(len(f_te), noise))
        return F.nll(pred, split.y_test, split.task)
    return F.nll(F.Prediction(F.softmax(f_te), np.zeros(0), np.zeros(0)), split.y_test,
                 split.task)


def evaluate_subset(net: Any, split: Split, post: F.GLMPosterior, subset: str
                    ) -> tuple[dict[str, Measurement], np.ndarray]:
    """Test metrics of one GLM and its per-point test variances."""
    pred = F.predict(post, *F.jacobians(net, split.x_test, subset))
    ood = F.predict(post, *F.jacobians(net, split.x_ood, subset))
    score = "variance" if split.task == "regression" else "total_var"
    m = {"nll": Measurement(F.nll(pred, split.y_test, split.task), "nats/sample"),
         "ood_auroc": Measurement(F.auroc(getattr(pred, score), getattr(ood, score)),
                                  "fraction"),
         "ood_auroc_var": Measurement(F.auroc(pred.variance, ood.variance), "fraction"),
         "log_evidence_per_n": Measurement(post.log_evidence / len(split.y_train),
                                           "nats/sample"),
         "prior_prec": Measurement(post.prior_prec, "1/param^2"),
         "params": Measurement(post.eigvals.size, "parameters", "counted")}
    if split.task == "classification":
        m["ece"] = Measurement(F.ece(pred.mean, split.y_test), "fraction")
        m["accuracy"] = Measurement(float((pred.mean.argmax(-1) == split.y_test).mean()),
                                    "fraction")
    else:
        m["noise_var"] = Measurement(post.noise_var, "y^2 (standardised)")
    return m, pred.variance


def compare_dataset(name: str, cfg: Mapping[str, Any]) -> list[Report]:
    """Rows last_layer, full and the comparison for one dataset."""
    from neuroedge.bench.latency import measure_side_by_side
    from scipy.stats import spearmanr

    split = load_split(name, cfg["seed"], cfg["n_synthetic"])
    net = train_network(split, cfg)
    baseline = map_nll(net, split)
    timings = measure_side_by_side(
        {s: (lambda s=s: fit_posterior(net, split, s)) for s in F.SUBSETS},
        repeats=cfg["timing_repeats"], warmup=0, block=cfg["timing_repeats"])
    rows, variances, metrics = [], {}, {}
    for subset in F.SUBSETS:
        m, variances[subset] = evaluate_subset(net, split, fit_posterior(net, split, subset),
                                               subset)
        m["fit_time_s"] = Measurement(timings[subset].percentile(50) / 1000, "s")
        m["map_nll"] = Measurement(baseline, "nats/sample")
        metrics[subset] = m
        rows.append(Report(NAME, "host", f"{name}/{subset}", metrics=m))
    ll, full = metrics["last_layer"], metrics["full"]
    rows.append(Report(NAME, "host", f"{name}/compare", metrics={
        "spearman_var": Measurement(float(spearmanr(variances["last_layer"],
                                                    variances["full"])[0]), "rank corr"),
        "time_ratio": Measurement(full["fit_time_s"].value / ll["fit_time_s"].value,
                                  "full/last-layer"),
        "auroc_diff": Measurement(full["ood_auroc"].value - ll["ood_auroc"].value, "full-LL"),
        "nll_diff": Measurement(full["nll"].value - ll["nll"].value, "full-LL")},
        notes=((f"{split.task}; n_train={len(split.y_train)}; fit times side by side, p50 of "
               f"{cfg['timing_repeats']}"),)))
    return rows


def rmt_rows(cfg: Mapping[str, Any]) -> list[Report]:
    """CK vs NTK free energy and test NLL, averaged over seeds, at growing (n, d, m)."""
    rows = []
    for n, d, m in cfg["rmt_sizes"]:
        fits = [rmt.compare(n, d, m, seed) for seed in range(cfg["rmt_seeds"])]
        mean = {k: float(np.mean([getattr(f[kern], attr) for f in fits]))
                for k, (kern, attr) in {"bfe_ck": ("ck", "bfe_per_n"),
                                        "bfe_ntk": ("ntk", "bfe_per_n"),
                                        "nll_ck": ("ck", "test_nll"),
                                        "nll_ntk": ("ntk", "test_nll")}.items()}
        metrics = {k: Measurement(v, "nats/sample") for k, v in mean.items()}
        metrics["bfe_rel_gap"] = Measurement(float(np.mean([rmt.relative_gap(f) for f in fits])),
                                             "fraction")
        rows.append(Report(NAME, "host", f"rmt_n{n}_d{d}_m{m}", metrics=metrics,
                           notes=(f"random init, mean of {cfg['rmt_seeds']} seeds",)))
    return rows


def summary_plot(doc: dict[str, Any], path: Path) -> Path:
    """OOD AUROC, test NLL and GLM fit time, last layer vs full, per dataset."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    by = {r["variant"]: r["metrics"] for r in doc["rows"]}
    names = [n for n in doc["config"]["datasets"] if f"{n}/full" in by]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    x = np.arange(len(names))
    for ax, metric, label in zip(axes, ("ood_auroc", "nll", "fit_time_s"),
                                 ("OOD AUROC", "test NLL (nats)", "GLM fit time (s, log)")):
        for k, subset in enumerate(F.SUBSETS):
            ax.bar(x + 0.4 * k - 0.2, [by[f"{n}/{subset}"][metric]["value"] for n in names],
                   0.4, label=subset.replace("_", " "))
        ax.set_xticks(x, names, rotation=30)
        ax.set_title(label)
        if metric == "fit_time_s":
            ax.set_yscale("log")
    axes[0].legend()
    fig.suptitle(f"{NAME}: last-layer vs full linearised Laplace")
    return finish_figure(fig, path)


def bench(out_dir: str, backends: Sequence[str] = ("host",), config: Mapping[str, Any] |
          None = None, history: str | None = None) -> dict[str, Any]:
    """Run every dataset and the RMT sizes; write report.json/report.md/summary.png."""
    from neuroedge.bench.report import build_document, write_report
    from tqdm import tqdm

    cfg = {**DEFAULTS, **(config or {})}
    rows: list[Report] = []
    for name in tqdm(cfg["datasets"], desc=f"{NAME} datasets"):
        rows += compare_dataset(name, cfg)
    rows += rmt_rows(cfg)
    columns = ["nll", "map_nll", "ece", "accuracy", "ood_auroc", "fit_time_s", "spearman_var",
               "time_ratio", "bfe_ck", "bfe_ntk", "bfe_rel_gap", "nll_ck", "nll_ntk"]
    doc = build_document(NAME, rows, config=cfg, columns=columns)
    write_report(doc, out_dir, columns=columns, plots=[summary_plot], history=history)
    return doc
