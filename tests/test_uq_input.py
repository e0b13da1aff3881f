"""uq.last_layer: the bench's datasets entries (names, users' CSVs), CSV content, run inputs."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.uq_last_layer import experiment
from neuroedge.models.uq_last_layer.data import MIN_ROWS, load_csv_split


def write_csv(path, y, x=None, header="a,b,target"):
    """A CSV with a header on line 1, so row k of ``y`` is on line k + 2."""
    y = np.asarray(y, dtype=float)
    x = np.random.default_rng(0).standard_normal((len(y), 2)) if x is None else x
    rows = "".join(f"{a:.6f},{b:.6f},{t:g}\n" for (a, b), t in zip(x, y))
    path.write_text(f"{header}\n{rows}")
    return path


def toy_classification(n=48, seed=1):
    x = np.random.default_rng(seed).standard_normal((n, 2))
    return x, (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.7)


def test_datasets_must_be_a_list_not_a_string(tmp_path):
    with pytest.raises(ConfigError, match=r"datasets must be a list of entries, got the str"):
        experiment.bench(str(tmp_path), config={"datasets": "synthetic", "rmt_sizes": []})


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        (["synthetic", "nope"], r"unknown dataset 'nope'; valid: synthetic, diabetes"),
        (["synthetic", 3], r"datasets entry 3 is a int, not a string"),
        (["synthetic", "{d}/toy.csv"], r"give the CSV's task, as '.*toy.csv:regression'"),
        (["synthetic", "{d}/toy.csv:regresion"], r"task 'regresion' is not one of"),
        (["synthetic", "{d}/missing.csv:regression"], r"missing.csv does not exist"),
        (["synthetic", "{d}/flat.csv:regression"], r"flat.csv: the regression target"),
        (["{d}/toy.csv:classification", "{d}/sub/toy.csv:classification"], "both be reported"),
        (["wine", "wine"], r"'wine' and 'wine' would both be reported as 'wine'"),
    ],
)
def test_every_entry_is_checked_before_any_dataset_is_trained(
    tmp_path, monkeypatch, entries, match
):
    (tmp_path / "sub").mkdir()
    x, y = toy_classification()
    for folder in (tmp_path, tmp_path / "sub"):
        write_csv(folder / "toy.csv", y, x)
    write_csv(tmp_path / "flat.csv", [3.0] * 20)
    trained = []
    monkeypatch.setattr(experiment, "compare_dataset", lambda name, cfg: trained.append(name))
    datasets = [e.format(d=tmp_path) if isinstance(e, str) else e for e in entries]
    with pytest.raises(ValueError, match=match):
        experiment.bench(str(tmp_path / "out"), config={"datasets": datasets, "rmt_sizes": []})
    assert trained == []  # nothing was trained before the bad entry was found


def test_a_csv_entry_runs_in_the_bench_named_by_its_file_name(tmp_path):
    x, y = toy_classification()
    path = write_csv(tmp_path / "toy.csv", y, x)
    doc = experiment.bench(
        str(tmp_path / "out"),
        config={
            "datasets": [f"{path}:classification"],
            "steps": 30,
            "timing_repeats": 1,
            "rmt_sizes": [],
        },
    )
    rows = {r["variant"]: r["metrics"] for r in doc["rows"]}
    assert rows["toy.csv/evidence/full"]["accuracy"]["value"] > 0.5
    assert "auroc_diff" in rows["toy.csv/val_nll/compare"]
    assert "toy.csv" in doc["claim"]["tunings"]["evidence"]["datasets"]
    assert "| toy.csv | val_nll |" in (tmp_path / "out" / "report.md").read_text()
    # 48 rows split 34 / 14: the claim's Spearman and AUROC over 14 test rows are not measured
    assert rows["toy.csv/val_nll/compare"]["test_rows"]["value"] == 14
    cell = doc["claim"]["tunings"]["evidence"]["datasets"]["toy.csv"]
    assert cell["holds"] is None and cell["reason"] == "not measured (14 test rows < 30)"
    assert doc["claim"]["holds"] is None
    assert "| not measured (14 test rows < 30) |" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize(
    ("labels", "match"),
    [
        ([0, 1000, 2000] * 4, r"line 3 label 1000: class ids must be 0..C-1 .*class 1 has no"),
        ([0, 1e12] * 6, r"line 3 label 1e\+12: class ids must be 0..C-1"),
        ([0, 1, 3, 1] * 3, r"line 4 label 3: .*3 distinct labels, but class 2 has no rows"),
        ([2] * 12, r"every row has the label 2; classification needs at least 2 classes"),
        ([0, 1, 0, -1] + [1] * 8, r"line 5 label -1 is not a non-negative integer class id"),
    ],
)
def test_class_ids_must_be_0_to_c_minus_1_named_by_file_line(tmp_path, labels, match):
    path = write_csv(tmp_path / "c.csv", labels)
    with pytest.raises(ValueError, match=match):
        load_csv_split(path, "classification")


def test_label_error_counts_blank_lines_and_header(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("a,label\n\n1,0\n2,0.5\n" + "3,1\n" * 10)
    with pytest.raises(ValueError, match=r"c.csv: line 4 label 0.5 is not a non-negative"):
        load_csv_split(path, "classification")


def test_integral_float_labels_load(tmp_path):
    split = load_csv_split(write_csv(tmp_path / "c.csv", [0.0, 1.0, 2.0] * 4), "classification")
    assert split.classes == 3 and split.y_train.dtype == np.int64


@pytest.mark.parametrize("rows", [1, 2, MIN_ROWS - 1])
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_too_few_rows_for_train_validation_and_test_are_refused(tmp_path, rows, task):
    path = write_csv(tmp_path / "few.csv", [0, 1] * (rows // 2) + [1] * (rows % 2))
    with pytest.raises(ValueError, match=rf"few.csv: {rows} data row\(s\); need at least 10"):
        load_csv_split(path, task)


def test_constant_regression_target_is_refused(tmp_path):
    path = write_csv(tmp_path / "flat.csv", [3.0] * 20)
    with pytest.raises(ValueError, match=r"target \(last column\) is 3 on every row"):
        load_csv_split(path, "regression")
    # constant on the training rows only: the one different value falls in the test split
    test_row = np.random.default_rng(0).permutation(MIN_ROWS)[-1]
    y = np.zeros(MIN_ROWS)
    y[test_row] = 1.0
    path = write_csv(tmp_path / "flat_train.csv", y)
    with pytest.raises(ValueError, match=r"target is 0 on all 7 training rows \(seed 0\)"):
        load_csv_split(path, "regression", seed=0)


def test_run_input_with_nan_or_a_wrong_width_is_refused():
    from neuroedge.models.uq_last_layer.spec import SPEC

    program = SPEC.build({"smoke": True})
    x = SPEC.example(0)["x"]
    assert np.isfinite(program.fn(x)["mean"]).all()
    x[1, 3] = np.nan
    with pytest.raises(ValueError, match=r"x: row 1 column 3 \(0-based\) value nan is not"):
        program.fn(x)
    with pytest.raises(ValueError, match=r"x: expected shape \[batch, 8\], got \[2, 5\]"):
        program.fn(np.zeros((2, 5)))


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("steps", 2.5, r"steps=2.5: expected an integer in 1..1000000"),  # failed in range()
        ("timing_repeats", 0, "timing_repeats=0"),  # refused after 6 s of training
        ("weight_decay", -1, "weight_decay=-1"),  # ran
        ("lr", 0, "lr=0"),
        ("hidden_classification", True, "hidden_classification=True"),
        ("evidence_rounds", -1, "evidence_rounds=-1"),
        ("rmt_sizes", [[2.5, 1, 2]], r"rmt_sizes \[2.5, 1, 2\] n=2.5"),  # ran
        ("rmt_sizes", [[200, 100]], r"expected a list of \[n, d, m\] triples"),
        ("seeds", [0, -3], "seed=-3"),
    ],
)
def test_bad_bench_numbers_are_refused_before_any_training(
    tmp_path, monkeypatch, key, value, match
):
    trained = []
    monkeypatch.setattr(experiment, "compare_dataset", lambda name, cfg: trained.append(name))
    monkeypatch.setattr(experiment, "rmt_rows", lambda cfg: trained.append("rmt"))
    with pytest.raises(ConfigError, match=match):
        experiment.bench(str(tmp_path / "out"), config={"datasets": ["wine"], key: value})
    assert trained == [] and not (tmp_path / "out").exists()
