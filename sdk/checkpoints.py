"""Save checkpoints atomically; load them with ``weights_only=True`` and clear errors."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuroedge.atomic import atomic_path
from neuroedge.errors import ArtifactError


def save_checkpoint(path: str | os.PathLike[str], payload: dict[str, Any]) -> Path:
    """``payload`` holds tensors, numbers, strings, lists and dicts only. A NaN or infinite
    tensor is refused before anything is written (ArtifactError naming it), as ``load_checkpoint``
    refuses such a file: a diverged run left an all-NaN checkpoint that a later build read."""
    import torch

    _check_no_nan(payload, Path(path))
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return Path(path)


def resolve_checkpoint(config: Mapping[str, Any], name: str, check: bool = True) -> Path:
    """The checkpoint a build reads: ``config["checkpoint"]`` or the default path of ``name``.

    A path the user named must be an existing file (with ``check``): a typo must not fall back
    to untrained weights or start a training run that saves under the mistyped name.
    """
    from neuroedge.paths import checkpoint_path, refuse_empty

    named = config.get("checkpoint")
    if named is not None and not isinstance(named, (str, os.PathLike)):
        raise ArtifactError(
            f"config checkpoint {named!r}: expected the path of a checkpoint file, "
            f"got {type(named).__name__}"
        )
    if isinstance(named, str):
        refuse_empty(
            named,
            "config checkpoint",
            "name a checkpoint file, or leave the key out to use the default "
            f"{checkpoint_path(name)}",
            ArtifactError,
        )
    path = Path(named or checkpoint_path(name))
    if check and path.is_dir():
        raise ArtifactError(f"{path}: is a directory, not a checkpoint file")
    if check and named and not path.is_file():
        raise ArtifactError(
            f"{path}: no such checkpoint (named by the config key 'checkpoint'; leave it "
            f"unset to use the default {checkpoint_path(name)})"
        )
    return path


def load_weights(module: Any, state_dict: Mapping[str, Any], path: str | os.PathLike[str]) -> Any:
    """``module.load_state_dict(state_dict)``; weights of another model or shape raise
    ArtifactError naming the file."""
    try:
        module.load_state_dict(state_dict)
    except (RuntimeError, KeyError, TypeError) as err:
        first = str(err).strip().splitlines()[:3]
        raise ArtifactError(
            f"{path}: its weights do not fit {type(module).__name__} "
            f"(a checkpoint of another model or configuration?): {' '.join(first)}"
        ) from err
    return module


def _load_reason(err: BaseException) -> str:
    """torch's reason for refusing a file, short: without its advice to re-run ``torch.load``
    with ``weights_only=False`` (or to allowlist globals), which would run the file's code."""
    if isinstance(err, (KeyError, IndexError)):  # the unpickler reading arbitrary bytes
        return "not a torch checkpoint (a text or other file?)"
    text = str(err).strip()
    if "Weights only load failed" not in text:
        return text.splitlines()[0] if text else type(err).__name__
    for line in text.splitlines():
        line = line.strip()
        if "WeightsUnpickler error:" in line:
            line = line.split("WeightsUnpickler error:", 1)[1].strip()
        if not line or line.startswith(("Weights only load failed", "Check the documentation")):
            continue
        return "not a weights-only torch checkpoint: " + line.split(" Please use", 1)[0]
    return "not a weights-only torch checkpoint"


def load_checkpoint(path: str | os.PathLike[str], required: tuple[str, ...] = ()) -> dict:
    """Load a checkpoint without unpickling code; missing or corrupt files raise ArtifactError."""
    import pickle
    import struct
    import zipfile

    import torch

    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such checkpoint")
    _check_crc(path)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (
        RuntimeError,
        EOFError,
        OSError,  # torch 2.x's zip reader on a truncated file
        ValueError,
        KeyError,  # the weights-only unpickler on arbitrary bytes (a text file named .pt)
        IndexError,
        pickle.UnpicklingError,
        struct.error,  # a pickle cut inside an opcode's argument (b"\x80\x02J\x00")
        zipfile.BadZipFile,
    ) as err:
        raise ArtifactError(f"{path}: not a readable checkpoint ({_load_reason(err)})") from err
    if not isinstance(payload, dict):
        raise ArtifactError(
            f"{path}: a checkpoint holds a dict of tensors and settings, this one a "
            f"{type(payload).__name__}"
        )
    missing = [k for k in required if k not in payload]
    if missing:
        raise ArtifactError(f"{path}: checkpoint lacks {missing}")
    _check_no_nan(payload, path)
    return payload


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    """What changes when a file is replaced (atomic_path makes a new inode) or rewritten."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _identity(path: Path) -> tuple[dict[str, Any], tuple[int, ...]]:
    """``file_identity`` of ``path`` and the stamp of the very file it hashed."""
    import datetime as dt
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    modified = dt.datetime.fromtimestamp(st.st_mtime, dt.timezone.utc)
    return {
        "path": os.path.abspath(path),
        "sha256": digest.hexdigest(),
        "bytes": st.st_size,
        "modified": modified.isoformat(timespec="seconds"),
    }, _stamp(st)


def file_identity(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"path", "sha256", "bytes", "modified"}`` of the file at ``path`` (OSError if none)."""
    return _identity(Path(path))[0]


def read_checkpoint(
    path: str | os.PathLike[str], required: tuple[str, ...] = ()
) -> tuple[dict, dict[str, Any]]:
    """``load_checkpoint`` and the ``file_identity`` of the very file it loaded: where another
    process replaced the file meanwhile (a ``neuroedge train``), both are read again."""
    path = Path(path)
    for _ in range(3):
        try:
            before = _stamp(path.stat())
        except OSError:
            before = None  # load_checkpoint names a missing file
        payload = load_checkpoint(path, required)
        try:
            identity, hashed = _identity(path)
        except OSError:
            continue  # removed since: load_checkpoint says so on the next round
        if hashed == before:
            return payload, identity
    raise ArtifactError(f"{path}: replaced while being read, three times; run again")


def _check_crc(path: Path) -> None:
    """torch's zip reader does not check CRCs, so a flipped bit in a tensor's bytes loads as a
    wrong weight (0.208 read as 7.1e37) without a word; check every member's CRC first (one
    read of the file; torch checkpoints are stored uncompressed)."""
    import zipfile

    from neuroedge.npyfile import ZIP_ERRORS

    try:
        if not zipfile.is_zipfile(path):  # it raises BadZipFile on a multi-disk zip64 record
            return  # a legacy (non-zip) file or garbage: torch.load names it
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except (*ZIP_ERRORS, OSError, ValueError) as err:
        raise ArtifactError(f"{path}: not a readable checkpoint ({err})") from err
    if bad is not None:
        raise ArtifactError(
            f"{path}: corrupt checkpoint: the CRC of its member {bad!r} does not match its "
            "bytes (damaged on disk or in transfer); copy or train it again"
        )


def _check_no_nan(payload: Any, path: Path, where: str = "") -> None:
    """A NaN or infinite weight is never a usable one (a diverged training run saved it):
    refuse the file, naming the tensor, instead of running a net whose outputs are NaN."""
    import torch

    if isinstance(payload, Mapping):
        for key, value in payload.items():
            _check_no_nan(value, path, f"{where}.{key}" if where else str(key))
    elif isinstance(payload, (list, tuple)):
        for i, value in enumerate(payload):
            _check_no_nan(value, path, f"{where}[{i}]")
    elif isinstance(payload, torch.Tensor) and payload.is_floating_point():
        nan, bad = int(torch.isnan(payload).sum()), int((~torch.isfinite(payload)).sum())
        if bad:
            raise ArtifactError(
                f"{path}: tensor {where!r} {list(payload.shape)} holds {nan} NaN and "
                f"{bad - nan} infinite value(s); the training run that saved it diverged"
            )
