"""The stats.self_distill benchmark: identities, one-shot vs oracle, equivalents, real data.

Isotropic synthetic setting of the paper's Corollary 3.2 (Sigma = I, |beta| = 1, sigma = 1,
p = n/2, so the ridge-optimal lambda* = gamma sigma^2 / |beta|^2 = 0.5): xi* > 0 below lambda*
(under-regularised), xi* < 0 above it. Real data: scikit-learn's bundled diabetes table lifted to
p = n/2 random ReLU features (its 10 raw features give p/n = 0.03, where SD barely matters), with
the risk measured on held-out rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.models.self_distill import functional as F
from neuroedge.types import Measurement, Report

NAME = "stats.self_distill"
DEFAULTS: dict[str, Any] = {
    "seed": 2026,
    "identity_n": 400,
    "identity_seeds": 5,
    "lambdas": [0.1, 0.5, 2.0, 5.0],
    "oneshot_n": 2000,
    "oneshot_seeds": 3,
    "oneshot_lambdas": [0.1, 2.0, 5.0],
    "de_p": 400,
    "de_n": 800,
    "de_rho": 0.5,
    "de_seeds": 5,
    "de_lambdas": [0.1, 1.0, 5.0],
    "real_features": 200,
    "real_lambdas": [0.01, 1.0],
}


def check_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Every value the bench reads, before any work: ConfigError naming the key and value
    (``de_n=2.5`` failed inside numpy after the first experiments; ``oneshot_seeds=0`` wrote a
    report of empty means)."""
    from neuroedge.config_values import SEED_MAX, integer, number, number_list
    from neuroedge.errors import ConfigError

    out = dict(cfg)
    for key, least, most in (
        ("seed", 0, SEED_MAX - 1000),  # seeds run up to seed + 100 + oneshot_seeds
        ("identity_n", 4, 10**5),
        ("identity_seeds", 1, 1000),
        ("oneshot_n", 4, 10**5),
        ("oneshot_seeds", 1, 500),
        ("de_p", 1, 5000),
        ("de_n", 1, 10**5),
        ("de_seeds", 1, 1000),
        ("real_features", 1, 10**4),
    ):
        out[key] = integer(cfg, key, least, most)
    for key in ("lambdas", "oneshot_lambdas", "de_lambdas", "real_lambdas"):
        out[key] = number_list(cfg, key, 0, open_low=True)
    out["de_rho"] = number(cfg, "de_rho", 0, 1)
    if out["de_rho"] >= 1:
        raise ConfigError(f"de_rho={cfg['de_rho']!r}: expected an AR(1) correlation in [0, 1)")
    return out


def isotropic_problem(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X ~ N(0, I) [n, n/2], |beta| = 1, y = X beta + N(0, 1)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n // 2))
    beta = rng.standard_normal(n // 2)
    beta /= np.linalg.norm(beta)
    return x, x @ beta + rng.standard_normal(n), beta


def identities(cfg: Mapping[str, Any]) -> dict[str, float]:
    """Closed-form checks over seeds and lambdas: xi* = -lambda R'/(2D), sign rule, gain."""
    err, sign_bad, no_gain, xi_by_lam = 0.0, 0, 0, {lam: [] for lam in cfg["lambdas"]}
    for seed in range(cfg["identity_seeds"]):
        x, y, beta = isotropic_problem(cfg["identity_n"], cfg["seed"] + seed)
        svd = F.RidgeSVD.fit(x, y)
        for lam in cfg["lambdas"]:
            terms, slope = F.risk_terms(svd, lam, beta), F.risk_derivative(svd, lam, beta)
            err = max(err, abs(terms.xi_star + lam * slope / (2 * terms.d)))
            sign_bad += int(np.sign(terms.xi_star) != -np.sign(slope))
            no_gain += int(abs(slope) > 1e-8 and not terms.risk_star < terms.r)
            xi_by_lam[lam].append(terms.xi_star)
    return {
        "identity_max_abs_err": err,
        "sign_rule_violations": sign_bad,
        "no_gain_cases": no_gain,
        "median_xi_star": {str(k): float(np.median(v)) for k, v in xi_by_lam.items()},
    }


def one_shot_vs_oracle(cfg: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Per lambda: worst captured gain, worst relative error and sign agreement of xi_hat."""
    from tqdm import tqdm

    out = {
        str(lam): {"min_gain": np.inf, "max_rel_err": 0.0, "sign_agree": 1.0}
        for lam in cfg["oneshot_lambdas"]
    }
    for seed in tqdm(range(cfg["oneshot_seeds"]), desc=f"{NAME} one-shot", leave=False):
        x, y, beta = isotropic_problem(cfg["oneshot_n"], cfg["seed"] + 100 + seed)
        svd = F.RidgeSVD.fit(x, y)
        for lam in cfg["oneshot_lambdas"]:
            oracle, xi_hat = F.risk_terms(svd, lam, beta), F.one_shot(svd, lam).xi_star
            row = out[str(lam)]
            row["min_gain"] = min(row["min_gain"], oracle.captured_gain(xi_hat))
            row["max_rel_err"] = max(
                row["max_rel_err"], abs(xi_hat - oracle.xi_star) / abs(oracle.xi_star)
            )
            row["sign_agree"] *= float(np.sign(xi_hat) == np.sign(oracle.xi_star))
    return out


def equivalents_error(cfg: Mapping[str, Any]) -> float:
    """Max relative gap between seed-averaged finite-sample R, R_pd, C and Theorem 3.1 (AR(1))."""
    p, n, rho = cfg["de_p"], cfg["de_n"], cfg["de_rho"]
    sigma = rho ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    eigs, vecs = np.linalg.eigh(sigma)
    chol = np.linalg.cholesky(sigma)
    rng = np.random.default_rng(cfg["seed"] + 7)
    beta = rng.standard_normal(p) / np.sqrt(p)
    worst = 0.0
    for lam in cfg["de_lambdas"]:
        de = F.deterministic_equivalents(eigs, vecs.T @ beta, p / n, lam, 1.0)
        sample = []
        for _ in range(cfg["de_seeds"]):
            x = rng.standard_normal((n, p)) @ chol.T
            t = F.risk_terms(F.RidgeSVD.fit(x, x @ beta + rng.standard_normal(n)), lam, beta, sigma)
            sample.append([t.r - 1, t.r_pd - 1, t.c - 1])
        theory = np.array([de.r - 1, de.r_pd - 1, de.c - 1])
        worst = max(worst, float(np.max(np.abs(np.mean(sample, 0) - theory) / np.abs(theory))))
    return worst


def diabetes_relu(cfg: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Held-out risk of teacher, one-shot student and grid-best student on diabetes features."""
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(cfg["seed"])
    idx = rng.permutation(len(y))
    train, test = idx[:300], idx[300:]
    mu, sd = x[train].mean(0), x[train].std(0)
    w = rng.standard_normal((x.shape[1], cfg["real_features"])) / np.sqrt(x.shape[1])
    feats = np.maximum((x - mu) / sd @ w, 0)
    feats = (feats - feats[train].mean(0)) / (feats[train].std(0) + 1e-12)
    y = (y - y[train].mean()) / y[train].std()
    svd = F.RidgeSVD.fit(feats[train], y[train])
    grid = np.linspace(-5, 5, 2001)
    out = {}
    for lam in cfg["real_lambdas"]:
        xi_hat = F.one_shot(svd, lam).xi_star
        risks = [
            np.mean((feats[test] @ F.student(svd, lam, xi) - y[test]) ** 2) for xi in (0.0, xi_hat)
        ]
        bt, bpd = F.teacher(svd, lam), F.pure_distilled(svd, lam)
        pred_t, pred_pd = feats[test] @ bt, feats[test] @ bpd
        curve = [np.mean(((1 - xi) * pred_t + xi * pred_pd - y[test]) ** 2) for xi in grid]
        out[str(lam)] = {
            "teacher": float(risks[0]),
            "one_shot": float(risks[1]),
            "grid_best": float(np.min(curve)),
            "xi_hat": float(xi_hat),
            "xi_grid": float(grid[int(np.argmin(curve))]),
        }
    return out


def rows_from(res: Mapping[str, Any]) -> list[Report]:
    ident = res["identities"]
    rows = [
        Report(
            NAME,
            "host",
            "identities",
            metrics={
                "identity_max_abs_err": Measurement(ident["identity_max_abs_err"], "xi"),
                "sign_rule_violations": Measurement(
                    ident["sign_rule_violations"], "cases", "counted"
                ),
                **{  # one per lambda (only 0.1 and 5.0 were read: other lambdas KeyError)
                    f"xi_star_lam{float(lam):g}": Measurement(xi, "xi")
                    for lam, xi in ident["median_xi_star"].items()
                },
            },
        )
    ]
    for lam, r in res["one_shot"].items():
        rows.append(
            Report(
                NAME,
                "host",
                f"one_shot_lam{lam}",
                metrics={
                    "captured_gain": Measurement(r["min_gain"], "fraction (worst seed)"),
                    "xi_rel_err": Measurement(r["max_rel_err"], "fraction (worst seed)"),
                    "sign_agreement": Measurement(r["sign_agree"], "fraction"),
                },
            )
        )
    rows.append(
        Report(
            NAME,
            "host",
            "det_equivalents",
            metrics={"de_max_rel_err": Measurement(res["de_max_rel_err"], "fraction")},
        )
    )
    for lam, r in res["diabetes"].items():
        rows.append(
            Report(
                NAME,
                "host",
                f"diabetes_relu_lam{lam}",
                metrics={
                    "test_mse_teacher": Measurement(r["teacher"], "standardised y^2"),
                    "test_mse_one_shot": Measurement(r["one_shot"], "standardised y^2"),
                    "test_mse_grid_best": Measurement(r["grid_best"], "standardised y^2"),
                },
            )
        )
    return rows


def risk_plot(doc: dict[str, Any], path: Path) -> Path:
    """Risk R(xi) against xi at an under- and an over-regularised lambda, xi* and xi_hat marked."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    x, y, beta = isotropic_problem(doc["config"]["oneshot_n"], doc["config"]["seed"] + 100)
    svd = F.RidgeSVD.fit(x, y)
    fig, ax = plt.subplots(figsize=(6, 4))
    xis = np.linspace(-5, 4, 400)
    for lam, colour in ((0.1, "C0"), (2.0, "C1"), (5.0, "C2")):
        terms, xi_hat = F.risk_terms(svd, lam, beta), F.one_shot(svd, lam).xi_star
        ax.plot(xis, terms.risk(xis), color=colour, label=f"lambda={lam}")
        ax.axvline(terms.xi_star, color=colour, ls=":", lw=1)
        ax.plot([xi_hat], [terms.risk(xi_hat)], "x", color=colour, ms=10, mew=2)
    ax.set_xlabel("mixing weight xi (dotted: oracle xi*, x: one-shot xi_hat)")
    ax.set_ylabel("prediction risk R(xi)")
    ax.set_title(f"{NAME}: n={doc['config']['oneshot_n']}, p=n/2, Sigma=I")
    ax.legend()
    return finish_figure(fig, path)


def bench(
    out_dir: str,
    backends: Sequence[str] = ("host",),
    config: Mapping[str, Any] | None = None,
    history: str | None = None,
) -> dict[str, Any]:
    """Run every experiment, write report.json/report.md/risk.png, return the document."""
    from neuroedge.bench.report import build_document, write_report

    cfg = check_config({**DEFAULTS, **(config or {})})
    res = {
        "identities": identities(cfg),
        "one_shot": one_shot_vs_oracle(cfg),
        "de_max_rel_err": equivalents_error(cfg),
        "diabetes": diabetes_relu(cfg),
    }
    columns = [
        "identity_max_abs_err",
        "sign_rule_violations",
        "xi_star_lam0.1",
        "xi_star_lam5",
        "captured_gain",
        "xi_rel_err",
        "sign_agreement",
        "de_max_rel_err",
        "test_mse_teacher",
        "test_mse_one_shot",
        "test_mse_grid_best",
    ]
    doc = build_document(NAME, rows_from(res), config=cfg, results=res, columns=columns)
    write_report(doc, out_dir, columns=columns, plots=[risk_plot], history=history)
    return doc
