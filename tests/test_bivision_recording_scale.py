"""event.bivision's recording input at scale: memory held while a recording is read (the batch
once, a chunk of events, never the recording), the batch's byte budget refused up front, and
reading that stops once the windows asked for are complete."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from neuroedge.cli import main
from neuroedge.errors import InputError
from neuroedge.events.core import EVENT_DTYPE, EventFormatError, SensorSize, make_events
from neuroedge.events.io import write_events
from neuroedge.models.bivision import recording
from neuroedge.models.bivision.e2s import E2SParams
from neuroedge.models.bivision.recording import check_window_bytes, recording_inputs

NAME = "event.bivision"


def _events(n: int, span_us: int, width: int, height: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, span_us, n))
    return make_events(t, rng.integers(0, width, n), rng.integers(0, height, n), t % 2)


def _peak(call):
    """(result, peak bytes traced by tracemalloc during ``call()``); imports and numba warmed
    by the caller first."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_sparse_recordings_batch_is_held_once(tmp_path, monkeypatch) -> None:
    # 300 windows of 20 events: the batch (12 MB) was built block by block, then concatenated
    windows = 300
    events = _events(20 * windows, windows * 100_000, 64, 64)
    path = write_events(tmp_path / "long.raw", events, "evt3", sensor=SensorSize(64, 64))
    monkeypatch.setattr(recording, "CHUNK_BYTES", 1 << 16)
    recording_inputs(path, {"smoke": True}, max_windows=2)  # imports, kernels
    got, peak = _peak(lambda: recording_inputs(path, {"smoke": True}, max_windows=windows))
    x = got[0]["x"]
    assert x.shape == (5, windows, 2, 32, 32) and x.flags.c_contiguous
    assert peak < 1.1 * x.nbytes, (peak, x.nbytes)  # was 2x
    # fewer windows than asked for: trimmed in place, the same as a batch of just those
    fewer = recording_inputs(path, {"smoke": True}, max_windows=windows + 50)[0]["x"]
    assert fewer.flags.c_contiguous and fewer.base.nbytes == fewer.nbytes  # tail given back
    np.testing.assert_array_equal(fewer, x)


def test_a_recording_without_a_sensor_is_read_twice_not_held(tmp_path, monkeypatch) -> None:
    # a DAT without a size: the default crop needs the events' extent; all chunks were kept,
    # concatenated and cropped (5x the events) before the first window was made
    n, cfg = 400_000, {"smoke": True, "size": 16}
    events = _events(n, 2_000_000, 304, 240, seed=1)
    path = write_events(tmp_path / "nosize.dat", events, "dat")
    monkeypatch.setattr(recording, "CHUNK_BYTES", 1 << 16)
    recording_inputs(path, cfg, max_windows=2)  # imports, kernels
    (inputs, line), peak = _peak(lambda: recording_inputs(path, cfg, max_windows=21))
    assert peak < 0.4 * n * EVENT_DTYPE.itemsize, peak  # was over 5x
    assert "sensor 304x240 (the extent of the events read" in line
    assert "crop x0=32 y0=0 side=240" in line and "400,000 events read" in line
    given = recording_inputs(path, cfg, crop=(32, 0, 240), max_windows=21)[0]
    assert inputs["x"].shape == (5, 20, 2, 16, 16)
    np.testing.assert_array_equal(inputs["x"], given["x"])  # the one-pass path's windows


def test_reading_stops_once_the_windows_are_complete(tmp_path, monkeypatch) -> None:
    # a corrupt word (time going back) long after the first window: never reached with
    # max_windows=1 (a reader that went on would raise)
    events = _events(400, 400_000, 64, 64, seed=2)
    path = write_events(tmp_path / "rec.dat", events, "dat", sensor=SensorSize(64, 64))
    back = events[-1:].copy()
    back["t"] = 5
    word = write_events(tmp_path / "one.dat", back, "dat", sensor=SensorSize(64, 64))
    with open(path, "ab") as fh:
        fh.write(word.read_bytes()[-8:])
    monkeypatch.setattr(recording, "CHUNK_BYTES", 64)  # 8 events a chunk
    inputs, line = recording_inputs(path, {"smoke": True}, max_windows=1)
    assert inputs["x"].shape[1] == 1 and "the recording goes on past them" in line
    with pytest.raises(
        EventFormatError, match="out of time order at index 400"
    ):  # the word is corrupt indeed
        recording_inputs(path, {"smoke": True})


def test_a_batch_over_the_byte_budget_is_refused_before_reading(tmp_path, capsys) -> None:
    # 32x32 net: 40,960 bytes a window; 200,000 windows were accepted (2**30 values), and
    # a short recording ran; a long one would have held 8 GiB, then 16 GiB to concatenate
    path = write_events(
        tmp_path / "r.dat", _events(50, 9_000, 8, 8), "dat", sensor=SensorSize(8, 8)
    )
    args = ["run", NAME, "--config", "smoke=true", "--events", str(path), "--repeats", "2"]
    assert main([*args, "--max-windows", "200000"]) == 2
    captured = capsys.readouterr()
    assert "--max-windows 200000: 200000 windows of 100 ms for a 32x32 net" in captured.err
    assert "(MAX_WINDOW_BYTES) are allowed: give --max-windows 104857 or fewer" in captured.err
    assert "events " not in captured.out  # refused before the recording was read
    check_window_bytes(104_857, 32, E2SParams())
    with pytest.raises(InputError, match="the default 2: 2 windows .* net of smaller side"):
        check_window_bytes(2, 20_000, E2SParams(), given=False)
