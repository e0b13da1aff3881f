"""Read the .npy and .npz arrays users hand in: without pickle, and with a ValueError naming
the problem for any bad bytes.

``np.load`` lets other errors escape on corrupt files: ``tokenize.TokenError`` from a header
with an unclosed bracket, ``MemoryError`` from a header whose shape was corrupted to billions
of rows (allocated before the data is read), and ``zlib.error``, ``NotImplementedError`` or
``RuntimeError`` from an .npz member whose zip metadata or deflate stream is damaged. Here the
header is parsed first and its shape checked against the bytes that follow it, and an .npz
member's declared size against what its compressed bytes can hold.
"""

from __future__ import annotations

import math
import os
import tokenize
import zipfile
import zlib
from collections.abc import Callable, Iterable
from typing import IO

import numpy as np

# what zipfile raises, besides OSError and ValueError, on a member it cannot read: a bad CRC
# or header (BadZipFile), a damaged deflate stream (zlib.error), an unknown compression
# method or zip version (NotImplementedError), an encrypted member (RuntimeError), a cut one
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError)
# the most bytes deflate can give per compressed byte (258-byte matches in ~2 bits: 1032:1)
DEFLATE_MAX_RATIO = 1032


def load_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """The array of the .npy file ``path``; ValueError saying what is wrong with its bytes (an
    .npz archive, a header that does not parse, a shape the file does not hold)."""
    with open(path, "rb") as fh:
        if fh.read(2) == b"PK":
            raise ValueError(f"an .npz archive of {_archive_names(fh)}, not one .npy array")
        fh.seek(0)
        return read_npy(fh, os.fstat(fh.fileno()).st_size)


def _archive_names(fh: IO[bytes]) -> list[str] | str:
    try:
        with zipfile.ZipFile(fh) as zf:
            return [n.removesuffix(".npy") for n in zf.namelist()]
    except (*ZIP_ERRORS, OSError, ValueError) as err:
        return f"unreadable members ({err})"


def read_npy(fh: IO[bytes], size: int) -> np.ndarray:
    """The array of the .npy bytes ``fh`` holds (``size`` bytes from its start, where it is)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        # version 3.0 has 2.0's layout (its header is UTF-8, read here as latin-1: only the
        # shape and item size are used, and read_array below reads the header properly)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read(fh)
    except (tokenize.TokenError, SyntaxError) as err:  # numpy's fallback header parser
        why = err.args[0] if err.args else type(err).__name__  # TokenError: (msg, (row, col))
        raise ValueError(f"the .npy header does not parse ({why})") from err
    need, have = math.prod(shape) * dtype.itemsize, size - fh.tell()
    if need > have and not dtype.hasobject:  # object arrays: np.load refuses them below
        raise ValueError(
            f"its header declares shape {shape} of {dtype.itemsize}-byte items ({need} "
            f"bytes), but {have} bytes follow the header (a truncated file or a corrupt header)"
        )
    fh.seek(0)
    return fmt.read_array(fh, allow_pickle=False)


def load_npz(
    path: str | os.PathLike[str],
    check_names: Callable[[list[str]], None] | None = None,
    only: Iterable[str] | None = None,
) -> dict[str, np.ndarray]:
    """The arrays of the .npz file ``path`` by name (member names without ``.npy``), read
    member by member, only the names in ``only`` where given (other members may be anything);
    ``check_names(names)`` runs before any array is read. ValueError naming the member and
    what is wrong with its bytes; what ``check_names`` raises as is."""
    wanted = None if only is None else set(only)
    archive = os.path.getsize(path)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            names = [info.filename.removesuffix(".npy") for info in infos]
            if check_names is not None:
                check_names(names)
            return {
                name: _member(zf, info, archive)
                for name, info in zip(names, infos)
                if wanted is None or name in wanted
            }
    except ZIP_ERRORS as err:
        raise ValueError(f"a corrupt zip archive ({type(err).__name__}: {err})") from err


def _check_sizes(info: zipfile.ZipInfo, archive: int) -> None:
    """Refuse a member whose declared size its compressed bytes cannot hold (a forged or
    corrupt zip64 size would otherwise size the array allocated before the data is read)."""
    ratio = {zipfile.ZIP_STORED: 1, zipfile.ZIP_DEFLATED: DEFLATE_MAX_RATIO}
    most = info.compress_size * ratio.get(info.compress_type, math.inf) + 64
    if info.compress_size > archive or info.file_size > most:
        raise ValueError(
            f"member {info.filename!r} declares {info.file_size} bytes from "
            f"{info.compress_size} compressed bytes in a {archive}-byte archive: "
            "a corrupt or forged zip size"
        )


def _member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, archive: int) -> np.ndarray:
    if not info.filename.endswith(".npy"):
        raise ValueError(f"member {info.filename!r} is not an .npy array")
    _check_sizes(info, archive)
    try:
        with zf.open(info) as fh:
            return read_npy(fh, info.file_size)
    except ZIP_ERRORS as err:
        raise ValueError(f"member {info.filename!r}: {type(err).__name__}: {err}") from err
    except ValueError as err:
        raise ValueError(f"{err} (member {info.filename!r})") from err
