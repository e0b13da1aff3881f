"""Write files atomically: a temp file in the same folder, fsync, then rename.

An interrupted run never leaves a half-written export or report behind. Drafts are named
``.NAME.HOST-PID.RANDOM.part``: a process killed outright (SIGKILL, the OOM killer, a power
cut) cannot remove its own, so the next successful write of NAME in that folder removes the
ones whose process on this host is gone (``remove_dead_drafts``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from neuroedge.errors import InputError
from neuroedge.paths import refuse_undecodable


def _read_umask() -> int:
    mask = os.umask(0)  # the portable way to read it: set and put back (not thread-safe)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # the import-time value: the fallback where /proc is absent
_PROC_STATUS = "/proc/self/status"  # its Umask line: the umask now, read without changing it


def _current_umask() -> int:
    """The process umask now (a caller may tighten it after importing neuroedge), read from
    /proc/self/status (no set-and-restore race with other threads); the import-time value
    where that is unavailable."""
    try:
        with open(_PROC_STATUS, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _UMASK


HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"  # no '.' nor '-' left
DEAD_DRAFT_AGE_S = 600.0  # untouched this long too: a pid of another namespace looks dead


def draft_prefix(name: str) -> str:
    """The start of a draft's name for ``name``: whose it is, this host's process."""
    return f".{name}.{HOST}-{os.getpid()}."


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this host may still write its draft. On Windows there is no
    probe without side effects (os.kill(pid, 0) sends CTRL_C_EVENT there): False, and the draft
    is left to ``DEAD_DRAFT_AGE_S`` alone."""
    if pid == os.getpid():
        return True  # another thread's draft
    if sys.platform == "win32":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # PermissionError: another user's live process
        return True
    return True


def _last_touched(entry: os.DirEntry) -> float:
    """The newest mtime of a draft: a file's own; a folder's, or of anything in it (writing a
    file inside a folder does not touch the folder's own mtime)."""
    newest = entry.stat(follow_symlinks=False).st_mtime
    if entry.is_dir(follow_symlinks=False):
        for root, dirs, files in os.walk(entry.path):
            for item in (*dirs, *files):
                with contextlib.suppress(OSError):
                    newest = max(newest, os.lstat(os.path.join(root, item)).st_mtime)
    return newest


def remove_dead_drafts(folder: str | os.PathLike[str], name: str) -> list[Path]:
    """Remove the drafts of ``name`` in ``folder`` (files or folders ``.NAME.HOST-PID.R.part``)
    whose process on this host is gone and that nobody touched for ``DEAD_DRAFT_AGE_S``;
    the paths removed. Drafts of other hosts (a shared folder) are left alone."""
    prefix, removed = f".{name}.{HOST}-", []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(".part")):
            continue
        pid, dot, rand = entry.name[len(prefix) : -len(".part")].partition(".")
        ours = dot and rand and "." not in rand and re.fullmatch(r"[0-9]{1,10}", pid)
        if not ours or _alive(int(pid)):
            continue  # another name's draft (``name.x``), or a live one
        try:
            if time.time() - _last_touched(entry) < DEAD_DRAFT_AGE_S:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            continue  # gone meanwhile, or not ours to remove
        removed.append(Path(entry.path))
    return removed


def _check_kinds(path: str | os.PathLike[str], folder: bool) -> tuple[Path, Path]:
    """``path`` and its nearest existing folder (``path`` itself for an existing report
    folder), refusing an empty path, a file where a folder is needed or the other way round,
    and a parent that is a file, and a name that is not text (InputError: see
    ``neuroedge.paths.refuse_undecodable``)."""
    if os.fspath(path) == "":
        want = "a folder to write the report into" if folder else "a file path to write"
        raise FileNotFoundError(f"'': an empty path; give {want}")
    refuse_undecodable(path, "", InputError)
    target = Path(path)
    if folder and target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{target}: is a file; give a folder to write the report into")
    if not folder and target.is_dir():
        raise IsADirectoryError(f"{target}: is a directory; give a file path to write")
    full = target.absolute()
    for parent in (full, *full.parents) if folder else full.parents:
        if parent.exists():
            if not parent.is_dir():
                raise NotADirectoryError(f"{target}: {parent} is a file, not a folder")
            return target, parent
    return target, Path(full.anchor)


def check_writable(path: str | os.PathLike[str], folder: bool = False) -> Path:
    """Refuse, before any work, a path that cannot be written: an empty one; a file where a
    folder is needed (``folder``: ``path`` itself is one) or a folder where a file is; a
    parent that is a file; or a nearest existing folder that takes no new file (probed by
    making and removing one: permission bits say little to root). Missing parents are fine
    (they are made on writing)."""
    target, ancestor = _check_kinds(path, folder)
    try:
        fd, probe = tempfile.mkstemp(prefix=".neuroedge-probe.", dir=ancestor)
    except OSError as err:
        raise type(err)(
            err.errno, f"cannot write {target}: {ancestor} takes no new file ({err.strerror})"
        ) from err
    os.close(fd)
    os.unlink(probe)
    return target


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success."""
    target, _ = _check_kinds(path, folder=False)  # writing the temp file probes the rest
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            prefix=draft_prefix(target.name), suffix=".part", dir=target.parent
        )
    except OSError as err:  # name the file asked for, not the temp file beside it
        raise type(err)(err.errno, f"cannot write {target}: {err.strerror}") from err
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        # mkstemp makes 0600; a file gets the usual mode under the caller's umask of now
        os.chmod(tmp_path, 0o666 & ~_current_umask())
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)
    remove_dead_drafts(target.parent, target.name)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))
