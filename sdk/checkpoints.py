"""Save checkpoints atomically; load them with ``weights_only=True`` and clear errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from neuroedge.atomic import atomic_path
from neuroedge.errors import ArtifactError


def save_checkpoint(path: str | os.PathLike[str], payload: dict[str, Any]) -> Path:
    """``payload`` holds tensors, numbers, strings, lists and dicts only."""
    import torch

    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return Path(path)


def load_checkpoint(path: str | os.PathLike[str], required: tuple[str, ...] = ()) -> dict:
    """Load a checkpoint without unpickling code; missing or corrupt files raise ArtifactError."""
    import pickle
    import zipfile

    import torch

    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        raise ArtifactError(f"{path}: not a readable checkpoint ({err})") from err
    missing = [k for k in required if k not in payload]
    if missing:
        raise ArtifactError(f"{path}: checkpoint lacks {missing}")
    return payload
