"""A cache folder numba can write, chosen by the kernels' modules before they import numba.

The event kernels (``neuroedge.events``, ``neuroedge.models.bivision``) compile with
``numba.njit(cache=True)``. numba caches them in the ``__pycache__`` beside their source, else
in the user-wide cache (``$XDG_CACHE_HOME/numba``, ``~/.cache/numba``); where neither can be
written (a read-only install in a read-only container, HOME unset or read-only) every kernel
fails with "cannot cache function ...: no locator available". ``use_writable_cache`` then
sets ``NUMBA_CACHE_DIR`` to a private per-user folder in the temporary folder. A
``NUMBA_CACHE_DIR`` the user set is never replaced. Cheap: a few ``stat``/``access`` calls.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import stat
import sys

# (package, sub-folder): the folders of the modules whose kernels numba caches
KERNEL_FOLDERS = (("neuroedge", "events"), ("neuroedge.models", "bivision"))


def _writable(folder: str) -> bool:
    """``folder`` takes new files, or can be made (numba makes it): its nearest existing
    ancestor is a folder we may write (``os.access``: a read-only mount says no, even to
    root)."""
    path = os.path.abspath(folder)
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def _kernel_caches() -> list[str]:
    """The ``__pycache__`` folders numba's in-tree cache would use (found without importing
    the packages: ``find_spec`` of a subpackage runs no code of it)."""
    folders = []
    for package, sub in KERNEL_FOLDERS:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for root in (spec.submodule_search_locations or ()) if spec else ():
            folders.append(os.path.join(root, sub, "__pycache__"))
    return folders


def _user_cache() -> str:
    """numba's user-wide cache folder (``numba.misc.appdirs.user_cache_dir("numba")``)."""
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~/Library/Caches"), "numba")
    return os.path.join(os.getenv("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "numba")


def _private_folder() -> str | None:
    """``neuroedge-numba-UID`` in the temporary folder (made 0700, kept between runs); a fresh
    ``mkdtemp`` where that name is not ours alone (a shared /tmp: numba loads pickled code
    from its cache); None where no temporary folder can be written."""
    import tempfile

    try:
        folder = os.path.join(tempfile.gettempdir(), f"neuroedge-numba-{os.getuid()}")
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
        info = os.lstat(folder)
        private = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
        if private and not info.st_mode & 0o022 and os.access(folder, os.W_OK | os.X_OK):
            return folder
        return tempfile.mkdtemp(prefix="neuroedge-numba-")
    except OSError:
        return None


def use_writable_cache() -> str | None:
    """Set ``NUMBA_CACHE_DIR`` where numba would find no folder to cache the kernels in (their
    ``__pycache__`` and the user-wide cache both read-only); the folder set, or None (left as
    it was: set by the user, or a cache that works; Windows: numba's own folder)."""
    if os.environ.get("NUMBA_CACHE_DIR") or sys.platform == "win32":
        return None
    if all(_writable(f) for f in _kernel_caches()) or _writable(_user_cache()):
        return None
    folder = _private_folder()
    if folder is not None:
        os.environ["NUMBA_CACHE_DIR"] = folder
        config = sys.modules.get("numba.core.config")
        if config is not None:  # numba imported first: it reads the environment again
            config.reload_config()
    return folder
