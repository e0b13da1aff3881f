"""uq.last_layer: Jacobians, GGN, evidence, GLM predictive, LL vs full, RMT, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from neuroedge.models.uq_last_layer import functional as F
from neuroedge.models.uq_last_layer import rmt
from neuroedge.models.uq_last_layer.data import (
    load_csv_split,
    load_split,
    make_split,
    synthetic_regression,
)
from neuroedge.models.uq_last_layer.experiment import VAL_FRACTION, fit_posterior, map_nll
from scipy.stats import spearmanr


@pytest.fixture(scope="module")
def regression():
    x, y = synthetic_regression(700, 0)
    split = make_split(x, y, "regression", "synthetic", 0)
    net = F.make_mlp(8, 16, 1, 0)
    F.train_map(net, split.x_train, split.y_train, "regression", steps=400, lr=1e-2)
    return split, net


@pytest.fixture(scope="module")
def classifier():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((120, 4))
    y = (x[:, 0] + x[:, 1] ** 2 > 1).astype(int) + (x[:, 2] > 0.8)
    split = make_split(x, y, "classification", "toy", 0)
    net = F.make_mlp(4, 6, split.classes, 0)
    F.train_map(net, split.x_train, split.y_train, "classification", steps=150, lr=1e-2)
    return split, net


def test_last_layer_jacobian_is_the_last_block_of_the_full_jacobian(classifier):
    split, net = classifier
    _, full = F.jacobians(net, split.x_test, "full")
    f, last = F.jacobians(net, split.x_test, "last_layer")
    assert np.array_equal(full[:, :, -last.shape[2] :], last)
    # its features are the penultimate activations after the tanh, and the bias is included
    import torch

    with torch.no_grad():
        phi = torch.tanh(net[2](torch.tanh(net[0](torch.as_tensor(split.x_test))))).numpy()
    c, h = split.classes, net[-1].in_features
    assert last.shape[2] == c * (h + 1) == F.theta_of(net, "last_layer").size
    for k in range(c):
        assert np.array_equal(last[:, k, k * h : (k + 1) * h], phi)
        assert np.all(last[:, k, c * h + k] == 1.0)
    # and the network is linear in its last layer: f = J_LL theta_LL
    assert np.allclose(np.einsum("ncp,p->nc", last, F.theta_of(net, "last_layer")), f, atol=1e-12)


def test_classification_ggn_equals_explicit_sum_of_j_lambda_j(classifier):
    split, net = classifier
    f, jac = F.jacobians(net, split.x_train, "full")
    post = F.fit_glm(f, jac, split.y_train, F.theta_of(net, "full"), "classification")
    pi = F.softmax(f)
    explicit = sum(j.T @ (np.diag(p) - np.outer(p, p)) @ j for j, p in zip(jac, pi))
    rebuilt = (post.eigvecs * post.eigvals) @ post.eigvecs.T
    assert np.allclose(rebuilt, explicit, atol=1e-9)


def test_regression_evidence_and_predictive_match_dense_formulas(regression):
    split, net = regression
    f, jac = F.jacobians(net, split.x_train, "last_layer")
    theta = F.theta_of(net, "last_layer")
    post = F.fit_glm(f, jac, split.y_train, theta, "regression")
    s2, lam, n = post.noise_var, post.prior_prec, len(split.y_train)
    j = jac[:, 0, :]
    h = j.T @ j / s2 + lam * np.eye(len(theta))
    rss = float(((f[:, 0] - split.y_train) ** 2).sum())
    logz = (
        -0.5 * n * math.log(2 * math.pi * s2)
        - rss / (2 * s2)
        - 0.5 * lam * theta @ theta
        + 0.5 * len(theta) * math.log(lam)
        - 0.5 * np.linalg.slogdet(h)[1]
    )
    assert post.log_evidence == pytest.approx(logz, rel=1e-9)
    ft, jt = F.jacobians(net, split.x_test, "last_layer")
    pred = F.predict(post, ft, jt)
    dense = np.einsum("np,pq,nq->n", jt[:, 0], np.linalg.inv(h), jt[:, 0])
    assert np.allclose(pred.variance, dense, rtol=1e-8)
    assert np.allclose(pred.total_var, dense + s2, rtol=1e-8)
    # the grid optimum is a local optimum: neighbours on the grid are not better
    assert post.noise_var in F.NOISE_GRID and post.prior_prec in F.PRIOR_GRID


def test_last_layer_and_full_agree_on_ranking_and_ood_at_a_fraction_of_the_cost(regression):
    from neuroedge.bench.latency import measure_side_by_side

    split, net = regression
    # one timed fit of a millisecond-scale call is noise on a shared machine: take p50 of
    # interleaved repeats
    times = {
        s: t.percentile(50)
        for s, t in measure_side_by_side(
            {s: (lambda s=s: fit_posterior(net, split, s)) for s in F.SUBSETS},
            repeats=15,
            warmup=1,
            block=1,
        ).items()
    }
    posts, preds, oods = {}, {}, {}
    for subset in F.SUBSETS:
        posts[subset] = fit_posterior(net, split, subset)
        preds[subset] = F.predict(posts[subset], *F.jacobians(net, split.x_test, subset))
        oods[subset] = F.predict(posts[subset], *F.jacobians(net, split.x_ood, subset))
    auroc = {s: F.auroc(preds[s].variance, oods[s].variance) for s in F.SUBSETS}
    assert auroc["full"] - auroc["last_layer"] <= 0.08
    assert spearmanr(preds["last_layer"].variance, preds["full"].variance)[0] >= 0.8
    assert times["full"] / times["last_layer"] >= 20, times
    baseline = map_nll(net, split)
    for subset in F.SUBSETS:
        assert F.nll(preds[subset], split.y_test, "regression") < baseline


def test_classification_variance_is_the_variance_of_the_linearised_probabilities(classifier):
    split, net = classifier
    f, jac = F.jacobians(net, split.x_train, "full")
    post = F.fit_glm(f, jac, split.y_train, F.theta_of(net, "full"), "classification")
    ft, jt = F.jacobians(net, split.x_test[:5], "full")
    pred = F.predict(post, ft, jt)
    # Monte Carlo over a shrunk posterior N(theta_hat, eps^2 H^-1): Var[softmax(f_lin)] / eps^2
    # tends to tr(G S_f G^T) as eps -> 0 (the delta method is exact to first order)
    eps, draws = 1e-4, 20000
    scale = 1.0 / np.sqrt(post.eigvals + post.prior_prec)
    z = np.random.default_rng(0).standard_normal((draws, scale.size))
    delta = eps * (z * scale) @ post.eigvecs.T  # [draws, P] ~ N(0, eps^2 H^-1)
    probs = F.softmax(ft[None] + np.einsum("ncp,sp->snc", jt, delta))
    mc = probs.var(0).sum(-1) / eps**2
    assert np.allclose(pred.variance, mc, rtol=0.05)


def test_last_layer_and_full_rank_classification_variances_alike():
    split = load_split("wine", 0)  # bundled with scikit-learn
    net = F.make_mlp(split.x_train.shape[1], 8, split.classes, 0)
    F.train_map(net, split.x_train, split.y_train, "classification", steps=300, lr=5e-3)
    var = {
        s: F.predict(fit_posterior(net, split, s), *F.jacobians(net, split.x_test, s)).variance
        for s in F.SUBSETS
    }
    assert spearmanr(var["last_layer"], var["full"])[0] >= 0.8


def test_rmt_free_energy_gap_is_small_and_shrinks():
    small, mid = rmt.compare(200, 100, 200), rmt.compare(400, 200, 400)
    assert rmt.relative_gap(mid) < 0.03
    assert abs(mid["ck"].test_nll - mid["ntk"].test_nll) < 0.05
    assert rmt.relative_gap(mid) <= rmt.relative_gap(small)


def test_rmt_rows_average_the_rmt_seeds_from_seed_on_and_say_which(monkeypatch):
    """They used seeds 0..rmt_seeds-1 whatever ``seed`` was."""
    from neuroedge.models.uq_last_layer.experiment import rmt_rows

    drawn, compare = [], rmt.compare
    monkeypatch.setattr(rmt, "compare", lambda *a: drawn.append(a[3]) or compare(*a))
    cfg = {"rmt_sizes": [[20, 10, 20]], "rmt_seeds": 2}
    (row,) = rmt_rows({**cfg, "seed": 7})
    assert drawn == [7, 8] and row.notes == ("random init, mean of 2 seeds, 7..8",)
    drawn.clear()
    (row,) = rmt_rows({**cfg, "seed": 0})  # the default: seeds 0 and 1, as before
    assert drawn == [0, 1]
    fits = [compare(20, 10, 20, s) for s in (0, 1)]
    assert row.metrics["bfe_ck"].value == pytest.approx(np.mean([f["ck"].bfe_per_n for f in fits]))
    assert rmt_rows({**cfg, "seed": 3, "rmt_seeds": 1})[0].notes == ("random init, seed 3",)


def test_ntk_dominates_ck_as_kernels():
    x = np.random.default_rng(2).standard_normal((30, 10))
    ck, ntk = rmt.kernels(x, x, 40, 0)
    assert np.linalg.eigvalsh(ntk - ck).min() > -1e-10


def test_auroc_and_ece_match_direct_definitions():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(40), rng.standard_normal(30) + 0.5
    pairs = np.mean([(bj > ai) + 0.5 * (bj == ai) for ai in a for bj in b])
    assert F.auroc(a, b) == pytest.approx(pairs)
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]])
    # bins: 0.9 (right), 0.8 (wrong), 0.7 (right) -> (|0.9-1| + |0.8-0| + |0.7-1|) / 3
    assert F.ece(probs, np.array([0, 1, 1])) == pytest.approx((0.1 + 0.8 + 0.3) / 3)


def test_bad_feature_files_and_options_are_refused(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b,label\n0.1,0.2,1\n0.3,0.4,1.5\n" + "0.5,0.6,0\n" * 8)
    with pytest.raises(ValueError, match="line 3 label 1.5 is not a non-negative integer"):
        load_csv_split(path, "classification")
    path.write_text("0.1,0.2,1\n0.3,nan,0\n")
    with pytest.raises(ValueError, match="line 2 column 1.*not finite"):
        load_csv_split(path, "regression")
    with pytest.raises(ValueError, match="subset 'middle' is not one of"):
        F.jacobians(F.make_mlp(2, 3, 1, 0), np.zeros((1, 2)), "middle")


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_consistent_weight_decay_makes_adams_objective_the_log_posterior(task):
    import torch
    from neuroedge.models.uq_last_layer.experiment import consistent_weight_decay

    rng = np.random.default_rng(5)
    x = torch.as_tensor(rng.standard_normal((40, 3)))
    y = (
        torch.as_tensor(rng.standard_normal(40))
        if task == "regression"
        else torch.as_tensor(rng.integers(0, 3, 40))
    )
    net = F.make_mlp(3, 4, 1 if task == "regression" else 3, 0)
    post = F.GLMPosterior(
        task, np.zeros(1), np.eye(1), 0.7, 0.3 if task == "regression" else 1.0, 0.0
    )
    wd = consistent_weight_decay(post, len(y))
    sq = sum((p**2).sum() for p in net.parameters())
    out = net(x)
    if task == "regression":  # Adam: mean MSE + wd/2 |theta|^2; posterior: Gaussian NLL + prior
        adam = torch.nn.functional.mse_loss(out[:, 0], y) + wd / 2 * sq
        neg_log_post = ((out[:, 0] - y) ** 2).sum() / (2 * post.noise_var) + 0.7 / 2 * sq
    else:
        adam = torch.nn.functional.cross_entropy(out, y) + wd / 2 * sq
        neg_log_post = torch.nn.functional.cross_entropy(out, y, reduction="sum") + 0.7 / 2 * sq
    g_adam = torch.autograd.grad(adam, list(net.parameters()), retain_graph=True)
    g_post = torch.autograd.grad(neg_log_post, list(net.parameters()))
    ratio = g_post[0].flatten()[0] / g_adam[0].flatten()[0]  # one common positive factor
    assert float(ratio) > 0
    for a, b in zip(g_adam, g_post):
        assert torch.allclose(a * ratio, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_validation_tuning_minimises_held_out_nll_and_never_reads_test_data(
    task, regression, classifier
):
    import dataclasses

    split, net = regression if task == "regression" else classifier
    post = fit_posterior(net, split, "last_layer", "val_nll")
    assert post.tuned_by == "val_nll"
    # brute force over the same grid: the GLM on the rows the MAP was fitted on, each
    # (sigma^2, lambda), scored by the predictive NLL of the held-out validation rows
    n_val = int(len(split.y_train) * VAL_FRACTION)
    ref = fit_posterior(
        net,
        dataclasses.replace(split, x_train=split.x_train[n_val:], y_train=split.y_train[n_val:]),
        "last_layer",
    )
    f_val, j_val = F.jacobians(net, split.x_train[:n_val], "last_layer")

    def score(s2: float, lam: float) -> float:  # the search's predictive (see functional.py)
        post = dataclasses.replace(ref, noise_var=float(s2), prior_prec=float(lam))
        if task == "regression":
            return F.nll(F.predict(post, f_val, j_val), split.y_train[:n_val], task)
        probs = F.mean_field_softmax(f_val, post.functional_cov(j_val))
        return F.nll(F.Prediction(probs, probs, probs), split.y_train[:n_val], task)

    scores = {(s2, lam): score(s2, lam) for s2 in F.noise_grid(task) for lam in F.PRIOR_GRID}
    best = min(scores, key=scores.get)
    assert (post.noise_var, post.prior_prec) == best
    # the test and OOD sets never reach the tuning: poisoning them changes nothing
    poisoned = dataclasses.replace(
        split,
        x_test=np.full_like(split.x_test, np.nan),
        y_test=split.y_test[::-1].copy(),
        x_ood=np.full_like(split.x_ood, np.nan),
    )
    again = fit_posterior(net, poisoned, "last_layer", "val_nll")
    assert (again.noise_var, again.prior_prec) == (post.noise_var, post.prior_prec)
    assert np.array_equal(again.eigvals, post.eigvals)
    with pytest.raises(ValueError, match="tuning 'test' is not one of"):
        fit_posterior(net, split, "last_layer", "test")
    f, jac = F.jacobians(net, split.x_train, "last_layer")
    with pytest.raises(ValueError, match="validation set: .* do not match"):
        F.fit_glm(
            f,
            jac,
            split.y_train,
            F.theta_of(net, "last_layer"),
            task,
            validation=(f_val, j_val[:, :, :-1], split.y_train[:n_val]),
        )


def _compare_rows(seed: int, gap: float, rho: float, ratio: float) -> list:
    """Rows of one seed for one dataset ("d") under both tunings, with the given figures."""
    from neuroedge.types import Measurement, Report

    rows = []
    for tuning in F.TUNINGS:
        for subset, auroc in (("last_layer", 0.7), ("full", 0.7 + gap)):
            rows.append(
                Report(
                    "uq.last_layer",
                    "host",
                    f"d/{tuning}/{subset}",
                    metrics={"ood_auroc": Measurement(auroc, "fraction")},
                )
            )
        rows.append(
            Report(
                "uq.last_layer",
                "host",
                f"d/{tuning}/compare",
                metrics={
                    "auroc_diff": Measurement(gap, "full-LL"),
                    "spearman_var": Measurement(rho, "rank corr"),
                    "time_ratio": Measurement(ratio, "full/last-layer"),
                },
            )
        )
    return rows


@pytest.mark.parametrize(
    ("gaps", "rhos", "ratios", "holds"),
    [
        ((0.05, 0.10), (0.9, 0.9), (30.0, 30.0), True),  # mean gap 0.075 <= 0.08
        ((0.05, 0.12), (0.9, 0.9), (30.0, 30.0), False),  # mean gap 0.085
        ((0.0, 0.0), (0.95, 0.6), (30.0, 30.0), False),  # mean Spearman 0.775
        ((0.0, 0.0), (0.9, 0.9), (30.0, 9.0), False),  # mean time ratio 19.5
    ],
)
def test_claim_over_seeds_reads_the_means_of_gap_spearman_and_time_ratio(gaps, rhos, ratios, holds):
    from neuroedge.models.uq_last_layer.experiment import claim_over_seeds

    per_seed = {s: _compare_rows(s, g, r, t) for s, g, r, t in zip((3, 4), gaps, rhos, ratios)}
    claim = claim_over_seeds(per_seed)
    cell = claim["tunings"]["evidence"]["datasets"]["d"]
    assert claim["seeds"] == [3, 4] and claim["holds"] is holds
    assert cell["gap"] == pytest.approx(np.mean(gaps))
    assert cell["gap_se"] == pytest.approx(abs(gaps[0] - gaps[1]) / 2)
    assert cell["spearman"] == pytest.approx(np.mean(rhos))
    assert cell["time_ratio_min"] == min(ratios)
    one = claim_over_seeds({3: per_seed[3]})["tunings"]["evidence"]["datasets"]["d"]
    assert one["gap"] == pytest.approx(gaps[0]) and one["gap_se"] is None  # JSON-safe


def test_bench_over_two_seeds_writes_mean_and_per_seed_rows(tmp_path):
    import json

    from neuroedge.models.uq_last_layer.experiment import bench

    doc = bench(
        str(tmp_path),
        config={
            "seeds": [0, 1],
            "datasets": ["wine"],
            "steps": 60,
            "rmt_sizes": [[40, 20, 40]],
            "rmt_seeds": 1,
            "timing_repeats": 1,
        },
    )
    rows = {r["variant"]: r["metrics"] for r in doc["rows"]}
    for key in ("wine/evidence/full", "wine/val_nll/compare"):
        for metric in rows[key]:
            if metric.endswith("_sd"):
                continue
            each = [rows[f"{key}@seed={s}"][metric]["value"] for s in (0, 1)]
            assert rows[key][metric]["value"] == pytest.approx(np.mean(each))
    gaps = [rows[f"wine/evidence/compare@seed={s}"]["auroc_diff"]["value"] for s in (0, 1)]
    cell = doc["claim"]["tunings"]["evidence"]["datasets"]["wine"]
    assert cell["gap"] == pytest.approx(np.mean(gaps))
    assert json.loads((tmp_path / "report.json").read_text())["claim"]["seeds"] == [0, 1]
    assert "## Claim over 2 seeds (0..1)" in (tmp_path / "report.md").read_text()
    assert "seed" not in doc["config"] and doc["config"]["seeds"] == [0, 1]  # no unused seed=0
    assert rows["rmt_n40_d20_m40"] and doc["rows"][-1]["notes"] == ["random init, seed 0"]
    with pytest.raises(ValueError, match="seeds must be distinct"):
        bench(str(tmp_path), config={"seeds": [1, 1], "datasets": ["wine"]})


def test_auroc_gives_ties_half_credit_and_ece_weights_bins_by_their_counts():
    """Entropy scores tie (confident predictions); ECE's bins hold unequal counts: both were
    untested (ordinal ranks and an unweighted mean of bin gaps passed every test)."""
    from sklearn.metrics import roc_auc_score

    inside, out = np.array([0.0, 0.0, 1.0, 1.0]), np.array([1.0, 1.0, 2.0])
    labels = np.r_[np.zeros(4), np.ones(3)]
    assert F.auroc(inside, out) == pytest.approx(roc_auc_score(labels, np.r_[inside, out]))
    assert F.auroc(np.ones(5), np.ones(5)) == 0.5
    # 8 right at 0.95 and 2 wrong at 0.55: (8 * 0.05 + 2 * 0.55) / 10, not (0.05 + 0.55) / 2
    probs = np.array([[0.95, 0.05]] * 8 + [[0.55, 0.45]] * 2)
    assert F.ece(probs, np.array([0] * 8 + [1] * 2)) == pytest.approx(0.15)
    # 0.62 (wrong) and 0.68 (right) share a bin of width 1/10, not of width 1/15
    pair = np.array([[0.62, 0.38], [0.68, 0.32]])
    assert F.ece(pair, np.array([1, 0])) == pytest.approx((0.62 + 0.32) / 2)
    # a confidence of exactly 1 is in the last bin, not dropped: wrong at 1.0 costs 1
    assert F.ece(np.array([[1.0, 0.0]]), np.array([1])) == 1.0
