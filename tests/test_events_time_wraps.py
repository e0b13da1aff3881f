"""Time counters that wrap (EVT 2.0 28-bit TIME_HIGH loops, EVT 3.0 24-bit time base) and the
decoder state carried between chunks: a chunked decode equals one decode at every split."""

from __future__ import annotations

import numpy as np
from neuroedge.events import SensorSize, make_events
from neuroedge.events.codecs import CODECS
from neuroedge.events.evt3 import decode_words, new_state
from neuroedge.events.io import read_events, stream_events, write_events

LOOP = 1 << 34  # the EVT 2.0 time base loops every 2**34 us
MAX_HIGH = (1 << 28) - 1


def _th2(high: int) -> int:
    return (0x8 << 28) | high


def _cd2(p: int, low: int, x: int, y: int) -> int:
    return (p << 28) | (low << 22) | (x << 11) | y


def test_evt2_time_high_loop_is_the_openeb_rule(tmp_path):
    """A drop of at least 2**28 - 11 (MaxTimestampBase - (10 << 6) us) is a loop, +2**34 us."""
    words = [_th2(MAX_HIGH), _cd2(1, 63, 10, 10), _th2(0), _cd2(0, 1, 11, 10)]
    (tmp_path / "loop.raw").write_bytes(b"% evt 2.0\n% end\n" + np.array(words, "<u4").tobytes())
    assert read_events(tmp_path / "loop.raw")["t"].tolist() == [LOOP - 1, LOOP + 1]


def _evt2_words() -> tuple[list[int], list[int]]:
    """Words crossing loops and near-loops, and the times they decode to."""
    words = [_cd2(1, 9, 1, 1), 0xE << 28]  # a CD word before any time base: dropped
    words += [_th2(MAX_HIGH - 10), _cd2(1, 63, 2, 1)]
    words += [_th2(0), _cd2(0, 1, 3, 1)]  # drop of exactly 2**28 - 11: a loop
    words += [_th2(MAX_HIGH), _cd2(0, 2, 4, 1)]
    words += [_th2(11), _cd2(1, 3, 5, 1)]  # drop of 2**28 - 12: not a loop (an older base)
    words += [_th2(MAX_HIGH), _cd2(1, 4, 6, 1), _th2(10), _cd2(0, 5, 7, 1)]  # loop 2
    t = [(MAX_HIGH - 10) * 64 + 63, LOOP + 1, LOOP + MAX_HIGH * 64 + 2, LOOP + 11 * 64 + 3]
    t += [LOOP + MAX_HIGH * 64 + 4, 2 * LOOP + 10 * 64 + 5]
    return words, t


def _decode_in_chunks(codec_name: str, body: bytes, chunk: int) -> np.ndarray:
    codec = CODECS[codec_name]
    state, parts = codec.new_state(), []
    for at in range(0, len(body), chunk):
        parts.append(codec.decode(body[at : at + chunk], state, at, "x.raw"))
    return np.concatenate(parts)


def test_evt2_loops_decode_alike_whole_and_in_every_chunk_size():
    words, t = _evt2_words()
    body = np.array(words, "<u4").tobytes()
    whole = _decode_in_chunks("evt2", body, len(body))
    assert whole["t"].tolist() == t
    for chunk in range(4, len(body), 4):
        np.testing.assert_array_equal(_decode_in_chunks("evt2", body, chunk), whole)


def test_evt2_writes_times_beyond_2_34_us_and_streams_them_in_every_chunk_size(tmp_path):
    t = np.array([0, 5, LOOP - 1, LOOP, LOOP + 65, 3 * LOOP + 7, 10 * LOOP + (1 << 33)])
    events = make_events(t, t % 300, (t // 7) % 200, t % 2)
    out = write_events(tmp_path / "long.raw", events, "evt2", sensor=SensorSize(300, 200))
    words = np.fromfile(out, "<u4", offset=out.read_bytes().index(b"% end\n") + 6)
    # a TIME_HIGH per change of t >> 6 (6 of 7 events), and a (max, 0) pair per loop crossed
    assert ((words >> 28) == 0x8).sum() == 6 + 2 * 10
    whole = read_events(out, "evt2")
    np.testing.assert_array_equal(whole, events)
    for chunk in range(1, out.stat().st_size + 4):
        np.testing.assert_array_equal(
            np.concatenate(list(stream_events(out, chunk_bytes=chunk))), whole
        )


# EVT 3.0 words: every slot of the decoder state is used by a word after some split
EVT3_WORDS = [0x8000 | 4093, 0x6000 | 7, 0x0001, 0x2001]  # TIME_HIGH, TIME_LOW, ADDR_Y, ADDR_X
EVT3_WORDS += [0x3000 | 1 << 11 | 5, 0x4000 | 0b101]  # VECT_BASE_X (x 5, pol 1), VECT_12
EVT3_WORDS += [0x8000 | 2, 0x2002, 0x5000 | 0b11]  # a 24-bit wrap, ADDR_X, VECT_8 (x 17)
EVT3_WORDS += [0x8003, 0x6000 | 100, 0x0005, 0x2001, 0x8003, 0x2002]  # TIME_HIGH re-sent
T0, T1, T2 = 4093 * 4096 + 7, (1 << 24) + 2 * 4096 + 7, (1 << 24) + 3 * 4096 + 100
EVT3_EVENTS = [(T0, 1, 1, 0), (T0, 5, 1, 1), (T0, 7, 1, 1), (T1, 2, 1, 0), (T1, 17, 1, 1)]
EVT3_EVENTS += [(T1, 18, 1, 1), (T2, 1, 5, 0), (T2, 2, 5, 0)]


def test_evt3_state_carried_at_every_split_and_chunk_size():
    words = np.array(EVT3_WORDS, np.uint16)
    whole, bad = decode_words(words, new_state())
    assert bad == -1 and whole.tolist() == EVT3_EVENTS
    for chunk in range(1, len(words)):
        state = new_state()
        parts = [
            decode_words(words[at : at + chunk], state)[0] for at in range(0, len(words), chunk)
        ]
        np.testing.assert_array_equal(np.concatenate(parts), whole)
    for split in range(1, len(words)):  # two parts: the later one relies on the carried state
        state = new_state()
        first, second = decode_words(words[:split], state)[0], decode_words(words[split:], state)[0]
        np.testing.assert_array_equal(np.concatenate([first, second]), whole)
