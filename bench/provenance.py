"""What a report.json records of the software and settings that produced it (``provenance``):
package versions, Python, the git commit of the neuroedge source where it is a checkout, and
the thread counts; and of the weights a bench ran (``weights_record``).

Everything here is cheap and never fails a report: a package that is not installed, a source
that is no git checkout, or a ``git`` that does not answer within 2 s leaves its field out or
null."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PACKAGES = ("neuroedge", "torch", "onnxruntime", "numpy")
GIT_TIMEOUT_S = 2.0


def thread_settings() -> dict[str, Any]:
    """torch's intra-op thread count now (None when torch was never imported: nothing ran on
    it) and ``$OMP_NUM_THREADS`` (None when unset): results of a float reduction depend on
    them (a net trained on 1 or 2 threads scores 0.9667 or 0.9583)."""
    torch = sys.modules.get("torch")
    return {
        "torch_intra_op": torch.get_num_threads() if torch is not None else None,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
    }


def versions() -> dict[str, str]:
    """The installed versions of ``PACKAGES`` (those not installed are left out)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def source_root() -> Path | None:
    """The git checkout the neuroedge package is imported from (its package folder's parent
    holds ``.git``: an editable install); None for an installed copy (site-packages)."""
    import neuroedge

    root = Path(neuroedge.__file__).resolve().parent.parent
    return root if (root / ".git").exists() else None


def _git_dir(root: Path) -> Path | None:
    """``root/.git``, or the folder a ``.git`` file points to (a worktree, a submodule)."""
    dot = root / ".git"
    if dot.is_dir():
        return dot
    text = dot.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return None
    found = Path(text.removeprefix("gitdir:").strip())
    return found if found.is_absolute() else root / found


def _ref_commit(git_dir: Path, ref: str) -> str | None:
    """The commit ``ref`` (e.g. refs/heads/main) names: its loose file, else packed-refs; a
    worktree's refs are in its common folder."""
    places = [git_dir]
    common = git_dir / "commondir"
    if common.is_file():
        places.append((git_dir / common.read_text(encoding="utf-8").strip()).resolve())
    for place in places:
        loose = place / ref
        if loose.is_file():
            return loose.read_text(encoding="utf-8").strip() or None
        packed = place / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8", errors="replace").splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref and not line.startswith(("#", "^")):
                    return parts[0]
    return None


def git_commit(root: Path) -> str | None:
    """The commit checked out at ``root``, read from its files (HEAD, the ref, packed-refs):
    no ``git`` run; None where it cannot be read."""
    try:
        git_dir = _git_dir(root)
        if git_dir is None:
            return None
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref:"):
            return _ref_commit(git_dir, head.removeprefix("ref:").strip())
        return head or None  # a detached HEAD holds the commit itself
    except (OSError, UnicodeDecodeError):
        return None


def git_dirty(root: Path) -> bool | None:
    """Whether tracked files at ``root`` differ from the commit (``git status``, at most
    ``GIT_TIMEOUT_S``); None where git is missing, fails or is slow."""
    try:
        done = subprocess.run(
            # --no-optional-locks: git status would otherwise refresh the user's index
            # (.git/index.lock), and a killed one would leave the lock behind
            ["git", "--no-optional-locks", "-C", str(root), "status", "--porcelain"]
            + ["--untracked-files=no"],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(done.stdout.strip()) if done.returncode == 0 else None


def provenance() -> dict[str, Any]:
    """The ``provenance`` block of a report.json: ``versions`` (installed ones of
    ``PACKAGES``), ``python``, ``git`` (``commit``, ``dirty``: null unless neuroedge runs from
    a git checkout) and ``threads`` (``thread_settings`` at report time)."""
    root = source_root()
    return {
        "versions": versions(),
        "python": platform.python_version(),
        "git": {
            "commit": git_commit(root) if root else None,
            "dirty": git_dirty(root) if root else None,
        },
        "threads": thread_settings(),
    }


UNKNOWN_THREADS = "unknown (the checkpoint was saved before neuroedge recorded them)"


def weights_record(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """What report.json says of the weights of a built program (its ``meta``): the build's own
    ``meta["weights"]`` (the file it read: path, sha256, bytes, and what the checkpoint saved
    of its training); else, for a checkpoint path alone, that file as it is now; untrained;
    or None when the program says nothing of weights."""
    from neuroedge.checkpoints import file_identity

    if isinstance(meta.get("weights"), Mapping):
        return dict(meta["weights"])
    if meta.get("trained") and meta.get("checkpoint"):
        try:
            found = file_identity(meta["checkpoint"])
        except OSError as err:
            return {"path": str(meta["checkpoint"]), "unreadable": str(err)}
        return {**found, "read": "after the build (the build did not record the file it read)"}
    if meta.get("trained") is False:
        return {"trained": False, "note": "untrained (random initialisation)"}
    return None
