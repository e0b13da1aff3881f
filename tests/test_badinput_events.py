"""Bad input found by the event / event.bivision audit: non-path config values, windows whose
dense tensors would not fit in memory, empty ATIS files, corrupt event order in files and
repair hints a CLI user cannot follow.

Each test failed on the code before the fix (a TypeError or MemoryError traceback, an empty
file read as 0 events, a plain ValueError without the byte offset, or a hint naming only a
Python keyword).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from neuroedge.cli import main
from neuroedge.errors import ConfigError
from neuroedge.events import EventFormatError, SensorSize, check_events, make_events
from neuroedge.events.io import detect_format, read_events, stream_events, write_events
from neuroedge.models.bivision.e2s import (
    MAX_DENSE_ELEMENTS,
    E2SParams,
    check_dense_size,
    dense_elements,
    e2s,
    event_histogram,
)

CLI_HINT = "Python only: the CLI has no such option"


def _events(t, x=None, y=None) -> np.ndarray:
    t = np.asarray(t)
    ones = np.ones(len(t), np.int64)
    return make_events(t, ones if x is None else x, ones if y is None else y, 0 * ones)


# ---- event.bivision path keys --------------------------------------------------------------


@pytest.mark.parametrize("value,kind", [(123, "int"), ([1], "list"), (True, "bool"), ("", "str")])
def test_bivision_path_keys_refuse_non_paths(value, kind) -> None:
    from neuroedge.models.bivision.bench_settings import SWEEP_DEFAULTS, check_values
    from neuroedge.models.bivision.e2s_throughput import throughput_rows
    from neuroedge.models.bivision.train import train

    want = rf"events_file={re.escape(repr(value))}: expected the path of an event recording"
    with pytest.raises(ConfigError, match=rf"{want}.*got {kind}"):
        check_values({**SWEEP_DEFAULTS, "events_file": value}, bench=True)
    with pytest.raises(ConfigError, match="expected the path of an event recording"):
        throughput_rows({**SWEEP_DEFAULTS, "events_file": value})
    with pytest.raises(ConfigError, match=r"data=.*: expected the path of a dataset folder"):
        train({"data": value})


def test_bivision_cli_refuses_numeric_paths(tmp_path, capsys) -> None:
    out = str(tmp_path / "eb")
    assert main(["bench", "event.bivision", "--out", out, "--config", "events_file=123"]) == 2
    assert "events_file=123: expected the path of an event recording" in capsys.readouterr().err
    assert main(["train", "event.bivision", "--config", "data=5"]) == 2
    assert "data=5: expected the path of a dataset folder" in capsys.readouterr().err


# ---- dense E2S / histogram size ------------------------------------------------------------


def test_e2s_and_histogram_refuse_a_window_too_large_before_allocating() -> None:
    events = _events([0, 1000])
    huge = E2SParams(steps=2_000_001, step_us=20_000)
    with pytest.raises(ValueError, match=r"E2S of a 40000020000 us window \(2000001 steps of "):
        e2s(events, 2001, 2001, huge)
    with pytest.raises(ValueError, match=r"2001x2001 sensor would allocate [\d,]+ array elements"):
        event_histogram(events, 2001, 2001, 2_000_001, 20_000)
    with pytest.raises(ValueError, match=r"1,073,741,824 \(MAX_DENSE_ELEMENTS\).*larger step_us"):
        e2s(events, 8, 8, E2SParams(steps=10**8, step_us=1))


def test_dense_limit_counts_what_is_allocated_and_keeps_the_shipped_sizes() -> None:
    # E2S pads rows to 8 bytes: a 1x1 sensor costs 2 x 3 x 8 count cells + 2 spikes per step
    assert dense_elements(1, 1, 10, True) == 11 * 48 + 20
    assert dense_elements(1, 1, 10, False) == 20
    steps = MAX_DENSE_ELEMENTS // 50  # 1x1 E2S: fits as a histogram, not as E2S
    assert check_dense_size(1, 1, steps, 1, False) == 2 * steps
    with pytest.raises(ValueError, match="E2S of a"):
        check_dense_size(1, 1, steps, 1, True)
    # the throughput bench's 10 tiles of the largest shipped recording (sample.aedat4)
    assert check_dense_size(320, 240, 295, 20_000, True) < MAX_DENSE_ELEMENTS // 10


def _span_recording(tmp_path: Path) -> Path:
    x = np.array([0, 2000, 1000])
    return write_events(tmp_path / "span.dat", _events([0, 1000, 4 * 10**9], x, x))


def test_throughput_bench_refuses_a_recording_too_long_for_e2s(tmp_path) -> None:
    from neuroedge.models.bivision.bench_settings import SWEEP_DEFAULTS
    from neuroedge.models.bivision.e2s_throughput import throughput_rows

    path = _span_recording(tmp_path)
    with pytest.raises(ConfigError, match=r"span\.dat': events spanning 4000000001 us x 10 tiles"):
        throughput_rows({**SWEEP_DEFAULTS, "events_file": str(path)})


def test_throughput_bench_cli_names_the_limit(tmp_path, capsys) -> None:
    path = _span_recording(tmp_path)
    args = ["--out", str(tmp_path / "eb"), "--config", f"events_file={path}", "seeds=[0]"]
    assert main(["bench", "event.bivision", *args]) == 2
    err = capsys.readouterr().err
    assert "2001x2001 sensor" in err and "(MAX_DENSE_ELEMENTS)" in err
    assert "fewer throughput_tiles" in err


# ---- empty ATIS files ----------------------------------------------------------------------


def test_empty_atis_file_is_refused_like_every_other_format(tmp_path) -> None:
    for name in ("e.bin", "e.dat", "e.raw", "e.aedat4"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(EventFormatError, match=rf"{name}: byte offset 0: empty file"):
            read_events(tmp_path / name)
    with pytest.raises(EventFormatError, match=r"e\.bin: byte offset 0: empty file"):
        read_events(tmp_path / "e.bin", "atis")
    with pytest.raises(ValueError, match="ATIS .bin cannot store 0 events"):
        write_events(tmp_path / "w.bin", _events([]))
    assert not (tmp_path / "w.bin").exists()


# ---- events out of time order in a file ----------------------------------------------------


def _atis_with_late_event(tmp_path: Path) -> tuple[Path, int]:
    """ATIS file whose event 3 is earlier than event 2; the byte offset of event 3."""
    t = [10, 20, 9_000_000, 9_000_010, 9_000_020]  # 75 overflow markers before event 2
    path = write_events(tmp_path / "flip.bin", _events(t))
    raw = bytearray(path.read_bytes())
    assert len(raw) == 5 * (5 + 75)
    at = 5 * (3 + 75)
    raw[at + 2 : at + 5] = b"\x00\x00\x00"  # event 3's 23-bit time field: 0
    path.write_bytes(bytes(raw))
    return path, at


def test_atis_events_out_of_order_raise_event_format_error_at_the_event(tmp_path) -> None:
    path, at = _atis_with_late_event(tmp_path)
    with pytest.raises(EventFormatError, match="out of time order at index 3") as err:
        read_events(path)
    assert err.value.offset == at and isinstance(err.value, ValueError)
    assert f"flip.bin: byte offset {at}: " in str(err.value) and CLI_HINT in str(err.value)
    # one word per chunk: the order breaks across chunks, same error
    with pytest.raises(EventFormatError, match="out of time order at index 3") as err:
        list(stream_events(path, chunk_bytes=5))
    assert err.value.offset == at
    # sorting within the chunk repairs it when asked
    assert read_events(path, on_unsorted="sort")["t"].tolist()[2] == 614_400


@pytest.mark.parametrize("fmt,suffix,word", [("dat", ".dat", 8), ("evt2", ".raw", 4)])
def test_dat_and_evt2_events_out_of_order_name_the_event_byte_offset(tmp_path, fmt, suffix, word):
    path = write_events(tmp_path / f"x{suffix}", _events([64, 65, 66, 67]), fmt)
    raw = bytearray(path.read_bytes())
    words = 4 if fmt == "dat" else 5  # EVT 2.0: one TIME_HIGH word, then 4 CD words
    start = len(raw) - word * words
    at = start + word * (words - 2)  # event 2
    if fmt == "dat":
        raw[at : at + 4] = (0).to_bytes(4, "little")  # t = 0
    else:
        value = int.from_bytes(raw[at : at + 4], "little") & ~(0x3F << 22)  # t low bits 0
        raw[at : at + 4] = value.to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    with pytest.raises(EventFormatError, match="out of time order at index 2") as err:
        read_events(path, fmt)
    assert err.value.offset == at


def test_order_error_after_dropped_events_numbers_the_input() -> None:
    events = _events([5, 10, 3], x=np.array([9, 1, 1]))  # event 0 is off a 4x4 sensor
    with pytest.raises(ValueError, match="out of time order at index 2: t=3 us after t=10"):
        check_events(events, SensorSize(4, 4), on_invalid="drop")


# ---- repair hints for Python and CLI users ------------------------------------------------


def test_repair_hints_name_the_python_functions_and_say_the_cli_has_none(tmp_path) -> None:
    with pytest.raises(ValueError, match="on_unsorted='sort' to read_events") as err:
        check_events(_events([5, 3]))
    assert CLI_HINT in str(err.value)
    with pytest.raises(ValueError, match="on_invalid='drop' to read_events") as err:
        check_events(_events([1, 2], x=np.array([1, 9])), SensorSize(4, 4))
    assert CLI_HINT in str(err.value)
    (tmp_path / "x.raw").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match=r"suffix of \.dat, \.bin, \.aedat4") as err:
        detect_format(tmp_path / "x.raw")
    assert "pass fmt= one of" in str(err.value) and CLI_HINT in str(err.value)


def test_bench_cli_reports_a_corrupt_atis_recording(tmp_path, capsys) -> None:
    path, at = _atis_with_late_event(tmp_path)
    args = ["--out", str(tmp_path / "eb"), "--config", f"events_file={path}", "seeds=[0]"]
    assert main(["bench", "event.bivision", *args]) == 2
    err = capsys.readouterr().err
    assert f"flip.bin: byte offset {at}: events out of time order at index 3" in err
    assert CLI_HINT in err


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (
            '{"width": 32.9, "height": 32}',
            "width and height must be integers >= 1, got {'width': 32.9}",
        ),
        ('{"width": 32, "height": "32"}', "got {'height': '32'}"),
        ('{"width": 0, "height": true}', "got {'width': 0, 'height': True}"),
        ('{"width": 32}', "needs integer width and height"),
        ("[32, 32]", "needs integer width and height"),
    ],
)
def test_dataset_sensor_takes_whole_positive_sizes_only(tmp_path, config, said) -> None:
    from neuroedge.models.bivision.data import dataset_sensor

    (tmp_path / "config.json").write_text(config)
    with pytest.raises(ValueError, match=re.escape(said)):
        dataset_sensor(tmp_path)
    (tmp_path / "config.json").write_text('{"width": 32, "height": 24}')
    assert (dataset_sensor(tmp_path).width, dataset_sensor(tmp_path).height) == (32, 24)
