"""iniVation AEDAT 4.0 (DV software; DAVIS and DVXplorer cameras): header, event packets, writer.

Layout (iniVation's AEDAT 4.0 format description; dv-processing ``IOHeader.fbs``,
``events.fbs``):

* ``#!AER-DAT4.0\\r\\n`` (14 bytes), then a size-prefixed FlatBuffer ``IOHeader`` (identifier
  ``IOHE``): ``compression`` (int32: NONE 0, LZ4 1, LZ4_HIGH 2, ZSTD 3, ZSTD_HIGH 4; LZ4 is the
  LZ4 *frame* format), ``dataTablePosition`` (int64 byte offset of the trailing packet index,
  -1 when there is none) and ``infoNode``, DV's XML configuration tree: each child of its
  ``outInfo`` node is a stream (node name = stream id, attribute ``typeIdentifier`` = the
  identifier of its packets, ``EVTS``, ``FRME``, ``IMUS``, ``TRIG``; ``info/sizeX``,
  ``info/sizeY`` = the sensor).
* Packets up to the data table (or the end of the file): int32 stream id, int32 byte size, then
  the packet compressed as the header says, which decompresses to a size-prefixed FlatBuffer.
  An ``EVTS`` packet's root table holds one vector of 16-byte structs ``{int64 timestamp (us);
  int16 x; int16 y; bool on}`` (3 bytes of padding).

Timestamps are kept as stored (DV writes absolute Unix time in microseconds). Only the chosen
event stream is decompressed; the other streams' packets are skipped by seeking, so memory is
bounded by one packet.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from xml.etree import ElementTree

import numpy as np
from neuroedge.events import flatbuffer
from neuroedge.events.aedat4_compression import (
    COMPRESSION_LIBRARIES,  # noqa: F401 (public name, kept importable from here)
    compress,
    decompress,
)
from neuroedge.events.core import EventFormatError, SensorSize, make_events
from neuroedge.events.flatbuffer import FlatbufferError

MAGIC = b"#!AER-DAT4.0\r\n"
COMPRESSIONS = ("NONE", "LZ4", "LZ4_HIGH", "ZSTD", "ZSTD_HIGH")  # IOHeader enum order
EVENT_STRUCT = np.dtype(
    {
        "names": ["t", "x", "y", "on"],
        "formats": ["<i8", "<i2", "<i2", "u1"],
        "offsets": [0, 8, 10, 12],
        "itemsize": 16,
    }
)
PACKET_HEADER = struct.Struct("<ii")  # stream id, byte size of the (compressed) packet
# Largest IOHeader read: its info XML describes a few streams in a few KB (DV's sample: 2.3 KB);
# a larger size prefix is corrupt and is refused before the bytes are read.
MAX_IO_HEADER = 1 << 24


@dataclass(frozen=True)
class AedatStream:
    """One output stream the header's info node declares."""

    stream_id: int  # the id its packets carry
    type_identifier: str  # FlatBuffer identifier of its packets: EVTS, FRME, IMUS, TRIG, ...
    sensor: SensorSize | None  # info/sizeX by info/sizeY, when stated


@dataclass(frozen=True)
class AedatHeader:
    """What the ``IOHeader`` says about the packets that follow it."""

    compression: str  # one of COMPRESSIONS
    data_table_position: int  # byte offset of the packet index; -1 when absent
    streams: tuple[AedatStream, ...]  # sorted by stream id
    body_start: int  # byte offset of the first packet


def is_aedat4(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` starts with the AEDAT 4.0 magic."""
    with open(path, "rb") as fh:
        return fh.read(len(MAGIC)) == MAGIC


def read_header(path: str | os.PathLike[str]) -> AedatHeader:
    """The ``IOHeader`` of ``path``; ``EventFormatError`` names the bad byte offset."""
    at = len(MAGIC)  # file offset of the header's size prefix
    with open(path, "rb") as fh:
        magic = fh.read(at)
        if magic != MAGIC:
            raise EventFormatError(
                path, 0, f"starts with {magic!r}, not the AEDAT 4.0 magic {MAGIC!r}"
            )
        prefix = fh.read(4)
        size = int.from_bytes(prefix, "little")
        left = os.fstat(fh.fileno()).st_size - fh.tell()
        if len(prefix) == 4 and size > MAX_IO_HEADER and size <= left:
            raise EventFormatError(
                path, at, f"IOHeader size {size} is over {MAX_IO_HEADER} bytes: corrupt header"
            )
        body = fh.read(size) if size <= left else b""  # a corrupt size reads nothing
    if len(prefix) < 4 or len(body) < size:
        problem = (
            f"the IOHeader declares {size} bytes, the file holds {left}"
            if len(prefix) == 4
            else "the file ends inside the IOHeader size prefix"
        )
        raise EventFormatError(path, at, f"truncated: {problem}")
    buf = prefix + body
    try:
        root = flatbuffer.size_prefixed_root(buf, b"IOHE")
        code = flatbuffer.scalar(root, 0, "<i", 0)
        table_position = flatbuffer.scalar(root, 1, "<q", -1)
        info = flatbuffer.string(root, 2)
    except FlatbufferError as err:
        raise EventFormatError(path, at + err.offset, f"IOHeader: {err.problem}") from err
    body_start = at + len(buf)
    if not 0 <= code < len(COMPRESSIONS):
        raise EventFormatError(
            path, at, f"IOHeader compression {code} is not one of {dict(enumerate(COMPRESSIONS))}"
        )
    if table_position != -1 and table_position < body_start:
        raise EventFormatError(
            path,
            at,
            f"IOHeader data table position {table_position} lies "
            f"before the first packet (byte offset {body_start})",
        )
    if info is None:
        raise EventFormatError(path, at, "IOHeader has no infoNode: the streams are unknown")
    streams = _parse_streams(path, at + info[0], info[1])
    return AedatHeader(COMPRESSIONS[code], table_position, streams, body_start)


def _attributes(node: ElementTree.Element | None) -> dict[str, str]:
    return {} if node is None else {a.get("key", ""): a.text or "" for a in node.findall("attr")}


def _parse_streams(path: str | os.PathLike[str], at: int, xml: bytes) -> tuple[AedatStream, ...]:
    """The ``outInfo`` children of the info node (XML starting at file offset ``at``)."""
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as err:
        raise EventFormatError(path, at, f"IOHeader infoNode is not XML: {err}") from err
    out_info = root.find("node[@name='outInfo']")
    if out_info is None:
        raise EventFormatError(
            path, at, "IOHeader infoNode has no outInfo node listing the streams"
        )
    streams = []
    for node in out_info.findall("node"):
        name, attrs = node.get("name", ""), _attributes(node)
        info = _attributes(node.find("node[@name='info']"))
        if not (name.isascii() and name.isdigit()) or "typeIdentifier" not in attrs:
            raise EventFormatError(
                path, at, f"infoNode stream {name!r} has no numeric id or no typeIdentifier"
            )
        try:
            sensor = (
                SensorSize(int(info["sizeX"]), int(info["sizeY"]))
                if "sizeX" in info and "sizeY" in info
                else None
            )
        except ValueError as err:
            raise EventFormatError(
                path,
                at,
                f"infoNode stream {name}: bad sensor size "
                f"{info['sizeX']!r} x {info['sizeY']!r}: {err}",
            ) from err
        streams.append(AedatStream(int(name), attrs["typeIdentifier"], sensor))
    return tuple(sorted(streams, key=lambda s: s.stream_id))


def event_stream(
    path: str | os.PathLike[str], header: AedatHeader, stream_id: int | None = None
) -> AedatStream:
    """Stream ``stream_id``, or the lowest-id polarity-event (``EVTS``) stream when None."""
    events = [s for s in header.streams if s.type_identifier == "EVTS"]
    declared = {s.stream_id: s.type_identifier for s in header.streams}
    chosen = [s for s in events if stream_id is None or s.stream_id == stream_id]
    if not chosen:
        wanted = (
            "a polarity-event (EVTS) stream"
            if stream_id is None
            else (f"stream {stream_id} as an event (EVTS) stream")
        )
        raise ValueError(f"{path}: no {wanted}; the file declares streams {declared}")
    return chosen[0]


def _packet_header(
    path: Path, fh: BinaryIO, offset: int, end: int, file_size: int, declared: set[int]
) -> tuple[int, int]:
    """Stream id and byte size of the packet at ``offset``, checked against the file."""
    head = fh.read(PACKET_HEADER.size)
    if len(head) < PACKET_HEADER.size and end > file_size:
        raise EventFormatError(
            path,
            offset,
            f"truncated: the file ends at byte offset "
            f"{offset + len(head)}, before the data table the IOHeader "
            f"places at byte offset {end}",
        )
    if len(head) < PACKET_HEADER.size or offset + PACKET_HEADER.size > end:
        raise EventFormatError(
            path,
            offset,
            f"truncated: {min(len(head), end - offset)} bytes "
            f"left for a packet header of {PACKET_HEADER.size}",
        )
    stream_id, size = PACKET_HEADER.unpack(head)
    if stream_id not in declared:
        raise EventFormatError(
            path,
            offset,
            f"packet of stream {stream_id}, which the header "
            f"does not declare ({sorted(declared)}): corrupt packet header",
        )
    body_at = offset + PACKET_HEADER.size
    if size < 0 or body_at + size > file_size:
        raise EventFormatError(
            path,
            offset,
            f"truncated: the packet of stream {stream_id} "
            f"declares {size} bytes, the file ends {file_size - body_at} "
            f"bytes after its header",
        )
    if body_at + size > end:
        raise EventFormatError(
            path,
            offset,
            f"the packet of stream {stream_id} ({size} bytes) "
            f"runs past the data table at byte offset {end}",
        )
    return stream_id, size


def decode_events(path: str | os.PathLike[str], data: bytes, offset: int) -> np.ndarray:
    """The events of one decompressed ``EVTS`` packet (read from file offset ``offset``)."""
    try:
        root = flatbuffer.size_prefixed_root(data, b"EVTS")
        start, count = flatbuffer.struct_vector(root, 0, EVENT_STRUCT.itemsize)
    except FlatbufferError as err:
        raise EventFormatError(
            path,
            offset,
            f"event packet: {err.problem} (byte {err.offset} "
            f"of the {len(data)} decompressed bytes)",
        ) from err
    # FlatBuffers builders write the packet's one vector first, at the buffer's end, so only
    # alignment padding (< one 16-byte event) may follow it: more means a lowered length
    # that would drop events without a word
    after = len(data) - (start + count * EVENT_STRUCT.itemsize) if start else 0
    if after >= EVENT_STRUCT.itemsize:
        raise EventFormatError(
            path,
            offset,
            f"event packet: its vector of {count} events (length at byte {start - 4} of the "
            f"{len(data)} decompressed bytes) ends {after} bytes before the buffer's end, more "
            f"than alignment padding (< {EVENT_STRUCT.itemsize}): a corrupt vector length (DV and "
            f"neuroedge put the vector at the buffer's end; a packet with other data after it is "
            f"not read)",
        )
    raw = np.frombuffer(data, EVENT_STRUCT, count=count, offset=start)
    if (raw["on"] > 1).any():
        i = int(np.flatnonzero(raw["on"] > 1)[0])
        raise EventFormatError(
            path,
            offset,
            f"event {i} of the packet has polarity byte "
            f"{int(raw['on'][i])} (a bool: 0 or 1): corrupt packet",
        )
    return make_events(raw["t"], raw["x"], raw["y"], raw["on"])


def event_packets(
    path: str | os.PathLike[str], header: AedatHeader, stream: AedatStream
) -> Iterator[tuple[int, np.ndarray]]:
    """``(file offset of the packet, its events)`` for each packet of ``stream``, in file order.

    Packets of other streams are skipped undecoded; at most one packet is in memory.
    """
    path = Path(path)
    file_size = path.stat().st_size
    has_table = header.data_table_position >= 0
    end = header.data_table_position if has_table else file_size
    declared = {s.stream_id for s in header.streams}
    offset = header.body_start
    with open(path, "rb") as fh:
        fh.seek(offset)
        while offset < end:
            stream_id, size = _packet_header(path, fh, offset, end, file_size, declared)
            if stream_id == stream.stream_id:
                data = decompress(path, fh.read(size), header.compression, offset)
                yield offset, decode_events(path, data, offset)
            else:
                fh.seek(size, os.SEEK_CUR)
            offset += PACKET_HEADER.size + size


# ---- writer -------------------------------------------------------------------------------


def _io_header_buffer(compression: str, info_node: bytes) -> bytes:
    """A size-prefixed ``IOHeader`` FlatBuffer, laid out as flatc would (8-byte aligned)."""
    body = struct.pack("<I4s", 20, b"IOHE")  # root table at byte 24 (offset from byte 4)
    body += struct.pack("<5H2x", 10, 20, 4, 8, 16)  # vtable at 12: 3 fields, 20-byte table
    body += struct.pack("<iiqII", 12, COMPRESSIONS.index(compression), -1, 4, len(info_node))
    body += info_node + b"\0"
    body += b"\0" * (-(len(body) + 4) % 8)
    return struct.pack("<I", len(body)) + body


def _event_packet_buffer(events: np.ndarray) -> bytes:
    """A size-prefixed ``EventPacket`` FlatBuffer holding ``events`` (16-byte aligned structs)."""
    items = np.zeros(len(events), EVENT_STRUCT)
    items["t"], items["x"], items["y"], items["on"] = (
        events["t"],
        events["x"],
        events["y"],
        events["p"],
    )
    head = struct.pack("<I4s3H2xiII", 16, b"EVTS", 6, 8, 4, 8, 4, len(events))
    return struct.pack("<I", len(head) + items.nbytes) + head + items.tobytes()


def _info_node(compression: str, sensor: SensorSize) -> bytes:
    """DV's info XML declaring one polarity-event stream, id 0."""
    size = (
        f'<attr key="sizeX" type="int">{sensor.width}</attr>'
        f'<attr key="sizeY" type="int">{sensor.height}</attr>'
    )
    node = "/mainloop/Recorder/outInfo/0/"
    return (
        f'<dv version="2.0"><node name="outInfo" path="/mainloop/Recorder/outInfo/">'
        f'<node name="0" path="{node}">'
        f'<attr key="compression" type="string">{compression}</attr>'
        f'<attr key="originalModuleName" type="string">neuroedge</attr>'
        f'<attr key="originalOutputName" type="string">events</attr>'
        f'<attr key="typeDescription" type="string">Array of events (polarity ON/OFF).</attr>'
        f'<attr key="typeIdentifier" type="string">EVTS</attr>'
        f'<node name="info" path="{node}info/">{size}</node></node></node></dv>'
    ).encode()


def encode(
    events: np.ndarray,
    sensor: SensorSize | None,
    *,
    compression: str = "LZ4",
    packet_events: int = 8192,
) -> bytes:
    """An AEDAT 4.0 file holding ``events`` (validated by the caller) as stream 0, ``EVTS``.

    Packets of ``packet_events`` events; no data table (``dataTablePosition`` -1): readers then
    read packets to the end of the file. The sensor size is required: DV and the ``aedat``
    decoder refuse an event stream without ``sizeX``/``sizeY``.
    """
    if sensor is None:
        raise ValueError(
            "an AEDAT 4 event stream must state its sensor size (DV and the aedat "
            "decoder refuse one without sizeX/sizeY): pass sensor=SensorSize(w, h)"
        )
    if compression not in COMPRESSIONS:
        raise ValueError(f"AEDAT 4 compression {compression!r} is not one of {COMPRESSIONS}")
    if packet_events < 1:
        raise ValueError(f"packet_events must be >= 1, got {packet_events}")
    parts = [MAGIC, _io_header_buffer(compression, _info_node(compression, sensor))]
    for start in range(0, len(events), packet_events):
        packet = compress(_event_packet_buffer(events[start : start + packet_events]), compression)
        parts += [PACKET_HEADER.pack(0, len(packet)), packet]
    return b"".join(parts)
