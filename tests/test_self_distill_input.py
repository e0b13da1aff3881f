"""stats.self_distill: D = 0 (student = teacher), empty data and NaN/inf named by position."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.models.self_distill import functional as F
from neuroedge.models.self_distill.experiment import isotropic_problem
from neuroedge.models.self_distill.spec import distill


def test_zero_target_gives_d_zero_and_xi_zero_the_teacher():
    x = np.random.default_rng(0).standard_normal((30, 4))
    out = distill(x, np.zeros(30), np.asarray([1.0]))  # was a ZeroDivisionError
    assert out["xi_hat"].tolist() == [0.0]
    assert np.array_equal(out["student"], out["teacher"])
    est = F.one_shot(F.RidgeSVD.fit(x, np.zeros(30)), 1.0)
    assert est.d == 0.0 and est.xi_star == 0.0 and est.risk_star == est.r
    assert est.captured_gain(0.7) == 1.0  # R(xi) is flat: every xi is optimal


def test_oracle_terms_with_d_zero_keep_the_teacher():
    svd = F.RidgeSVD.fit(np.zeros((20, 3)), np.ones(20))  # X = 0: b_T = b_PD = 0
    terms = F.risk_terms(svd, 0.5, np.ones(3))
    assert terms.d == 0.0 and terms.xi_star == 0.0 and terms.risk_star == terms.r
    assert F.risk_terms(svd, 0.5, np.ones(3)).risk(3.0) == terms.r
    assert F.one_shot(svd, 0.5).xi_star == 0.0


def test_negative_d_has_no_minimiser_and_is_refused():
    with pytest.raises(ValueError, match="D = -0.5 < 0"):
        _ = F.RiskTerms(1.0, 1.0, 1.0, -0.5).xi_star


def test_one_shot_d_is_the_sum_of_squares_it_stands_for():
    x, y, _ = isotropic_problem(300, 4)
    for lam in (0.1, 2.0):
        est = F.one_shot(F.RidgeSVD.fit(x, y), lam)
        assert est.d > 0 and est.d == pytest.approx(est.r + est.r_pd - 2 * est.c, rel=1e-8)


@pytest.mark.parametrize("shape", [(0, 3), (5, 0)])
def test_data_without_rows_or_columns_is_refused(shape):
    with pytest.raises(ValueError, match=r"need at least one sample and one feature"):
        distill(np.zeros(shape), np.zeros(shape[0]), np.asarray([1.0]))


def test_nan_and_inf_are_named_by_row_column_and_value():
    x, y = np.ones((6, 3)), np.ones(6)
    x[4, 2] = np.nan
    with pytest.raises(ValueError, match=r"X row 4 column 2 \(0-based\) value nan is not finite"):
        F.RidgeSVD.fit(x, y)
    y[3] = -np.inf
    with pytest.raises(ValueError, match=r"y row 3 \(0-based\) value -inf is not finite"):
        F.RidgeSVD.fit(np.ones((6, 3)), y)
    with pytest.raises(ValueError, match="lambda must be > 0 and finite, got inf"):
        F.teacher(F.RidgeSVD.fit(np.eye(3), np.ones(3)), np.inf)


def test_feature_file_with_a_bom_loads(tmp_path):
    from neuroedge.models.self_distill.data import load_regression_csv

    path = tmp_path / "data.csv"
    path.write_bytes("\ufeff1,2\n3,4\n".encode())  # no header to absorb the BOM
    x, y = load_regression_csv(path)
    assert x.tolist() == [[1.0], [3.0]] and y.tolist() == [2.0, 4.0]


def test_stray_quote_in_a_large_csv_names_the_line_it_opens(tmp_path):
    from neuroedge.models.self_distill.data import read_numeric_csv

    rows = ["x1,x2,y"] + [f"{i * 0.001:.6f},{i * 0.002:.6f},{i % 7}" for i in range(8000)]
    rows[4] = '"' + rows[4]  # the quote runs to the end of the file: past csv's field limit
    path = tmp_path / "features.csv"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(ValueError, match=r"features.csv: line 5: the record starting there is not"):
        read_numeric_csv(path)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("de_n", 2.5, "de_n=2.5: expected an integer in 1..100000"),  # failed inside numpy
        ("oneshot_seeds", 0, "oneshot_seeds=0"),  # wrote a report of empty means
        ("identity_n", 2, "identity_n=2"),
        ("lambdas", [0.1, 0], "lambdas=0"),
        ("real_lambdas", [], "real_lambdas=\\[\\]"),
        ("de_rho", 1.0, r"de_rho=1.0: expected an AR\(1\) correlation in \[0, 1\)"),
        ("de_rho", float("nan"), "de_rho=nan"),
        ("seed", -1, "seed=-1"),
    ],
)
def test_bad_bench_values_are_refused_before_any_work(tmp_path, monkeypatch, key, value, message):
    from neuroedge.errors import ConfigError
    from neuroedge.models.self_distill import experiment as X

    def no_work(*args, **kwargs):
        pytest.fail("an experiment ran: the bad value was not refused first")

    monkeypatch.setattr(X, "identities", no_work)
    with pytest.raises(ConfigError, match=message):
        X.bench(str(tmp_path), config={key: value})
    assert not list(tmp_path.iterdir())


def test_a_bench_with_other_lambdas_reports_each_of_them(tmp_path):
    from neuroedge.models.self_distill import experiment as X

    small = {
        "lambdas": [1.0, 3],
        "identity_n": 40,
        "identity_seeds": 2,
        "oneshot_n": 60,
        "oneshot_seeds": 1,
        "oneshot_lambdas": [0.5],
        "de_p": 20,
        "de_n": 40,
        "de_seeds": 1,
        "de_lambdas": [1.0],
        "real_features": 10,
        "real_lambdas": [1.0],
    }
    doc = X.bench(str(tmp_path), config=small)
    ident = next(r for r in doc["rows"] if r["variant"] == "identities")["metrics"]
    assert {"xi_star_lam1", "xi_star_lam3"} <= set(ident)
    assert ident["identity_max_abs_err"]["value"] < 1e-8


def test_features_whose_squares_overflow_are_refused_not_nan():
    """X * 1e200 is finite but s^2 overflows: the run returned NaN students and xi_hat 0."""
    import numpy as np
    from neuroedge.models.self_distill.functional import RidgeSVD

    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 10))
    with pytest.raises(ValueError, match="too large for float64"):
        RidgeSVD.fit(x * 1e200, x @ rng.normal(size=10))
    RidgeSVD.fit(x * 1e100, x @ rng.normal(size=10))  # large but squarable: still fits
