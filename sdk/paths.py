"""Where neuroedge keeps its files: ``$NEUROEDGE_HOME`` (default ./.neuroedge)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def home() -> Path:
    """``$NEUROEDGE_HOME``, or ./.neuroedge where it is unset; set but empty is refused (as
    every path neuroedge takes): ``Path("")`` is the current folder, which would fill it with
    artifacts and checkpoints."""
    value = os.environ.get("NEUROEDGE_HOME")
    if value is None:
        return Path(".neuroedge")
    from neuroedge.errors import ConfigError

    refuse_empty(
        value,
        "NEUROEDGE_HOME",
        "name a folder, or unset it for the default ./.neuroedge",
        ConfigError,
    )
    return Path(value)


def refuse_empty(
    value: str | os.PathLike[str],
    label: str,
    instead: str,
    error: type[Exception],
    what: str = "path",
) -> None:
    """``error`` naming ``label`` where ``value`` is empty or blank: ``Path("")`` is the
    current folder, so an unset shell variable (``path=$OUT``) would silently mean "here"."""
    if not os.fspath(value).strip():
        raise error(
            f"{label}={os.fspath(value)!r}: an empty {what} (an unset shell variable?); {instead}"
        )
    refuse_undecodable(value, label, error)


def refuse_undecodable(
    value: str | os.PathLike[str], label: str, error: type[Exception] = ValueError
) -> None:
    """``error`` naming ``label`` and the bytes of ``value`` where it is not text: a name whose
    bytes are not UTF-8 (a Latin-1 ``ck_\\xfc.pt``), or not in the locale's encoding (ASCII
    under ``LC_ALL=C PYTHONUTF8=0``), arrives with surrogates that torch's exporter, the
    reports and the history cannot take (a traceback, or a failure after the run)."""
    text, name = os.fspath(value), f"{label}=" if label else ""
    if not isinstance(text, str):
        return
    try:
        text.encode("utf-8")
        return
    except UnicodeEncodeError:
        pass
    try:
        raw = os.fsencode(text)
    except UnicodeError:  # a lone surrogate made in Python code, not read from the file system
        raise error(f"{name}{text!a}: not text (it holds a lone surrogate)") from None
    try:
        raw.decode("utf-8")
        why = (
            f"not text in this locale's encoding ({sys.getfilesystemencoding()}); run under a "
            "UTF-8 locale (e.g. PYTHONUTF8=1)"
        )
    except UnicodeDecodeError:
        why = "its bytes are not UTF-8 text (a Latin-1 name?); rename it (UTF-8 or ASCII)"
    raise error(f"{name}{raw!r}: {why}")


def checkpoint_path(model: str) -> Path:
    """The default checkpoint of a trained model."""
    return home() / "checkpoints" / f"{model}.pt"


def artifact_dir(model: str, backend: str) -> Path:
    """The default folder of a model's compiled artifacts for one backend."""
    return home() / "artifacts" / backend / model
