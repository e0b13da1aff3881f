"""The kernels' modules give numba a cache folder it can write where the package and the
user-wide cache are read-only (numba.njit(cache=True) raised "no locator available")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from neuroedge import numba_cache as nc


@pytest.fixture
def no_user_dir(monkeypatch, tmp_path: Path) -> Path:
    """NUMBA_CACHE_DIR as unset (restored after), temporary folders in ``tmp_path``."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")  # empty: numba reads it as unset
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    return tmp_path


def test_a_user_cache_dir_is_never_replaced(monkeypatch) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/users/own")
    monkeypatch.setattr(nc, "_writable", lambda folder: False)
    assert nc.use_writable_cache() is None
    assert os.environ["NUMBA_CACHE_DIR"] == "/users/own"


def test_a_writable_cache_is_left_to_numba(no_user_dir: Path, monkeypatch) -> None:
    assert nc.use_writable_cache() is None  # this checkout's __pycache__ takes files
    assert os.environ["NUMBA_CACHE_DIR"] == ""
    monkeypatch.setattr(nc, "_writable", lambda folder: "__pycache__" not in folder)
    assert nc.use_writable_cache() is None  # the user-wide cache does


def test_neither_writable_gives_a_private_folder(no_user_dir: Path, monkeypatch) -> None:
    monkeypatch.setattr(nc, "_writable", lambda folder: False)
    folder = nc.use_writable_cache()
    assert folder == str(no_user_dir / f"neuroedge-numba-{os.getuid()}")
    assert os.environ["NUMBA_CACHE_DIR"] == folder
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert nc.use_writable_cache() is None  # set now: kept


def test_a_shared_folder_of_that_name_is_not_used(no_user_dir: Path, monkeypatch) -> None:
    """numba loads pickled code from its cache: a folder others may write is refused."""
    shared = no_user_dir / f"neuroedge-numba-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setattr(nc, "_writable", lambda folder: False)
    folder = Path(nc.use_writable_cache() or "")
    assert folder.parent == no_user_dir and folder != shared
    assert folder.name.startswith("neuroedge-numba-") and folder.stat().st_mode & 0o077 == 0


def test_the_folders_checked_are_numbas(tmp_path: Path, monkeypatch) -> None:
    from neuroedge.events import evt3
    from neuroedge.models.bivision import e2s_kernels
    from numba.misc.appdirs import user_cache_dir

    for module in (evt3, e2s_kernels):  # numba's in-tree cache: __pycache__ beside the source
        assert os.path.join(os.path.dirname(module.__file__), "__pycache__") in nc._kernel_caches()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert nc._user_cache() == user_cache_dir("numba", appauthor=False)
    (tmp_path / "afile").write_text("")
    assert nc._writable(str(tmp_path / "new" / "deeper"))  # numba makes it
    assert not nc._writable(str(tmp_path / "afile" / "numba"))


def test_numba_imported_first_reads_the_private_folder(tmp_path: Path) -> None:
    """numba imported before neuroedge has read its config already: it must read it again,
    or its CACHE_DIR stays empty and the kernels still find no locator."""
    code = (
        "import numba.core.config as cfg\n"
        "from neuroedge import numba_cache as nc\n"
        "nc._writable = lambda folder: False\n"
        "print(nc.use_writable_cache())\n"
        "print(cfg.CACHE_DIR)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = str(tmp_path / f"neuroedge-numba-{os.getuid()}")
    assert proc.stdout.split() == [folder, folder]


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="needs a private mount namespace (root)")
def test_a_read_only_install_and_home_import_the_kernels(tmp_path: Path) -> None:
    """The package folders and HOME mounted read-only (in a private mount namespace): the
    kernels' module imports (numba finds its locator at the decoration)."""
    import neuroedge
    import neuroedge.models

    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    folders = {os.path.dirname(neuroedge.__file__), *neuroedge.models.__path__, str(home)}
    mounts = " && ".join(f"mount --bind {f} {f} && mount -o remount,bind,ro {f}" for f in folders)
    code = (  # import neuroedge does no such work; the kernels' modules do, before numba
        "import os, neuroedge; assert 'NUMBA_CACHE_DIR' not in os.environ\n"
        "from neuroedge.events import evt3; evt3._kernels()\n"
        "import neuroedge.models.bivision.e2s_kernels; print(os.environ['NUMBA_CACHE_DIR'])"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "NUMBA_CACHE_DIR")}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    command = f'{mounts} && exec "$0" -c "$1"'
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", command, sys.executable, code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(tmp / f"neuroedge-numba-{os.getuid()}")
