"""Recordings as users cut, rename and write them: EVT 3.0 trimmed mid-stream, a file whose
suffix lies about its content, CRLF and bare ``%`` header lines, a 100 ms cut that does not
start on a step, and a crop applied while a long recording is read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from neuroedge.events.core import SensorSize, make_events


def _words(*words: int) -> bytes:
    return np.array(words, "<u2").tobytes()


def test_evt3_events_before_the_first_time_high_are_dropped(tmp_path: Path) -> None:
    """A file cut out of a recording starts mid-period: its first events have no time base
    and read as t = 0 before (118 windows from t = 0 instead of one)."""
    from neuroedge.events.io import read_events

    body = _words(0x0010, 0x2020, 0x2021, 0x8003, 0x6005, 0x0011, 0x2022)  # y, 2 x, TH, TL, y, x
    path = tmp_path / "cut.raw"
    path.write_bytes(b"% evt 3.0\n% end\n" + body)
    events = read_events(path)
    assert events.tolist() == [(3 * 4096 + 5, 34, 17, 0)]


def test_content_decides_the_format_over_the_suffix(tmp_path: Path) -> None:
    from neuroedge.events.io import detect_format, read_events, write_events

    rng = np.random.default_rng(0)
    t = np.sort(rng.integers(0, 50_000, 500))
    events = make_events(
        t, rng.integers(0, 64, 500), rng.integers(0, 48, 500), rng.integers(0, 2, 500)
    )
    sensor = SensorSize(64, 48)
    for fmt, suffix in (("evt3", ".bin"), ("evt2", ".dat"), ("aedat4", ".dat")):
        src = write_events(
            tmp_path / f"a_{fmt}.{'aedat4' if fmt == 'aedat4' else 'raw'}",
            events,
            fmt,
            sensor=sensor,
        )
        renamed = tmp_path / f"renamed_{fmt}{suffix}"
        renamed.write_bytes(Path(src).read_bytes())
        assert detect_format(renamed) == fmt  # was the suffix's codec: garbage or a bad error
        assert np.array_equal(read_events(renamed), read_events(src))


@pytest.mark.parametrize("blank", [b"%\r\n", b"%\n", b"%Created by a tool\r\n"])
def test_any_percent_text_line_is_header(tmp_path: Path, blank: bytes) -> None:
    from neuroedge.events.io import read_events

    path = tmp_path / "h.raw"
    path.write_bytes(
        b"% evt 3.0\r\n" + blank + b"% end\r\n" + _words(0x8001, 0x6005, 0x0010, 0x2020)
    )
    assert read_events(path).tolist() == [(4096 + 5, 32, 16, 0)]  # no event made of header text


def test_a_binary_percent_byte_after_the_header_is_data() -> None:
    from neuroedge.events.core import read_header

    body = _words(0x8025, 0x8001)  # a first byte of 0x25 ('%'), then no text up to a newline
    fields, pos = read_header("x.raw", b"% evt 3.0\n" + body)
    assert fields == {"evt": "3.0"} and pos == len(b"% evt 3.0\n")


def test_a_100ms_cut_off_the_step_grid_keeps_every_event() -> None:
    from neuroedge.models.bivision.data import represent

    rng = np.random.default_rng(0)
    t = np.sort(np.concatenate([[19_999], rng.integers(20_000, 119_999, 1999)]))
    events = make_events(
        t, rng.integers(0, 32, 2000), rng.integers(0, 32, 2000), rng.integers(0, 2, 2000)
    )
    x = represent(events, SensorSize(32, 32), "histogram")
    assert round(float(np.expm1(x).sum())) == 2000  # 1,581 before: the last 21 ms were dropped


@pytest.mark.parametrize("chunk_bytes", [1 << 22, 4096])
def test_the_crop_applied_while_reading_gives_the_same_windows(
    tmp_path: Path, monkeypatch, chunk_bytes: int
) -> None:
    """Windows are represented as the recording is read (a few KB at a time here): the
    same array as representing the whole cut at once."""
    from neuroedge.models.bivision import recording

    monkeypatch.setattr(recording, "CHUNK_BYTES", chunk_bytes)
    from neuroedge.events.io import read_events, write_events
    from neuroedge.models.bivision.data import represent_windows
    from neuroedge.models.bivision.e2s import E2SParams
    from neuroedge.models.bivision.recording import crop_and_scale, recording_inputs

    rng = np.random.default_rng(1)
    n, sensor = 200_000, SensorSize(320, 240)
    t = np.sort(rng.integers(0, 1_000_000, n))
    events = make_events(t, rng.integers(0, 320, n), rng.integers(0, 240, n), rng.integers(0, 2, n))
    path = write_events(tmp_path / "long.raw", events, "evt3", sensor=sensor)
    inputs, line = recording_inputs(path, {"untrained": True}, crop=(40, 20, 200), max_windows=6)
    assert "from the header" in line
    read = read_events(path)
    read = read[read["t"] < 600_000]
    want = represent_windows(
        crop_and_scale(read, (40, 20, 200), 32),
        SensorSize(32, 32),
        "e2s",
        E2SParams(),
        span_us=(0, 599_999),
    )
    assert np.array_equal(inputs["x"], want)


def test_a_version_1_dat_header_is_followed_by_type_and_size_bytes(tmp_path: Path) -> None:
    """Prophesee's dat_events_tools (and expelliarmus) read the event type and size bytes
    after any DAT header; a % Version 1 file was read 2 bytes off ("truncated")."""
    from neuroedge.events.io import read_events

    words = np.zeros((50, 2), "<u4")
    words[:, 0] = 100 + 50 * np.arange(50)
    words[:, 1] = (np.arange(50) % 30) | ((np.arange(50) % 20) << 14) | ((np.arange(50) % 2) << 28)
    header = b"% Data file containing Event2d events.\n% Version 1\n% Width 304\n% Height 240\n"
    path = tmp_path / "v1.dat"
    path.write_bytes(header + bytes([0, 8]) + words.tobytes())
    events = read_events(path)
    assert len(events) == 50 and events[1].tolist() == (150, 1, 1, 1)


def test_a_header_comment_with_non_ascii_text_stays_header(tmp_path: Path) -> None:
    from neuroedge.events.io import read_events

    path = tmp_path / "c.raw"
    header = "% evt 3.0\n% comment café, 東京\n% end\n".encode()
    path.write_bytes(header + _words(0x8001, 0x6005, 0x0010, 0x2020))
    assert read_events(path).tolist() == [(4096 + 5, 32, 16, 0)]
