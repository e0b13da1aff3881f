"""Where neuroedge keeps its files: ``$NEUROEDGE_HOME`` (default ./.neuroedge)."""

from __future__ import annotations

import os
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


def checkpoint_path(model: str) -> Path:
    """The default checkpoint of a trained model."""
    return home() / "checkpoints" / f"{model}.pt"


def artifact_dir(model: str, backend: str) -> Path:
    """The default folder of a model's compiled artifacts for one backend."""
    return home() / "artifacts" / backend / model
