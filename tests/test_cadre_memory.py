"""causal.cadre at scale: the final graph is summed jac_batch windows at a time (it held 768
Jacobians dx x dx at once), a series of too many variables is refused before training, and
the CSV reader and the windows hold about the table's size (they held ~13x the file and 9x
the series) while giving the same values and naming the same errors."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from neuroedge.errors import InputError
from neuroedge.models.cadre import functional as F
from neuroedge.models.cadre import train as TR
from neuroedge.models.cadre.data import CausalSeries, read_csv_series, windows


def _series_data(dx: int, steps: int = 60) -> CausalSeries:
    x, domain = windows(np.random.default_rng(0).standard_normal((steps, dx)), 5)
    return CausalSeries(x, np.zeros((len(x), 5, 2), np.float32), domain, np.zeros((dx, dx)))


def test_estimated_graph_is_the_all_at_once_mean_summed_in_chunks() -> None:
    data = _series_data(6)
    model = TR.new_cadre(6, 2, 1, TR.DEFAULTS)
    rows = []
    real = model.decoder_jacobian
    model.decoder_jacobian = lambda z, s: rows.append(len(z)) or real(z, s)
    graph = TR.estimated_graph(model, data, n=40, chunk=16)
    assert rows == [48, 48, 24]  # 16 windows of 3 inner steps at a time (was 120 at once)
    z, s = model.posterior_means(torch.as_tensor(data.x[:40]))
    with torch.no_grad():
        want = F.jacobian_graph(real(z.detach(), s.detach())).mean(0).numpy()
    assert graph.shape == (6, 6) and np.abs(graph - want).max() < 1e-6
    rows.clear()
    whole = TR.estimated_graph(model, data)
    assert np.abs(TR.estimated_graph(model, data, chunk=7) - whole).max() < 1e-6
    assert max(rows) == 48 and sum(rows) == 3 * len(data.x) * 2  # n=256 > the 56 windows


def test_check_training_memory_names_the_variables_the_cap_and_what_fits() -> None:
    cfg = dict(TR.DEFAULTS)
    with pytest.raises(InputError) as err:
        TR.check_training_memory(1000, cfg, "s.csv")
    text = str(err.value)
    assert text.startswith("s.csv: 1000 variables: training would hold about 4.1 GiB")
    assert "above the 4 GiB cap (MAX_TRAINING_BYTES)" in text
    fits = int(text.split("at most ")[1].split(" ")[0])
    TR.check_training_memory(fits, cfg, "s.csv")  # the count named fits, one more does not
    with pytest.raises(InputError, match=f"at most {fits} variables fit"):
        TR.check_training_memory(fits + 1, cfg, "s.csv")
    assert TR.training_bytes(2 * fits, cfg) == pytest.approx(4 * TR.training_bytes(fits, cfg))
    small = {**cfg, "batch": 16, "jac_batch": 2, "hidden": 8}
    TR.check_training_memory(1000, small, "s.csv")  # a smaller config fits the same series


def test_a_series_of_too_many_variables_is_refused_before_training(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    from neuroedge.cli import main

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("trained")

    monkeypatch.setattr(TR, "fit", no_training)
    monkeypatch.setattr(TR, "new_cadre", no_training)
    path = tmp_path / "wide.csv"
    table = np.random.default_rng(0).standard_normal((6, 1000)).round(3)
    header = ",".join(f"v{i}" for i in range(1000))
    np.savetxt(path, table, delimiter=",", fmt="%g", header=header, comments="")
    out = tmp_path / "out"
    assert main(["bench", "causal.cadre", "--out", str(out), "--config", f"series={path}"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 1000 variables: training would hold about 4.1 GiB" in err
    assert "4 GiB cap (MAX_TRAINING_BYTES)" in err and "Traceback" not in err
    assert not out.exists()


def test_a_netcdf_grid_is_refused_from_its_metadata_before_its_values_are_read(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    import xarray as xr
    from neuroedge.cli import main
    from neuroedge.models.cadre.data import read_netcdf_series

    monkeypatch.setattr(TR, "fit", lambda *a, **k: pytest.fail("trained"))
    rng = np.random.default_rng(0)
    sst, msl = rng.standard_normal((6, 40, 30)), rng.standard_normal((6, 40))
    sst[2, 3, 4] = np.nan  # reading the values first would name this gap
    path = tmp_path / "grid.nc"
    dims = ("time", "lat", "lon")
    xr.Dataset({"sst": (dims, sst), "msl": (dims[:2], msl)}).to_netcdf(path, engine="h5netcdf")
    widths = []

    def refuse(width: int) -> None:
        widths.append(width)
        raise InputError("too wide")

    with pytest.raises(InputError, match="too wide"):
        read_netcdf_series(path, check_width=refuse)
    assert widths == [40 * 30 + 40]
    out = tmp_path / "out"
    assert main(["bench", "causal.cadre", "--out", str(out), "--config", f"series={path}"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 1240 variables: training would hold about" in err and "gap" not in err
    assert not out.exists()


def _peak(call):  # (result, peak bytes Python and numpy allocated during the call)
    tracemalloc.start()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_csv_series_is_read_a_record_at_a_time(tmp_path: Path) -> None:
    table = np.random.default_rng(0).standard_normal((30_000, 8))
    path = tmp_path / "big.csv"
    np.savetxt(path, table, delimiter=",", fmt="%.9g", header="a,b,c,d,e,f,g,h", comments="")
    (values, names), peak = _peak(lambda: read_csv_series(path))
    assert names == list("abcdefgh")
    assert np.array_equal(values, np.loadtxt(path, delimiter=",", skiprows=1))
    assert peak < 1.5 * values.nbytes, (peak, values.nbytes)  # was ~12x the 2.5 MB file


def test_csv_errors_keep_their_order_when_read_a_record_at_a_time(tmp_path: Path) -> None:
    """The whole file was decoded, then parsed, then checked: a bad byte or a record that is
    not CSV further on is still named before an earlier bad cell."""
    path = tmp_path / "s.csv"
    path.write_bytes(b"a,b\n1,x\n" + b"3,4\n" * 100_000 + b"5,\xe96\n")  # past one read block
    with pytest.raises(InputError, match=r"s\.csv: line 100003: byte b'\\xe9' is not UTF-8"):
        read_csv_series(path)
    path.write_text("a,b\n1,x\n" + '"3,4\n' + "5,6\n" * 40_000)
    with pytest.raises(InputError, match=r"s\.csv: line 3: the record starting there is not"):
        read_csv_series(path)
    path.write_text("a,b\n1,x\n3,nan\n")
    with pytest.raises(InputError, match=r"row 2, column 'b': 'x' is not a number"):
        read_csv_series(path)
    path.write_text("1,2\n")  # one row: too short before it is a header of numbers
    with pytest.raises(InputError, match="needs a header row and at least one data row"):
        read_csv_series(path)
    path.write_text("1,2\n3,4\n")
    with pytest.raises(InputError, match="is all numbers"):
        read_csv_series(path)


def test_a_bad_byte_after_a_byte_order_mark_is_named_where_it_is(tmp_path: Path) -> None:
    """The whole-file decode counted offsets after the mark: it named the byte 3 before."""
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfa,b\n\n1,\xe9\n")
    with pytest.raises(InputError, match=r"bom\.csv: line 3: byte b'\\xe9' is not UTF-8"):
        read_csv_series(path)


def test_windows_are_the_indexed_windows_without_the_float64_copies() -> None:
    rng = np.random.default_rng(1)
    series = rng.standard_normal((20_000, 6)) * rng.uniform(0.1, 50, 6) + 3
    (x, domain), peak = _peak(lambda: windows(series, 5, 12))
    z = (series - series.mean(0)) / (series.std(0) + 1e-12)
    idx = np.arange(len(x))[:, None] + np.arange(5)[None, :]
    assert np.array_equal(x, z[idx].astype(np.float32)) and x.flags.c_contiguous
    assert domain.tolist() == (np.arange(len(x)) % 12).tolist()
    assert peak < 1.5 * x.nbytes, (peak, x.nbytes)  # was 3.7x (9x the series)
