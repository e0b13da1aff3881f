"""Where neuroedge keeps its files: ``$NEUROEDGE_HOME`` (default ./.neuroedge)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("NEUROEDGE_HOME", ".neuroedge"))


def checkpoint_path(model: str) -> Path:
    """The default checkpoint of a trained model."""
    return home() / "checkpoints" / f"{model}.pt"


def artifact_dir(model: str, backend: str) -> Path:
    """The default folder of a model's compiled artifacts for one backend."""
    return home() / "artifacts" / backend / model
