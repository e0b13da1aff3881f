"""write_events encodes DAT, EVT 2.0, EVT 3.0 and ATIS files piece by piece: the same bytes as
one encode of the whole array (pinned: the hashes below are the one-piece encoder's before the
change), with the encoders' temporaries a piece's, not 5-9x the events'."""

from __future__ import annotations

import hashlib
import tracemalloc

import numpy as np
import pytest

from neuroedge.events import io
from neuroedge.events.codecs import CODECS
from neuroedge.events.core import SensorSize, make_events
from neuroedge.events.io import write_events

FORMATS = ("dat", "atis", "evt2", "evt3")
# sha256[:20] of write_events(hard_events(5, loop=...)) by the one-piece encoder
PINNED = {
    ("dat", False): "75bda055e3cabca98b1f",
    ("atis", False): "b2379192a1ad55d883f9",
    ("evt2", False): "872a800a33a7881c50bd",
    ("evt3", False): "d257605b79c2c1c2d299",
    ("evt2", True): "b504c0afe7f257dafeee",
    ("evt3", True): "8a59ec656cb575e772b0",
}


def hard_events(seed: int, n: int = 3000, loop: bool = False) -> np.ndarray:
    """Repeated times and rows, new EVT 3.0 periods, 24-bit wraps, ATIS overflows; with
    ``loop`` a jump over EVT 2.0's 2**34 us loop half way."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.choice([0, 0, 1, 7, 64, 4096, 5000, 1 << 13, 1 << 20], n))
    if loop:
        t[n // 2 :] += (1 << 34) + 3
    return make_events(t, rng.integers(0, 240, n), rng.integers(0, 3, n), rng.integers(0, 2, n))


def _sensor(fmt: str) -> SensorSize | None:
    return None if fmt == "atis" else SensorSize(240, 240)


@pytest.mark.parametrize(("fmt", "loop"), list(PINNED))
def test_pieces_give_the_one_piece_encoders_bytes(tmp_path, monkeypatch, fmt, loop) -> None:
    events = hard_events(5, loop=loop)
    whole = CODECS[fmt].header(_sensor(fmt)) + CODECS[fmt].encode(events)
    for size in (1, 2, 7, 1000, 1 << 18):
        monkeypatch.setattr(io, "ENCODE_EVENTS", size)
        data = write_events(tmp_path / f"{size}.{fmt}", events, fmt, sensor=_sensor(fmt))
        assert data.read_bytes() == whole, size
    assert hashlib.sha256(whole).hexdigest()[:20] == PINNED[fmt, loop]


@pytest.mark.parametrize("seed", range(6))
def test_random_events_in_pieces_read_as_one_encode(tmp_path, monkeypatch, seed) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 400))
    t = np.sort(rng.integers(0, 1 << int(rng.integers(4, 31)), n))
    events = make_events(t, rng.integers(0, 200, n), rng.integers(0, 4, n), rng.integers(0, 2, n))
    monkeypatch.setattr(io, "ENCODE_EVENTS", int(rng.integers(1, 50)))
    for fmt in FORMATS:
        path = write_events(tmp_path / f"r.{fmt}", events, fmt, sensor=_sensor(fmt))
        assert path.read_bytes() == CODECS[fmt].header(_sensor(fmt)) + CODECS[fmt].encode(events)
        np.testing.assert_array_equal(io.read_events(path, fmt), events)


@pytest.mark.parametrize("fmt", FORMATS)
def test_writing_holds_a_piece_not_several_copies_of_the_events(tmp_path, monkeypatch, fmt):
    # traced peaks were 1.23x the events (DAT), 4.7x (ATIS), 6.2x (EVT 2.0), 9x (EVT 3.0);
    # what is left is check_events' pass over the whole array
    rng, n = np.random.default_rng(7), 200_000
    t = np.cumsum(rng.integers(0, 3, n))  # about one event a microsecond
    events = make_events(t, rng.integers(0, 240, n), rng.integers(0, 240, n), t % 2)
    monkeypatch.setattr(io, "ENCODE_EVENTS", 1 << 12, raising=False)
    write_events(tmp_path / "warm", events[:10], fmt, sensor=_sensor(fmt))
    tracemalloc.start()
    try:
        write_events(tmp_path / f"w.{fmt}", events, fmt, sensor=_sensor(fmt))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.15 * events.nbytes, (peak, events.nbytes)  # now 1.08x
