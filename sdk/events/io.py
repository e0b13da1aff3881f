"""Read, stream and write event files: ``.dat``, EVT 2.0/3.0 ``.raw``, ATIS ``.bin``, ``.aedat4``.

``stream_events`` reads a file in chunks of ``chunk_bytes`` (rounded down to whole words), so
memory stays bounded by the chunk whatever the file size; AEDAT 4 files are read packet by
packet (memory bounded by one packet, yielded in chunks of at most ``chunk_bytes // 16``
events). ``read_events`` is one stream concatenated. Every chunk is validated like a whole
file: time order across chunk boundaries, negative timestamps, and coordinates outside the
sensor (taken from the header when it states one, or passed in) are errors unless an explicit
repair option is given. Events out of time order in a file and an empty (0-byte) file raise
``EventFormatError`` (a ``ValueError``) naming the byte offset: of the event itself where the
format has a word per event (DAT, EVT 2.0, ATIS), else of its chunk or AEDAT 4 packet.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from neuroedge.atomic import atomic_path
from neuroedge.events import aedat4
from neuroedge.events.codecs import CODECS, Codec, encode_pieces
from neuroedge.events.core import (
    EVENT_DTYPE,
    EventFormatError,
    SensorSize,
    SORT_HINT,
    UnsortedEventsError,
    as_events,
    check_events,
    read_header,
)

FORMATS = (*CODECS, "aedat4")
SUFFIXES = {".dat": "dat", ".bin": "atis", ".aedat4": "aedat4"}
PACKET_NOTE = " (an event of the AEDAT 4 packet at that offset)"
ENCODE_EVENTS = 1 << 18  # events encoded at a time by write_events (not AEDAT 4)
# (chunk byte offset, decoded events, byte offset of decoded event i and how exact it is)
Chunk = tuple[int, np.ndarray, Callable[[int], tuple[int, str]]]


def detect_format(path: str | os.PathLike[str]) -> str:
    """``dat``, ``evt2``, ``evt3``, ``atis`` or ``aedat4`` from the content, else the suffix.

    The file's own marks come first: ``#!AER-DAT4.0`` (AEDAT 4), ``% evt 3.0`` / ``% format
    EVT3`` (Prophesee RAW), ``% Data file containing ...`` or ``% Version`` (Prophesee DAT); a
    renamed file (an EVT 3.0 recording saved as .bin) is read as what it is, not decoded by
    the suffix's codec into garbage. Without such a mark, the suffix: .dat, .bin (ATIS, which
    has no header), .aedat4, in any case.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such event file")
    if aedat4.is_aedat4(path):
        return "aedat4"
    fields, _ = read_header(path)
    _refuse_evt21(path, fields)
    version = fields.get("evt", "")
    fmt = fields.get("format", "").split(";")[0].upper()
    if version.startswith("3") or fmt == "EVT3":
        return "evt3"
    if version.startswith("2") or fmt == "EVT2":
        return "evt2"
    if fields.get("Data", "").startswith("file containing") or "Version" in fields:
        return "dat"  # Prophesee DAT: "% Data file containing ... Event2d events.", "% Version 2"
    if path.suffix.lower() in SUFFIXES:  # N-CARS ships .DAT
        return SUFFIXES[path.suffix.lower()]
    raise ValueError(
        f"{path}: cannot tell the event format (suffix {path.suffix!r}, header "
        f"{fields}); give the file a suffix of {', '.join(SUFFIXES)} or a Prophesee header, or "
        f"pass fmt= one of {FORMATS} to read_events / stream_events (Python only: the CLI has "
        "no such option)"
    )


def _refuse_evt21(path: Path, fields: dict[str, str]) -> None:
    """EVT 2.1 (64-bit words, 32-pixel vectors) shares EVT 2.0's ``% evt 2.x`` header but not
    its words: decoding it as EVT 2.0 gives wrong events without an error."""
    version = fields.get("evt", "").strip()
    fmt = fields.get("format", "").split(";")[0].strip().upper()
    if version.startswith("2.1") or fmt == "EVT21":
        raise EventFormatError(
            path,
            0,
            f"EVT 2.1 (header evt {version!r}, format {fmt!r}) is not supported; "
            "read it with Prophesee's tools or convert it to EVT 2.0 / EVT 3.0",
        )


def header_sensor(fields: dict[str, str]) -> SensorSize | None:
    """Sensor size stated by a header (``% Width``/``% Height`` or ``% format ...;width=``)."""
    values = {k.lower(): v for k, v in fields.items()}
    for item in values.get("format", "").split(";")[1:]:
        key, _, value = item.partition("=")
        values[key.strip().lower()] = value
    try:
        return SensorSize(int(values["width"]), int(values["height"]))
    except (KeyError, ValueError):
        return None


# Prophesee camera plugins -> the sensor they drive, for RAW headers that name the plugin but
# state no width/height (firmware of 2020, e.g. the shared EVT 2.0 and 3.0 samples). A guess,
# not a statement: readers never validate events against it. ``gen3`` also drove Gen3 ATIS
# sensors (480x360); a VGA guess is the larger one, so no event of either lies outside it.
PLUGIN_SENSORS = (
    ("gen41", SensorSize(1280, 720)),  # Gen4.1 HD (EVK3/EVK4)
    ("imx636", SensorSize(1280, 720)),  # Sony IMX636 (Gen4.1 stacked)
    ("genx320", SensorSize(320, 320)),
    ("gen31", SensorSize(640, 480)),  # Gen3.1 VGA
    ("gen3", SensorSize(640, 480)),  # Gen3 VGA (CD); Gen3 ATIS is 480x360
)


def plugin_sensor(path: str | os.PathLike[str]) -> tuple[SensorSize, str] | None:
    """(sensor, plugin name) a Prophesee RAW/DAT header implies by its ``plugin_name``
    (``PLUGIN_SENSORS``), or None."""
    path = Path(path)
    if detect_format(path) in ("aedat4", "atis"):
        return None
    fields = {k.lower(): v for k, v in read_header(path)[0].items()}
    plugin = fields.get("plugin_name", "").strip()
    found = [size for key, size in PLUGIN_SENSORS if f"_{key}_" in f"_{plugin.lower()}_"]
    return (found[0], plugin) if found else None


def _body_start(path: Path, codec: Codec) -> int:
    if codec.name == "atis":
        return 0
    fields, start = read_header(path)
    if codec.name == "evt2":
        _refuse_evt21(path, fields)
    # a DAT header (any Version) is followed by the event type and size bytes, as Prophesee's
    # dat_events_tools and expelliarmus read it; only a file without header lacks them
    if codec.name == "dat" and start > 0:
        with open(path, "rb") as fh:  # two bytes, not the whole file
            fh.seek(start)
            head = fh.read(2)
        if len(head) < 2:
            raise EventFormatError(path, start, "DAT file ends before its event type/size bytes")
        if head[1] != 8:
            raise EventFormatError(
                path,
                start + 1,
                f"DAT event size {head[1]} (expected 8): not a CD event file or corrupt header",
            )
        start += 2
    return start


def _locator(codec: Codec, body: bytes, offset: int, n: int) -> Callable[[int], tuple[int, str]]:
    """``i -> (byte offset, note)`` of decoded event i of a chunk; the chunk's offset and a
    note saying so when the format has no word per event."""
    if codec.locate is None:
        return lambda i: (offset, f" (an event of the {codec.name} chunk at that offset)")
    return lambda i: (offset + codec.locate(body, i, n), "")


def _word_chunks(path: Path, codec: Codec, chunk_bytes: int) -> Iterator[Chunk]:
    """``(byte offset, decoded events, locator)`` of whole-word chunks of a word-based file."""
    step = max(codec.word_bytes, chunk_bytes // codec.word_bytes * codec.word_bytes)
    offset, state = _body_start(path, codec), codec.new_state()
    size = path.stat().st_size
    with open(path, "rb") as fh:
        fh.seek(offset)
        while offset < size:
            body = fh.read(step)
            usable = len(body) // codec.word_bytes * codec.word_bytes
            if usable < len(body):
                raise EventFormatError(
                    path,
                    offset + usable,
                    f"truncated: {len(body) - usable} "
                    f"trailing bytes do not make a whole {codec.word_bytes}"
                    f"-byte {codec.name} word",
                )
            decoded = codec.decode(body, state, offset, str(path))
            yield offset, decoded, _locator(codec, body, offset, len(decoded))
            offset += len(body)


def _aedat4_chunks(
    path: Path, header: aedat4.AedatHeader, stream: aedat4.AedatStream, chunk_bytes: int
) -> Iterator[Chunk]:
    """``(packet byte offset, events, locator)``, a packet split into chunks of
    ``chunk_bytes // 16``."""
    step = max(1, chunk_bytes // aedat4.EVENT_STRUCT.itemsize)
    for offset, events in aedat4.event_packets(path, header, stream):
        for start in range(0, max(len(events), 1), step):
            yield offset, events[start : start + step], lambda i, o=offset: (o, PACKET_NOTE)


def _checked(
    path: Path,
    chunks: Iterator[Chunk],
    sensor: SensorSize | None,
    on_unsorted: str,
    on_invalid: str,
) -> Iterator[np.ndarray]:
    """``check_events`` on each chunk and time order across chunks; events out of time order
    raise EventFormatError at the event's byte offset (``_locator``)."""
    last_t, count = -1, 0
    for offset, decoded, locate in chunks:
        try:
            check = check_events(
                decoded,
                sensor,
                on_unsorted=on_unsorted,
                on_invalid=on_invalid,
                first_index=count,
                source=f"{path} (chunk at byte offset {offset}): ",
            )
        except UnsortedEventsError as err:
            at, note = locate(err.index - count)
            raise _unsorted(path, at, note, err.index, err.t, err.t_before, True) from err
        events = check.events
        if len(events) and events["t"][0] < last_t:
            k = _position(decoded, events[0])  # sorting or dropping may have moved it
            at, note = locate(k)
            raise _unsorted(path, at, note, count + k, int(events["t"][0]), last_t, False)
        count += len(decoded)
        last_t = int(events["t"][-1]) if len(events) else last_t
        yield events


def _position(decoded: np.ndarray, event: np.void) -> int:
    """Index of the first decoded event equal to ``event``."""
    same = np.ones(len(decoded), bool)
    for name in EVENT_DTYPE.names:
        same &= decoded[name] == event[name]
    return int(np.flatnonzero(same)[0])


def _unsorted(
    path: Path, at: int, note: str, index: int, t: int, before: int, sortable: bool
) -> EventFormatError:
    hint = f"; or an unsorted recording: {SORT_HINT}" if sortable else ""
    return EventFormatError(
        path,
        at,
        f"events out of time order at index {index}{note}: t={t} us after t={before} us "
        f"(corrupt data{hint})",
    )


def recording_sensor(
    path: str | os.PathLike[str], fmt: str | None = None, stream_id: int | None = None
) -> SensorSize | None:
    """The sensor a recording's header states (an AEDAT 4 event stream's ``info`` node, a
    DAT/EVT header's width and height), or None (ATIS ``.bin`` files state none; see
    ``plugin_sensor`` for a Prophesee header that only names its camera plugin)."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt == "aedat4":
        return aedat4.event_stream(path, aedat4.read_header(path), stream_id).sensor
    return header_sensor(read_header(path)[0]) if fmt in CODECS and fmt != "atis" else None


def stream_events(
    path: str | os.PathLike[str],
    fmt: str | None = None,
    *,
    chunk_bytes: int = 1 << 22,
    sensor: SensorSize | None = None,
    on_unsorted: str = "raise",
    on_invalid: str = "raise",
    stream_id: int | None = None,
) -> Iterator[np.ndarray]:
    """Yield the events of ``path`` chunk by chunk (bounded memory).

    Raises ``EventFormatError`` (with the byte offset) for an empty file, corrupt words,
    truncated files and events out of time order, ``ValueError`` for invalid events unless
    ``on_invalid="drop"``; ``on_unsorted="sort"`` sorts within a chunk only (a chunk earlier
    than its predecessor still raises). ``stream_id`` picks the event stream of an AEDAT 4 file
    (default: the lowest-id ``EVTS`` stream).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such event file")
    if path.stat().st_size == 0:
        raise EventFormatError(path, 0, "empty file (0 bytes): no header and no events")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise ValueError(f"{path}: event format {fmt!r} is not one of {FORMATS}")
    if stream_id is not None and fmt != "aedat4":
        raise ValueError(f"{path}: stream_id={stream_id} applies to aedat4 files only, not {fmt}")
    if fmt == "aedat4":  # the header read once: its stream states the sensor
        header = aedat4.read_header(path)
        stream = aedat4.event_stream(path, header, stream_id)
        sensor = sensor or stream.sensor
        chunks = _aedat4_chunks(path, header, stream, chunk_bytes)
    else:
        sensor = sensor or recording_sensor(path, fmt)
        chunks = _word_chunks(path, CODECS[fmt], chunk_bytes)
    yield from _checked(path, chunks, sensor, on_unsorted, on_invalid)


def read_events(
    path: str | os.PathLike[str],
    fmt: str | None = None,
    *,
    sensor: SensorSize | None = None,
    on_unsorted: str = "raise",
    on_invalid: str = "raise",
    stream_id: int | None = None,
) -> np.ndarray:
    """All events of ``path`` as an ``EVENT_DTYPE`` array (see ``stream_events``)."""
    chunks = list(
        stream_events(
            path,
            fmt,
            sensor=sensor,
            on_unsorted=on_unsorted,
            on_invalid=on_invalid,
            stream_id=stream_id,
        )
    )
    return np.concatenate(chunks) if chunks else np.empty(0, EVENT_DTYPE)


def write_events(
    path: str | os.PathLike[str],
    events: np.ndarray,
    fmt: str | None = None,
    *,
    sensor: SensorSize | None = None,
) -> Path:
    """Write ``events`` (validated: sorted, t >= 0, on the sensor) atomically in ``fmt``.

    AEDAT 4 files get one LZ4-compressed event stream and need ``sensor`` (see
    ``neuroedge.events.aedat4.encode``).
    """
    path = Path(path)
    fmt = fmt or SUFFIXES.get(path.suffix.lower())
    if fmt not in FORMATS:
        raise ValueError(f"{path}: format {fmt!r} is not one of {FORMATS} (pass fmt=)")
    events = check_events(as_events(events), sensor).events
    if fmt == "aedat4":
        data = aedat4.encode(events, sensor)
        with atomic_path(path) as tmp:
            tmp.write_bytes(data)
        return path
    codec = CODECS[fmt]
    header = codec.header(sensor)
    codec.check(events)  # refused before the file is touched
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(header)
        for piece in encode_pieces(codec, events, ENCODE_EVENTS):
            fh.write(piece)
    return path
