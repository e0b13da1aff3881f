"""Write files atomically: a temp file in the same folder, fsync, then rename.

An interrupted run never leaves a half-written export or report behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it; done once, at import (umask is per process)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def check_writable(path: str | os.PathLike[str], folder: bool = False) -> Path:
    """Refuse, before any work, a path that cannot be written: a file where a folder is
    needed (``folder``: ``path`` itself is one) or a folder where a file is; or a parent
    that is a file. Missing parents are fine (they are made on writing)."""
    target = Path(path)
    if folder and target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{target}: is a file; give a folder to write the report into")
    if not folder and target.is_dir():
        raise IsADirectoryError(f"{target}: is a directory; give a file path to write")
    for parent in target.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise NotADirectoryError(f"{target}: {parent} is a file, not a folder")
            break
    return target


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success."""
    target = check_writable(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    except OSError as err:  # name the file asked for, not the temp file beside it
        raise type(err)(err.errno, f"cannot write {target}: {err.strerror}") from err
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp_path, 0o666 & ~_UMASK)  # mkstemp makes 0600; a file gets the usual mode
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))
