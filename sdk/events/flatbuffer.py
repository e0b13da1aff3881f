"""Read-only access to size-prefixed FlatBuffers tables, with every offset bounds-checked.

Just enough of the FlatBuffers binary layout (flatbuffers.dev, "Internals") for AEDAT 4: a
little-endian ``uint32`` size prefix, a ``uint32`` offset to the root table, a 4-byte file
identifier; a table starts with an ``int32`` back-offset to its vtable (``uint16`` vtable size,
``uint16`` table size, then one ``uint16`` field offset per field, 0 = field absent and
default). Strings and vectors are reached through a ``uint32`` forward offset and start with a
``uint32`` length. Offsets in errors count from the first byte of the size prefix.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


class FlatbufferError(ValueError):
    """A buffer that does not hold the expected table; ``offset`` is where it went wrong."""

    def __init__(self, offset: int, problem: str) -> None:
        self.offset, self.problem = int(offset), problem
        super().__init__(f"byte {offset}: {problem}")


@dataclass(frozen=True)
class Table:
    """One table in ``buf``: its position and the field offsets its vtable lists."""

    buf: bytes  # the whole size-prefixed buffer
    pos: int  # byte offset of the table (its vtable back-offset) in buf
    fields: tuple[int, ...]  # offset of each field from pos; 0 = absent


def _unpack(buf: bytes, fmt: str, at: int, what: str) -> int:
    if at < 0 or at + struct.calcsize(fmt) > len(buf):
        raise FlatbufferError(at, f"{what} lies outside the {len(buf)}-byte buffer")
    return struct.unpack_from(fmt, buf, at)[0]


def size_prefixed_root(buf: bytes, identifier: bytes) -> Table:
    """The root table of ``buf``, after checking its size prefix and file identifier."""
    size = _unpack(buf, "<I", 0, "size prefix")
    if size != len(buf) - 4:
        raise FlatbufferError(
            0, f"size prefix says {size} bytes, the buffer holds {len(buf) - 4} after it"
        )
    found = bytes(buf[8:12])
    if found != identifier:
        raise FlatbufferError(8, f"file identifier {found!r}, expected {identifier!r}")
    return table_at(buf, 4 + _unpack(buf, "<I", 4, "root offset"))


def table_at(buf: bytes, pos: int) -> Table:
    """The table at ``pos``, its vtable located and checked to lie inside ``buf``."""
    vtable = pos - _unpack(buf, "<i", pos, "table vtable offset")
    vt_size = _unpack(buf, "<H", vtable, "vtable size")
    table_size = _unpack(buf, "<H", vtable + 2, "table size")
    if vt_size < 4 or vt_size % 2 or vtable + vt_size > len(buf) or pos + table_size > len(buf):
        raise FlatbufferError(
            vtable,
            f"vtable of {vt_size} bytes for a {table_size}-byte table "
            f"at {pos} does not fit the {len(buf)}-byte buffer",
        )
    fields = struct.unpack_from(f"<{(vt_size - 4) // 2}H", buf, vtable + 4)
    if any(f and not 4 <= f < table_size for f in fields):
        raise FlatbufferError(
            vtable, f"vtable field offsets {fields} fall outside the {table_size}-byte table"
        )
    return Table(buf, pos, fields)


def _field(table: Table, index: int) -> int:
    """Absolute offset of field ``index`` in the buffer, or 0 when the field is absent."""
    if index >= len(table.fields) or not table.fields[index]:
        return 0
    return table.pos + table.fields[index]


def scalar(table: Table, index: int, fmt: str, default: int) -> int:
    """Field ``index`` as a ``struct`` scalar (``"<i"``, ``"<q"``), ``default`` when absent."""
    at = _field(table, index)
    return default if not at else _unpack(table.buf, fmt, at, f"field {index}")


def _indirect(table: Table, index: int, what: str) -> int:
    at = _field(table, index)
    if not at:
        return 0
    return at + _unpack(table.buf, "<I", at, f"{what} offset")


def string(table: Table, index: int) -> tuple[int, bytes] | None:
    """Field ``index`` as ``(offset of its first byte, bytes)``, or None when absent."""
    at = _indirect(table, index, "string")
    if not at:
        return None
    length = _unpack(table.buf, "<I", at, "string length")
    if at + 4 + length > len(table.buf):
        raise FlatbufferError(at, f"string of {length} bytes runs past the buffer end")
    return at + 4, bytes(table.buf[at + 4 : at + 4 + length])


def struct_vector(table: Table, index: int, item_bytes: int) -> tuple[int, int]:
    """Field ``index`` as a vector of fixed-size structs: ``(offset of item 0, item count)``.

    An absent vector is empty: ``(0, 0)``.
    """
    at = _indirect(table, index, "vector")
    if not at:
        return 0, 0
    count = _unpack(table.buf, "<I", at, "vector length")
    if at + 4 + count * item_bytes > len(table.buf):
        raise FlatbufferError(
            at,
            f"vector of {count} x {item_bytes}-byte items runs past the "
            f"{len(table.buf)}-byte buffer",
        )
    return at + 4, count
