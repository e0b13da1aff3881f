"""LZ4 and Zstandard (de)compression of AEDAT 4.0 packets, one frame per packet.

The compression libraries are optional and imported only when a file uses them.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

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


def decompress(path: str | os.PathLike[str], body: bytes, compression: str, offset: int) -> bytes:
    """One packet's bytes, decompressed; a corrupt or cut frame is an ``EventFormatError``."""
    if compression == "NONE":
        return body
    lib = _compression_library(compression, f"{path}: reading its {compression} packets")
    lz4 = compression.startswith("LZ4")
    errors = (RuntimeError,) if lz4 else (lib.ZstdError,)
    try:
        dec = lib.LZ4FrameDecompressor() if lz4 else lib.ZstdDecompressor().decompressobj()
        data = dec.decompress(body)
    except errors as err:
        raise EventFormatError(
            path, offset, f"{compression} packet does not decompress: {err}"
        ) from err
    if not dec.eof:
        raise EventFormatError(
            path,
            offset,
            f"{compression} packet does not decompress: its "
            f"{len(body)} bytes stop before the end of the frame",
        )
    if dec.unused_data:
        raise EventFormatError(
            path,
            offset,
            f"{compression} packet has {len(dec.unused_data)} bytes after the end of its frame",
        )
    return data


def compress(body: bytes, compression: str) -> bytes:
    """``body`` as one LZ4 or Zstandard frame (``NONE``: unchanged)."""
    if compression == "NONE":
        return body
    lib = _compression_library(compression, f"writing {compression} AEDAT 4 packets")
    high = compression.endswith("_HIGH")
    if compression.startswith("LZ4"):
        return lib.compress(body, compression_level=9 if high else 0)
    return lib.ZstdCompressor(level=19 if high else 3).compress(body)
