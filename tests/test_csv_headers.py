"""The shared numeric CSV reader (self_distill, alloc.envy_free, uq.last_layer): first rows as
pandas writes them are refused, naming the file and line 1, never read as data or a feature."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.models.envy_free.spec import load_valuations
from neuroedge.models.self_distill.data import load_regression_csv, read_numeric_csv
from neuroedge.models.uq_last_layer import experiment
from neuroedge.models.uq_last_layer.data import read_csv_dataset

NUMBERS = r"line 1 is '{row}': either the header pandas writes for a DataFrame without column"
INDEX = r"line 1: the first column is named '(Unnamed: 0)?', as pandas writes the row index"


def table(rows: int = 12) -> np.ndarray:
    x = np.random.default_rng(0).random((rows, 2))
    return np.column_stack([x, np.arange(rows) % 2])


def lines(header: str | None, data: np.ndarray, index: bool = False) -> str:
    body = [
        (f"{k}," if index else "") + ",".join(f"{v:.6f}" for v in r) for k, r in enumerate(data)
    ]
    return "\n".join(([header] if header is not None else []) + body) + "\n"


@pytest.mark.parametrize(
    ("load", "header", "row"),
    [
        (load_regression_csv, "0,1,2", "0,1,2"),
        (lambda p: read_csv_dataset(p, "classification"), "0,1,2", "0,1,2"),
        (lambda p: read_csv_dataset(p, "regression"), "0, 1, 2", "0,1,2"),
        (load_valuations, "0,1", "0,1"),
    ],
)
def test_unnamed_pandas_columns_header_is_refused_not_read_as_a_row(tmp_path, load, header, row):
    path = tmp_path / "d.csv"
    data = table()[:, :2] if load is load_valuations else table()
    path.write_text(lines(header, data))  # pd.DataFrame(arr).to_csv(path, index=False)
    with pytest.raises(ValueError, match=NUMBERS.format(row=row)) as err:
        load(path)
    assert str(path) in str(err.value)
    assert "header=False" in str(err.value) and "put a row of column names" in str(err.value)


@pytest.mark.parametrize(
    "header",
    [",a,b,y", '"","a","b","y"', ",0,1,2", "Unnamed: 0,a,b,y"],  # last: read, rewritten
)
def test_pandas_index_column_is_refused_not_kept_as_a_feature(tmp_path, header):
    path = tmp_path / "d.csv"
    path.write_text(lines(header, table(), index=True))  # df.to_csv(path): index in column 0
    for load in (load_regression_csv, lambda p: read_csv_dataset(p, "classification")):
        with pytest.raises(ValueError, match=INDEX) as err:
            load(path)
        assert str(path) in str(err.value) and "index=False" in str(err.value)


def test_the_bench_refuses_an_indexed_csv_before_training(tmp_path, monkeypatch):
    path = tmp_path / "toy.csv"
    path.write_text(lines(",a,b,label", table(40), index=True))
    trained = []
    monkeypatch.setattr(experiment, "compare_dataset", lambda name, cfg: trained.append(name))
    config = {"datasets": [f"{path}:classification"], "rmt_sizes": []}
    with pytest.raises(ValueError, match=INDEX):
        experiment.bench(str(tmp_path / "out"), config=config)
    assert trained == []


@pytest.mark.parametrize(
    "text",
    [
        "a,b,y\n0,1,2\n3,4,5\n",  # a named header, then a data row 0,1,2
        "0.0,1.0,2.0\n3,4,5\n",  # not the integer spelling pandas writes
        "1,0,2\n3,4,5\n",  # not 0..p-1 in order
        "0,1,2.5\n3,4,5\n",
        "\n0,1,2\n3,4,5\n",  # not on line 1
    ],
)
def test_other_first_rows_still_load(tmp_path, text):
    path = tmp_path / "d.csv"
    path.write_text(text)
    assert len(read_numeric_csv(path)) == 2


def test_a_missing_first_value_is_still_a_cell_error(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(",0.5,0.25\n1,2,3\n")  # an empty cell, not a pandas index header
    with pytest.raises(ValueError, match=r"line 1 column 0 \(0-based\): '' is not a number"):
        read_numeric_csv(path)
