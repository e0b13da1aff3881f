"""LZ4 and Zstandard (de)compression of AEDAT 4.0 packets, one frame per packet.

The compression libraries are optional and imported only when a file uses them.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

from neuroedge.events.core import EventFormatError

# the package each compression needs, as pinned in setup.cfg
COMPRESSION_LIBRARIES = {
    "LZ4": ("lz4.frame", "lz4==4.4.5"),
    "ZSTD": ("zstandard", "zstandard==0.25.0"),
}


def _compression_library(compression: str, purpose: str) -> ModuleType:
    """``lz4.frame`` or ``zstandard``, imported only when a file uses it."""
    module, pin = COMPRESSION_LIBRARIES[compression.removesuffix("_HIGH")]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(f"{purpose} needs {pin} (pip install {pin})") from err


# Largest decompressed packet read (16 Mi events). DV and neuroedge's writer make packets of
# thousands to tens of thousands of 16-byte events (the DV sample's largest: 17 KB); a frame
# that inflates past this is corrupt or hostile (a 263 KB ZSTD frame can hold 8 GiB of zeros),
# refused before its output is held in memory.
MAX_PACKET_BYTES = 1 << 28
# Compressed bytes fed to zstd per call for a frame that does not declare its size: a zstd
# block (a 3-byte header and at least a byte) inflates to at most 128 KiB, so one call yields
# at most 8 MiB, and the output cap is checked as it grows.
ZSTD_STEP = 256


def decompress(path: str | os.PathLike[str], body: bytes, compression: str, offset: int) -> bytes:
    """One packet's bytes, decompressed; a corrupt or cut frame, or one that inflates past its
    FlatBuffer size prefix + 4 or ``MAX_PACKET_BYTES``, is an ``EventFormatError``."""
    if compression == "NONE":
        return body
    lib = _compression_library(compression, f"{path}: reading its {compression} packets")
    lz4 = compression.startswith("LZ4")
    errors = (RuntimeError,) if lz4 else (lib.ZstdError,)
    try:
        dec = lib.LZ4FrameDecompressor() if lz4 else lib.ZstdDecompressor().decompressobj()
        data, left = _inflate(dec, body, None if lz4 else lib)
    except errors as err:
        raise EventFormatError(
            path, offset, f"{compression} packet does not decompress: {err}"
        ) from err
    declared = (
        int.from_bytes(data[:4], "little") + 4 if data and len(data) >= 4 else MAX_PACKET_BYTES
    )
    if data is None or len(data) > min(declared, MAX_PACKET_BYTES):
        why = (
            f"the {declared - 4} bytes its FlatBuffer size prefix declares, plus the prefix"
            if data is not None and declared < MAX_PACKET_BYTES
            else f"{MAX_PACKET_BYTES} bytes, the most a packet may hold (MAX_PACKET_BYTES)"
        )
        raise EventFormatError(
            path, offset, f"{compression} packet decompresses to more than {why}"
        )
    if not dec.eof:
        raise EventFormatError(
            path,
            offset,
            f"{compression} packet does not decompress: its "
            f"{len(body)} bytes stop before the end of the frame",
        )
    if left:
        raise EventFormatError(
            path, offset, f"{compression} packet has {left} bytes after the end of its frame"
        )
    return data


def _inflate(dec: Any, body: bytes, zstd: ModuleType | None) -> tuple[bytes | None, int]:
    """(the frame's output, at most ``MAX_PACKET_BYTES`` + 1 bytes of it, or None for a ZSTD
    frame that declares more; the count of input bytes after the frame's end). LZ4 stops at
    ``max_length``: one byte past the FlatBuffer's size prefix + 4. A ZSTD frame that declares
    its size is held to it by zstd itself ("Destination buffer is too small"), one that does
    not is fed ``ZSTD_STEP`` bytes at a time."""
    cap = MAX_PACKET_BYTES + 1
    if zstd is None:  # the size prefix first, then at most one byte past what it declares
        data = dec.decompress(body, max_length=4)  # (a max_length of the cap costs +60% time)
        if len(data) == 4 and not dec.eof and not dec.needs_input:
            want = min(int.from_bytes(data, "little") + 1, cap - 4)
            data += dec.decompress(b"", max_length=want)
        return data, len(dec.unused_data or b"")
    size = zstd.get_frame_parameters(body).content_size
    if size != zstd.CONTENTSIZE_UNKNOWN:
        if size >= cap:
            return None, 0
        data = dec.decompress(body)
        return data, len(dec.unused_data or b"")
    out, n, at = [], 0, 0
    while at < len(body) and n < cap and not dec.eof:
        out.append(dec.decompress(body[at : at + ZSTD_STEP]))
        n, at = n + len(out[-1]), at + ZSTD_STEP
    return b"".join(out), len(dec.unused_data or b"") + max(0, len(body) - at)


def compress(body: bytes, compression: str) -> bytes:
    """``body`` as one LZ4 or Zstandard frame (``NONE``: unchanged)."""
    if compression == "NONE":
        return body
    lib = _compression_library(compression, f"writing {compression} AEDAT 4 packets")
    high = compression.endswith("_HIGH")
    if compression.startswith("LZ4"):
        return lib.compress(body, compression_level=9 if high else 0)
    return lib.ZstdCompressor(level=19 if high else 3).compress(body)
