"""Where the onnxrt backend writes an export: the user's ``path`` (never over a file there),
or by default a folder of its own that processes running at once cannot mix up.

A graph and its initial state are two files. When every run exported a model to the same
default ``<form>.onnx`` and loaded it back, two runs at once (a job array, two shells) could
load one run's graph with the other's state, or build a TensorRT engine from the other run's
graph. Instead each run writes its export (graph, state, reduced graphs) in a private folder
and publishes it whole, with one rename, as ``<name>-<hash>`` beside the others: the hash is
of the files' contents, so a folder's files always belong together, never change once
published, and the same weights exported again reuse the folder already there (no pile-up of
per-run copies; another model or retrained weights get a folder of their own).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import shutil
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from neuroedge.atomic import draft_prefix, remove_dead_drafts
from neuroedge.errors import ArtifactError, ConfigError
from neuroedge.npyfile import ZIP_ERRORS


def content_hash(folder: Path) -> str:
    """sha256 of the files directly in ``folder`` (names and contents; subfolders such as an
    engine cache are not part of the export). An .npz counts by its members' bytes, not the
    zip's, whose entry timestamps change from one export of the same arrays to the next; one
    that cannot be read as an archive (damaged) counts by its bytes as they are."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        digest.update(f"{path.name}\0".encode())
        members = _npz_members(path, digest.copy()) if path.suffix == ".npz" else None
        if members is None:
            digest.update(path.read_bytes())  # raises as it should when it cannot be read
        else:
            digest = members
        digest.update(b"\0")
    return digest.hexdigest()


def _npz_members(path: Path, digest: Any) -> Any:
    """``digest`` updated with the names and bytes of the archive's members, or None where
    it cannot be read as an archive."""
    try:
        with zipfile.ZipFile(path) as archive:
            for member in sorted(archive.namelist()):
                digest.update(f"{member}\0".encode())
                digest.update(archive.read(member))
    except (*ZIP_ERRORS, OSError, ValueError):  # damaged: read as plain bytes (a file that
        return None  # cannot be read at all raises again there)
    return digest


def export_once(folder: Path, name: str, write: Callable[[Path], Path]) -> Path:
    """``write(work)`` exports into a private folder ``work`` under ``folder`` and returns the
    file to load; that folder is published as ``folder/<name>-<hash>`` and the returned path
    is the same file there. The private folder is removed whatever happens."""
    folder.mkdir(parents=True, exist_ok=True)
    work = _private_folder(folder, name)
    try:
        written = write(work)
        key = content_hash(work)
        final = _publish(work, folder / f"{name}-{key[:16]}", key, folder / f".{name}.lock")
    finally:
        shutil.rmtree(work, ignore_errors=True)  # gone already once published
    remove_dead_drafts(folder, name)
    return final / Path(written).relative_to(work)


def _private_folder(folder: Path, name: str) -> Path:
    """A new folder ``.<name>.<host>-<pid>.<random>.part`` (mkdir: the mode the umask
    gives); the drafts of dead processes are removed after a publish (``remove_dead_drafts``)."""
    while True:
        work = folder / f"{draft_prefix(name)}{secrets.token_hex(6)}.part"
        try:
            work.mkdir()
            return work
        except FileExistsError:
            continue


def _publish(work: Path, final: Path, key: str, lock: Path) -> Path:
    """Rename ``work`` to ``final``. A ``final`` already there holds the same files (its name
    is their hash) and is used as it is; one whose files were changed or removed by hand is
    set aside and replaced. Only under ``lock``, after hashing ``final`` again there: a run
    that hashed the damaged folder, then waited while another run replaced it, must not set
    aside the good folder that run is using (no run renames onto a folder with files in it,
    so the folder hashed under the lock is the one set aside)."""
    for _ in range(3):
        try:
            os.rename(work, final)  # atomic; refused onto a folder with files in it
            return final
        except OSError as err:
            if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        try:
            if content_hash(final) == key:
                return final
            with _locked(lock):
                if content_hash(final) == key:
                    return final
                aside = final.with_name(f".{final.name}.{secrets.token_hex(6)}.stale")
                os.rename(final, aside)
        except FileNotFoundError:
            continue  # removed meanwhile: publish again
        shutil.rmtree(aside, ignore_errors=True)
    raise ArtifactError(f"{final}: could not publish the export there (changing under us)")


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """``lock`` held exclusively inside, waiting while another process holds it: flock on
    POSIX, msvcrt.locking on Windows. Either lock is the OS's, released when its process
    ends, so a run killed while holding it blocks no later run."""
    try:
        import fcntl
    except ImportError:  # Windows
        fcntl = None
    with open(lock, "a") as held:
        if fcntl is None:
            with _msvcrt_locked(held):
                yield
        else:
            fcntl.flock(held, fcntl.LOCK_EX)  # released on close
            yield


@contextlib.contextmanager
def _msvcrt_locked(held: Any) -> Iterator[None]:
    """The first byte of the open file ``held`` locked inside (Windows). LK_LOCK gives up
    after 10 tries a second apart (EDEADLOCK): tried again, so it waits as flock does."""
    import msvcrt

    held.seek(0)  # the bytes locked start at the file position
    while True:
        try:
            msvcrt.locking(held.fileno(), msvcrt.LK_LOCK, 1)
            break
        except OSError as err:
            if err.errno != errno.EDEADLOCK:
                raise
    try:
        yield
    finally:
        held.seek(0)
        msvcrt.locking(held.fileno(), msvcrt.LK_UNLCK, 1)


def refuse_existing(path: Path, precision: str, stateful: bool) -> None:
    """ConfigError when a file the export at the user's ``path`` writes is already there: the
    graph, its initial state (stateful models) and the reduced-precision graph beside it."""
    from neuroedge.export.onnx import state_file

    written = [path, *([state_file(path)] if stateful else [])]
    if precision != "fp32":
        reduced = path.with_name(f"{path.stem}.{precision}.onnx")
        written += [reduced, *([state_file(reduced)] if stateful else [])]
    there = [str(p) for p in written if p.exists()]
    if there:
        raise ConfigError(
            f"backend 'onnxrt' option path={str(path)!r}: {', '.join(there)} already there; path "
            "names the new file the export is written to (with its state and reduced graph "
            "beside it), and it would replace what is there: give another name, or delete it"
        )
