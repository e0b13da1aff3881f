"""causal.cadre user series: the time column key, blank lines, a byte-order mark and bytes
that are not UTF-8 in a CSV series; files pandas and numpy write (an index column, no header),
newest-first rows and nan/inf cells."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from neuroedge.errors import ConfigError, InputError
from neuroedge.models.cadre import train as TR
from neuroedge.models.cadre.data import read_csv_series
from neuroedge.models.cadre.spec import SPEC


def _monthly(path: Path, months: int = 24) -> Path:
    rng = np.random.default_rng(0)
    lines = ["date,a,b"]
    for i in range(months):
        lines.append(f"{2000 + i // 12}-{i % 12 + 1:02d}-01,{rng.normal()},{rng.normal()}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_date_column_is_refused_with_a_time_column_hint(tmp_path: Path) -> None:
    path = _monthly(tmp_path / "m.csv")
    with pytest.raises(InputError, match=r"row 2, column 'date'.*time_column=date"):
        read_csv_series(path)


def test_time_column_of_monthly_dates_is_not_a_variable(tmp_path: Path) -> None:
    values, names = read_csv_series(_monthly(tmp_path / "m.csv"), time_column="date")
    assert names == ["a", "b"] and values.shape == (24, 2)
    path = tmp_path / "gap.csv"
    path.write_text("date,a\n2000-01-31,1\n2000-02-29,2\n2000-03-31,3\n2000-05-31,4\n")
    with pytest.raises(InputError, match=r"row 5: time step 2 months differs"):
        read_csv_series(path, time_column="date")
    path.write_text("date,a\n2000-01-01,1\nlater,2\n")
    with pytest.raises(InputError, match=r"row 3, time column: 'later'"):
        read_csv_series(path, time_column="date")


def test_time_column_key_is_registered_checked_and_passed(tmp_path: Path) -> None:
    from neuroedge.models.cadre.bench import _user_series

    assert "time_column" in SPEC.valid_config_keys("bench")
    assert "time_colum" not in SPEC.valid_config_keys("bench")
    cfg = {**TR.DEFAULTS, "series": str(_monthly(tmp_path / "m.csv")), "time_column": "date"}
    data, period, names = _user_series(TR.check_config(cfg))
    assert names == ["a", "b"] and data.x.shape[-1] == 2 and period == 1
    with pytest.raises(ConfigError, match="time_column=3"):
        TR.check_config({**cfg, "time_column": 3})
    with pytest.raises(ConfigError, match="time_column='date': only read with series"):
        TR.check_config({**TR.DEFAULTS, "time_column": "date"})
    with pytest.raises(ConfigError, match="NetCDF"):
        TR.check_config({**cfg, "series": "x.nc"})


def test_blank_lines_are_skipped_and_rows_keep_their_file_numbers(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("a,b\n1,2\n\n3,4\n5,6\n\n")
    values, names = read_csv_series(path)
    assert names == ["a", "b"] and values.tolist() == [[1, 2], [3, 4], [5, 6]]
    path.write_text("a,b\n1,2\n\n3,x\n")
    with pytest.raises(InputError, match=r"row 4, column 'b': 'x'"):
        read_csv_series(path)


def test_bom_is_stripped_and_non_utf8_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfa,b\n1,2\n3,4\n")
    assert read_csv_series(path)[1] == ["a", "b"]
    path = tmp_path / "latin.csv"
    path.write_bytes(b"a,b\n1,2\n3,4\xe9\n")
    with pytest.raises(InputError, match=r"latin\.csv: line 3: byte b'\\xe9' is not UTF-8"):
        read_csv_series(path)


def test_stray_quote_past_the_csv_field_limit_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("a,b\n1,2\n" + '"3,4\n' + "5,6\n" * 40_000)  # a 160 KB field
    with pytest.raises(InputError, match=r"q\.csv: line 3: the record starting there is not CSV"):
        read_csv_series(path)


def _rows(path: Path, header: str, first: list[str], months: int = 24) -> Path:
    """``header`` then one row per entry of ``first`` (the first field) with two numbers."""
    rng = np.random.default_rng(1)
    lines = [header] + [f"{f},{rng.normal()},{rng.normal()}" for f in first[:months]]
    path.write_text("\n".join(lines) + "\n")
    return path


DATES = [f"{2000 + i // 12}-{i % 12 + 1:02d}-01" for i in range(24)]


def test_pandas_index_column_is_never_a_variable(tmp_path: Path) -> None:
    values, names = read_csv_series(_rows(tmp_path / "r.csv", ",a,b", [str(i) for i in range(24)]))
    assert names == ["a", "b"] and values.shape == (24, 2)  # was ['', 'a', 'b']
    values, names = read_csv_series(_rows(tmp_path / "d.csv", ",a,b", DATES))  # unnamed dates
    assert names == ["a", "b"] and values.shape == (24, 2)
    with pytest.raises(InputError, match=r"row 4: time step 2 months differs"):
        read_csv_series(_rows(tmp_path / "g.csv", ",a,b", DATES[:2] + DATES[3:]))
    path = _rows(tmp_path / "x.csv", ",a,b", [str(3 * i) for i in range(24)])
    with pytest.raises(InputError, match=r"x\.csv: column 1 has no name and holds '0', '3', '6'"):
        read_csv_series(path)
    with pytest.raises(InputError, match=r"looks like a pandas index.*index=False"):
        read_csv_series(path)
    with pytest.raises(InputError, match="pandas index"):  # dates, but time_column is another
        read_csv_series(_rows(tmp_path / "t.csv", ",a,b", DATES), time_column="a")
    with pytest.raises(InputError, match=r"row 1: column 2 has no name"):
        read_csv_series(_rows(tmp_path / "m.csv", "a,,b", [str(i) for i in range(24)]))


def test_date_column_advice_is_a_time_column_the_config_accepts(tmp_path: Path) -> None:
    """A named date column is refused with advice the config accepts; an unnamed one (pandas'
    DatetimeIndex) needs none (the advice was ``time_column=``, which the config refuses)."""
    from neuroedge.models.cadre.bench import _user_series

    for path in (_monthly(tmp_path / "m.csv"), _rows(tmp_path / "u.csv", ",a,b", DATES)):
        cfg = {**TR.DEFAULTS, "series": str(path)}
        try:
            read_csv_series(path)
        except InputError as err:
            cfg["time_column"] = str(err).split("pass time_column=")[1].split(" ")[0]
        assert _user_series(TR.check_config(cfg))[2] == ["a", "b"]


def test_newest_first_rows_are_refused_not_read_backwards(tmp_path: Path) -> None:
    path = _rows(tmp_path / "n.csv", "date,a,b", DATES[::-1])
    with pytest.raises(
        InputError,
        match=r"n\.csv: row 3: time '2001-11-01' is not after row 2's "
        r"'2001-12-01'; the rows must run oldest first",
    ):
        read_csv_series(path, time_column="date")
    path = _rows(tmp_path / "s.csv", "t,a,b", ["1", "2", "2", "3"])
    with pytest.raises(InputError, match=r"row 4: time '2' is not after row 3's '2'"):
        read_csv_series(path, time_column="t")


def test_a_file_without_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plain.csv"
    np.savetxt(path, np.random.default_rng(0).normal(size=(24, 2)), delimiter=",")
    with pytest.raises(
        InputError,
        match=r"plain\.csv: row 1 \(.*\) is all numbers: the file has "
        r"no header row",
    ):
        read_csv_series(path)
    path.write_text(",0,1\n0,1.5,2\n1,2.5,3\n")  # pd.DataFrame(array).to_csv(path)
    with pytest.raises(InputError, match="is all numbers"):
        read_csv_series(path)


@pytest.mark.parametrize("cell", ["nan", "NaN", "inf", "-inf"])
def test_nan_and_inf_cells_are_gaps(tmp_path: Path, cell: str) -> None:
    path = tmp_path / "f.csv"
    path.write_text(f"a,b\n1,2\n3,{cell}\n5,6\n")
    with pytest.raises(InputError, match=rf"f\.csv: row 3, column 'b' is a gap \('{cell}'\)"):
        read_csv_series(path)


def test_bench_refuses_a_bad_series_before_training(tmp_path: Path, capsys) -> None:
    from neuroedge.cli import main

    path = _rows(tmp_path / "n.csv", "date,a,b", DATES[::-1])
    out = tmp_path / "out"
    config = [f"series={path}", "time_column=date"]
    assert main(["bench", "causal.cadre", "--out", str(out), "--config", *config]) == 2
    err = capsys.readouterr().err
    assert "is not after row 2's '2001-12-01'" in err and "Traceback" not in err
    assert not out.exists()
