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
    if not value.strip():
        from neuroedge.errors import ConfigError

        raise ConfigError(
            f"NEUROEDGE_HOME={value!r}: an empty path (an unset shell variable?); name a "
            "folder, or unset it for the default ./.neuroedge"
        )
    return Path(value)


def checkpoint_path(model: str) -> Path:
    """The default checkpoint of a trained model."""
    return home() / "checkpoints" / f"{model}.pt"


def artifact_dir(model: str, backend: str) -> Path:
    """The default folder of a model's compiled artifacts for one backend."""
    return home() / "artifacts" / backend / model
