"""Event file readers against real recordings (shared test data), writers by round trip, and
bad input (truncation, corruption, order, negative times, off-sensor coordinates)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from neuroedge.events import EVENT_DTYPE, EventFormatError, SensorSize, check_events, make_events
from neuroedge.events import evt3
from neuroedge.events.datasets import BOX_DTYPE, read_boxes, write_boxes
from neuroedge.events.io import detect_format, read_events, stream_events, write_events

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "events"


@pytest.fixture(scope="module")
def data() -> Path:
    if not (DATA / "README.md").is_file():
        pytest.fail(f"shared event recordings missing at {DATA} (expected <repo>/../shared)")
    return DATA


# file, format, events, t min, t max, x max, y max (from the data README; the EVT 3.0 t max
# is the Rust evt3 0.4.1 decoder's: the README's 11,772,513 is expelliarmus's, which counts
# every TIME_LOW decrease as a 4096 us period, see sdk/events/evt3.py)
REAL = [
    ("evt2_sample.raw", "evt2", 539_481, 1_317_888, 1_367_888, 599, 475),
    ("evt3_sample.raw", "evt3", 219_596, 11_718_656, 11_727_457, None, None),
    ("ncars_sample.dat", "dat", 2_009, 0, 99_952, 77, 41),
    ("nmnist_sample.bin", "atis", 4_325, 654, 311_175, 33, 33),
]


@pytest.mark.parametrize("name,fmt,count,t0,t1,xmax,ymax", REAL)
def test_real_recording_decodes_to_published_counts(data, name, fmt, count, t0, t1, xmax, ymax):
    events = read_events(data / name)
    assert detect_format(data / name) == fmt
    assert events.dtype == EVENT_DTYPE and len(events) == count
    assert (events["t"][0], events["t"][-1]) == (t0, t1)
    if xmax is not None:
        assert (events["x"].max(), events["y"].max()) == (xmax, ymax)
    assert set(np.unique(events["p"])) == {0, 1}


def _evt3_reader(path: Path) -> dict[str, np.ndarray]:
    """The Rust evt3 0.4.1 decoder's events (installed by the set-up; an independent reader)."""
    import evt3

    theirs = evt3.decode_file(str(path))
    return {f: np.asarray(getattr(theirs, a)) for f, a in zip("txyp", ("t", "x", "y", "p"))}


def test_evt3_decode_equals_the_evt3_reader(data):
    events = read_events(data / "evt3_sample.raw")
    theirs = _evt3_reader(data / "evt3_sample.raw")
    for field in "txyp":
        np.testing.assert_array_equal(events[field].astype(np.int64), theirs[field])


def test_evt3_reference_decode_differs_only_by_counted_time_low_drops(data):
    """The shared expected.npy (expelliarmus) has the same x, y, p; its t adds 4096 us at each
    of the file's 11 TIME_LOW decreases (2 real period steps counted twice, 9 re-sent bases)."""
    expected = np.load(data / "evt3_sample.expected.npy")
    events = read_events(data / "evt3_sample.raw")
    for field in "xyp":
        np.testing.assert_array_equal(events[field], expected[field])
    extra = expected["t"] - events["t"]
    assert (np.diff(extra) >= 0).all()
    np.testing.assert_array_equal(np.unique(extra), 4096 * np.arange(12))


def test_evt3_time_is_high_and_low_bits_of_one_time_base(tmp_path):
    words = [0x8000, 0x6000 | 4000, 0x0005, 0x2007]  # t = 4000
    words += [0x8001, 0x6000 | 10, 0x2008]  # TIME_HIGH 1, TIME_LOW 10: t = 4096 + 10
    words += [0x8005, 0x8001, 0x8005, 0x6000, 0x2009]  # a small TIME_HIGH drop: no wrap
    words += [0x8FFF, 0x6000, 0x200A, 0x8000, 0x6000 | 1, 0x200B]  # 24-bit counter wraps
    (tmp_path / "t.raw").write_bytes(b"% evt 3.0\n% end\n" + np.array(words, "<u2").tobytes())
    t = read_events(tmp_path / "t.raw")["t"].tolist()
    assert t == [4000, 4106, 5 << 12, 4095 << 12, (1 << 24) + 1]
    # OpenEB's wrap rule (evt3.WRAP_DROP): a drop of at least 4085 periods wraps, a smaller not
    for highs, expected in [
        ((4093, 2), [4093 * 4096 + 7, (1 << 24) + 2 * 4096 + 7]),  # drop 4091: a wrap
        ((4095, 10), [4095 * 4096 + 7, (1 << 24) + 10 * 4096 + 7]),  # drop 4085: a wrap
        ((4095, 11), [4095 * 4096 + 7, 11 * 4096 + 7]),  # drop 4084: a re-sent older base
        ((3000, 0), [3000 * 4096 + 7, 7]),  # drop 3000: not a wrap
    ]:
        words = [0x8000 | highs[0], 0x6000 | 7, 0x0001, 0x2001, 0x8000 | highs[1], 0x2002]
        events, _ = evt3.decode_words(np.array(words, np.uint16), evt3.new_state())
        assert events["t"].tolist() == expected, highs


@pytest.mark.parametrize("name", [r[0] for r in REAL])
def test_streaming_in_small_chunks_equals_one_read(data, name):
    whole = read_events(data / name)
    chunks = list(stream_events(data / name, chunk_bytes=4099))
    assert len(chunks) > 3
    assert max(len(c) for c in chunks) <= 4099 * 6  # bounded by the chunk (EVT3 vectors: 6/byte)
    np.testing.assert_array_equal(np.concatenate(chunks), whole)


@pytest.mark.parametrize("name", [r[0] for r in REAL])
def test_written_file_reads_back_identically(data, tmp_path, name):
    events = read_events(data / name)
    fmt = detect_format(data / name)
    out = write_events(tmp_path / f"copy{Path(name).suffix}", events, fmt)
    np.testing.assert_array_equal(read_events(out, fmt), events)


def _synthetic_with_gaps() -> np.ndarray:
    t = np.array([0, 3, 3, 4095, 4096, 9000, 70_000, 9_000_000, 9_000_001, 40_000_000])
    return make_events(t, t % 300, (t // 7) % 200, t % 2)


@pytest.mark.parametrize(
    "fmt,suffix", [("evt2", ".raw"), ("evt3", ".raw"), ("dat", ".dat"), ("atis", ".bin")]
)
def test_round_trip_survives_counter_wraps_and_long_gaps(tmp_path, fmt, suffix):
    events = _synthetic_with_gaps()
    out = write_events(tmp_path / f"gaps{suffix}", events, fmt, sensor=SensorSize(300, 200))
    np.testing.assert_array_equal(read_events(out, fmt), events)
    # the wrap / overflow counts carried between chunks (EVT 3.0 high_wraps, ATIS base)
    for chunk in (2, 6, 10, 64):
        chunks = list(stream_events(out, fmt, chunk_bytes=chunk))
        np.testing.assert_array_equal(np.concatenate(chunks), events)


def test_the_evt3_reader_reads_our_files_the_same(tmp_path):
    events = _synthetic_with_gaps()
    theirs = _evt3_reader(write_events(tmp_path / "x.raw", events, "evt3"))
    for field in "txyp":
        np.testing.assert_array_equal(theirs[field], events[field])


@pytest.mark.parametrize("fmt", ["evt2", "dat"])
def test_expelliarmus_reads_our_files_the_same(tmp_path, fmt):
    wizard = pytest.importorskip("expelliarmus").Wizard
    events = _synthetic_with_gaps()
    out = write_events(tmp_path / ("x.raw" if fmt != "dat" else "x.dat"), events, fmt)
    theirs = wizard(encoding=fmt, fpath=str(out)).read()
    for field in "txyp":
        np.testing.assert_array_equal(theirs[field], events[field])


def test_truncated_file_error_names_the_byte_offset(data, tmp_path):
    path = tmp_path / "cut.raw"
    raw = (data / "evt2_sample.raw").read_bytes()
    path.write_bytes(raw[:-3])
    with pytest.raises(EventFormatError, match=r"byte offset \d+: truncated") as err:
        read_events(path)
    assert err.value.offset == len(raw) - 4


def test_corrupt_evt2_word_error_names_its_byte_offset(data, tmp_path):
    raw = bytearray((data / "evt2_sample.raw").read_bytes())
    offset = 164 + 4 * 1000  # header is 164 bytes; corrupt word 1000
    raw[offset + 3] = 0x50  # type nibble 0x5 does not exist in EVT 2.0
    (tmp_path / "bad.raw").write_bytes(bytes(raw))
    with pytest.raises(EventFormatError) as err:
        read_events(tmp_path / "bad.raw")
    assert err.value.offset == offset and "unknown type 0x5" in str(err.value)


def test_corrupt_evt3_and_dat_words_are_reported(data, tmp_path):
    raw = bytearray((data / "evt3_sample.raw").read_bytes())
    raw[166 + 2 * 50 + 1] = 0x10  # type 0x1 is undefined in EVT 3.0
    (tmp_path / "bad.raw").write_bytes(bytes(raw))
    with pytest.raises(EventFormatError, match="byte offset 266"):
        read_events(tmp_path / "bad.raw")
    dat = bytearray((data / "ncars_sample.dat").read_bytes())
    dat[93 + 8 * 5 + 7] = 0x70  # polarity nibble 7
    (tmp_path / "bad.dat").write_bytes(bytes(dat))
    with pytest.raises(EventFormatError, match=r"byte offset 133: DAT event with polarity 7"):
        read_events(tmp_path / "bad.dat")


def test_out_of_order_events_are_rejected_unless_sorting_is_asked():
    events = make_events(np.array([5, 3, 9]), np.zeros(3), np.zeros(3), np.ones(3))
    with pytest.raises(ValueError, match="out of time order at index 1"):
        check_events(events)
    fixed = check_events(events, on_unsorted="sort")
    assert fixed.sorted_by_repair and list(fixed.events["t"]) == [3, 5, 9]


def test_negative_times_and_off_sensor_events_are_rejected_or_dropped_explicitly():
    events = make_events(
        np.array([-1, 2, 4]), np.array([0, 40, 1]), np.array([0, 1, 1]), np.array([0, 1, 1])
    )
    with pytest.raises(ValueError, match="event 0"):
        check_events(events, SensorSize(32, 32))
    kept = check_events(events, SensorSize(32, 32), on_invalid="drop")
    assert kept.dropped == 2 and list(kept.events["t"]) == [4]


def test_writer_refuses_events_off_the_stated_sensor(tmp_path):
    events = make_events(np.array([1, 2]), np.array([3, 64]), np.array([1, 1]), np.array([0, 1]))
    with pytest.raises(ValueError, match="off the sensor"):
        write_events(tmp_path / "x.dat", events, sensor=SensorSize(64, 64))


def test_reader_checks_events_against_the_header_sensor(tmp_path):
    events = make_events(np.array([1, 2]), np.array([3, 50]), np.array([1, 1]), np.array([0, 1]))
    path = write_events(tmp_path / "x.dat", events, sensor=SensorSize(64, 64))
    with pytest.raises(ValueError, match="off the sensor"):
        read_events(path, sensor=SensorSize(40, 40))
    np.testing.assert_array_equal(read_events(path), events)


def test_invalid_event_in_a_later_chunk_is_numbered_from_the_file_start(tmp_path):
    n, bad = 5000, 3210  # .dat words are 8 bytes: 1 KiB chunks hold 128 events
    x = np.full(n, 3)
    x[bad] = 50
    events = make_events(np.arange(n), x, np.ones(n, int), np.zeros(n, int))
    path = write_events(tmp_path / "x.dat", events, sensor=SensorSize(64, 64))
    with pytest.raises(ValueError, match=rf"x\.dat \(chunk at byte offset \d+\): event {bad} "):
        list(stream_events(path, chunk_bytes=1024, sensor=SensorSize(40, 40)))


def test_gen1_boxes_round_trip_and_accept_the_t_field_name(tmp_path):
    boxes = np.zeros(2, BOX_DTYPE)
    boxes[:] = [(100, 1.5, 2, 10, 5, 0, 1.0, 0), (200, 3, 4, 6, 7, 1, 0.5, 1)]
    np.testing.assert_array_equal(read_boxes(write_boxes(tmp_path / "a_bbox.npy", boxes)), boxes)
    renamed = boxes.astype([("t" if n == "ts" else n, boxes.dtype[n]) for n in BOX_DTYPE.names])
    np.save(tmp_path / "b_bbox.npy", renamed)
    np.testing.assert_array_equal(read_boxes(tmp_path / "b_bbox.npy"), boxes)
    np.save(tmp_path / "c_bbox.npy", np.zeros(3, [("ts", "<u8"), ("x", "<f4")]))
    with pytest.raises(EventFormatError, match=r"lacks fields \['y', 'w', 'h', 'class_id'\]"):
        read_boxes(tmp_path / "c_bbox.npy")


def test_unknown_format_is_refused_with_the_valid_ones(tmp_path, data):
    shutil.copy(data / "evt2_sample.raw", tmp_path / "x.raw")
    with pytest.raises(ValueError, match="one of"):
        read_events(tmp_path / "x.raw", fmt="aedat9")


def test_evt21_files_are_refused_not_decoded_as_evt2(tmp_path):
    header = b"% evt 2.1\n% format EVT21;height=480;width=640\n% end\n"
    words = np.array([0x80000064, 0, 0x11420014, 0x0FC00000], "<u4").tobytes()
    (tmp_path / "v21.raw").write_bytes(header + words)
    for fmt in (None, "evt2"):
        with pytest.raises(EventFormatError, match="v21.raw: byte offset 0: EVT 2.1"):
            read_events(tmp_path / "v21.raw", fmt)


def test_upper_case_suffixes_are_recognised(data, tmp_path):
    shutil.copy(data / "ncars_sample.dat", tmp_path / "NCARS.DAT")
    assert detect_format(tmp_path / "NCARS.DAT") == "dat"
    assert len(read_events(tmp_path / "NCARS.DAT")) == 2_009


def test_dat_is_told_by_its_header_and_a_bad_fmt_names_the_file(data, tmp_path):
    shutil.copy(data / "ncars_sample.dat", tmp_path / "renamed.raw")
    assert detect_format(tmp_path / "renamed.raw") == "dat"
    assert len(read_events(tmp_path / "renamed.raw")) == 2_009
    with pytest.raises(ValueError, match="renamed.raw: event format 'bogus' is not one of"):
        read_events(tmp_path / "renamed.raw", "bogus")
