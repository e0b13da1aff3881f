"""The TensorRT engine cache: keyed by model hash, build settings, TensorRT version and GPU.

A serialized engine only runs on the TensorRT version and the GPU model that built it. Each
engine file sits beside a JSON sidecar (``<engine name>.json``; a file there that is not one
is refused, never overwritten) that records what built it; a lookup loads the engine only when
the sidecar matches the current key *and* the engine bytes hash to what the sidecar recorded.
Anything else (another GPU, another TensorRT, a truncated file, a missing sidecar, bytes the
runtime refuses to deserialize) rebuilds the engine and says why; it is never loaded.

The key is also in the file name, so machines that share a cache folder do not overwrite each
other; the sidecar check still guards files that were copied or renamed by hand. Pure Python:
no TensorRT needed, so CI tests the decisions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from neuroedge.atomic import write_bytes, write_text


@dataclass(frozen=True)
class EngineKey:
    """Everything an engine depends on."""

    model_sha256: str  # of the prepared ONNX file's bytes
    settings: str  # canonical JSON of variant, profile shapes, workspace, optimisation level
    tensorrt_version: str
    gpu_name: str
    compute_capability: str  # "9.0"

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()

    def device_stem(self) -> str:
        """``trt<version>-<gpu>``: what a timing cache or engine is only valid for."""
        gpu = re.sub(r"[^A-Za-z0-9]+", "-", self.gpu_name).strip("-").lower() or "gpu"
        return f"trt{self.tensorrt_version}-{gpu}"

    def file_stem(self) -> str:
        return f"{self.digest()[:16]}-{self.device_stem()}"

    def mismatch(self, other: EngineKey) -> str | None:
        """Why an engine built under ``other`` must not run under ``self``; None if it may."""
        diffs = [
            f"{field} {theirs!r} (now {ours!r})"
            for field, ours, theirs in zip(
                asdict(self), asdict(self).values(), asdict(other).values()
            )
            if ours != theirs
        ]
        return "built for " + ", ".join(diffs) if diffs else None


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class CacheOutcome:
    """What the cache did: ``loaded`` an engine, or ``built`` one (with the reason)."""

    action: str  # "loaded" | "built"
    path: Path
    reason: str


def sidecar_path(engine: Path) -> Path:
    """``<engine name>.json``: the whole name, so ``lif.fp16`` and ``lif.int8`` do not share
    one sidecar and ``model.engine`` leaves a user's ``model.json`` alone."""
    return engine.with_name(engine.name + ".json")


def _is_sidecar(side: Path) -> bool:
    """Whether ``side`` holds a record of the shape ``EngineCache.store`` writes."""
    try:
        record = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and {"key", "engine_sha256"} <= set(record)


def check_sidecar_slot(engine: Path) -> None:
    """FileExistsError when the sidecar of ``engine`` would replace a file that is not one:
    a user's own file there must not be overwritten (checked before a minutes-long build)."""
    side = sidecar_path(engine)
    if side.exists() and not _is_sidecar(side):
        raise FileExistsError(
            f"{side}: already there and not a neuroedge engine sidecar; the engine {engine.name} "
            f"records what built it in {side.name}, which would replace this file: move it, "
            "or give the engine another name"
        )


def stale_reason(engine: Path, key: EngineKey) -> str | None:
    """Why the engine at ``engine`` must be rebuilt for ``key``; None when it may be loaded."""
    if not engine.is_file():
        return "no cached engine"
    side = sidecar_path(engine)
    try:
        record = json.loads(side.read_text(encoding="utf-8"))
        built = EngineKey(**record["key"])
        recorded_sha = str(record["engine_sha256"])
    except FileNotFoundError:
        return f"{side.name} is missing: unknown origin"
    except (ValueError, KeyError, TypeError) as err:
        return f"{side.name} is unreadable ({err})"
    why = key.mismatch(built)
    if why:
        return why
    if file_sha256(engine) != recorded_sha:
        return f"{engine.name} does not hash to its recorded sha256 (truncated or modified)"
    return None


class EngineCache:
    """``load_or_build`` engines under ``root``; see the module docstring for the rules."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path_for(self, key: EngineKey) -> Path:
        return self.root / f"{key.file_stem()}.engine"

    def load_or_build(
        self,
        key: EngineKey,
        build: Callable[[], bytes],
        deserialize: Callable[[bytes], Any],
        *,
        path: Path | None = None,
    ) -> tuple[Any, CacheOutcome]:
        """The deserialized engine for ``key``, from ``path`` (default: the cache slot).

        ``build() -> bytes`` makes a serialized engine; ``deserialize(bytes)`` returns the engine
        or None when the runtime refuses it (then it is rebuilt once, and a refusal of a fresh
        build raises ValueError).
        """
        path = Path(path) if path is not None else self.path_for(key)
        check_sidecar_slot(path)
        reason = stale_reason(path, key)
        if reason is None:
            engine = deserialize(path.read_bytes())
            if engine is not None:
                return engine, CacheOutcome("loaded", path, "key, sidecar and sha256 match")
            reason = f"the runtime refused to deserialize {path.name}"
        data = build()
        engine = deserialize(data)
        if engine is None:
            raise ValueError(f"a freshly built engine for {path.name} does not deserialize")
        self.store(path, key, data)
        return engine, CacheOutcome("built", path, reason)

    @staticmethod
    def store(path: Path, key: EngineKey, data: bytes) -> None:
        """Engine first, sidecar last: a crash in between leaves no sidecar, hence a rebuild."""
        check_sidecar_slot(path)
        write_bytes(path, data)
        record = {
            "key": asdict(key),
            "engine_sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
        }
        write_text(sidecar_path(path), json.dumps(record, indent=2) + "\n")
