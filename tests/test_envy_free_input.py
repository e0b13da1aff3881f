"""alloc.envy_free: a user's valuation file, errors by file line; BOM and non-UTF-8 files."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.models.envy_free import functional as F
from neuroedge.models.envy_free.spec import allocate, load_valuations


def test_out_of_range_value_names_the_file_line_not_the_parsed_row(tmp_path):
    path = tmp_path / "vals.csv"
    path.write_text("agent_a,agent_b\n\n0.5,0.5\n0.2,1.5\n")  # the bad value is on line 4
    with pytest.raises(ValueError) as err:
        load_valuations(path)
    assert str(path) in str(err.value)
    assert "line 4 column 1 (0-based, agent b) value 1.5 is outside [0, 1]" in str(err.value)


def test_line_numbers_skip_the_header_and_blank_lines(tmp_path):
    from neuroedge.models.self_distill.data import read_numeric_csv, read_numeric_csv_lines

    path = tmp_path / "vals.csv"
    path.write_text("a,b\n0.5,0.5\n\n\n0.25,1\n")
    table, lines = read_numeric_csv_lines(path, columns=2)
    assert table.tolist() == [[0.5, 0.5], [0.25, 1.0]] and lines.tolist() == [2, 5]
    assert np.array_equal(read_numeric_csv(path, columns=2), table)  # the old signature


@pytest.mark.parametrize("text", ["0.5,0.25\n1,0\n", "agent_a,agent_b\n0.5,0.25\n1,0\n"])
def test_a_utf8_bom_as_excel_writes_it_is_dropped(tmp_path, text):
    path = tmp_path / "vals.csv"
    path.write_bytes(("\ufeff" + text).encode("utf-8"))
    assert load_valuations(path).tolist() == [[0.5, 0.25], [1.0, 0.0]]


def test_a_file_that_is_not_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "vals.csv"
    path.write_bytes("a,b\n0.5,0.5\n0.2,0.1 \xe9\n".encode("latin-1"))
    with pytest.raises(ValueError) as err:
        load_valuations(path)
    assert not isinstance(err.value, UnicodeDecodeError)
    assert f"valuation matrix {path}: line 3: byte b'\\xe9' is not UTF-8" in str(err.value)


def test_array_errors_name_the_row_column_and_value():
    with pytest.raises(ValueError, match=r"row 1 \(0-based\) agent b value nan is not finite"):
        F.check_valuations(np.array([[0.5, 0.5], [0.2, np.nan]]))
    with pytest.raises(ValueError, match=r"row 0 \(0-based\) agent a value -0.5 is outside"):
        F.check_valuations(np.array([[-0.5, 0.5]]))
    with pytest.raises(
        ValueError, match=r"query_means row 2 column 0 \(0-based, agent a\) value inf"
    ):
        allocate(np.array([[0.5, 0.5], [0.1, 0.2], [np.inf, 0.3]]))
