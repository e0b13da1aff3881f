"""The public verbs: model lookup, deploy, export, profile."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuroedge.errors import BackendUnavailable, ExportRefused
from neuroedge.registry import get_backend, get_model, model_table
from neuroedge.types import Artifact, ModelSpec, Report, TorchProgram

EXPORT_TARGETS = ("onnx", "nir")


def models() -> dict[str, str]:
    """``{name: one-line summary}`` of every registered model."""
    return {name: get_model(name).summary for name in sorted(model_table())}


def model(name: str) -> ModelSpec:
    return get_model(name)


def deploy(name: str, backend: str = "host", config: Mapping[str, Any] | None = None,
           options: Mapping[str, str] | None = None) -> tuple[Artifact, Report]:
    """Build ``name``, compile it for ``backend`` and profile it on the example input."""
    spec = get_model(name)
    be = get_backend(backend)
    availability = be.probe()
    if not availability.ok:
        raise BackendUnavailable(f"backend {backend!r} is not available: {availability.reason}")
    support = be.supports(spec)
    if not support.ok:
        raise BackendUnavailable(f"backend {backend!r} does not take {name}: {support.reason}")
    program = spec.build({**spec.default_config, **(config or {})})
    artifact = be.compile(program, spec, options)
    return artifact, be.profile(artifact, spec.example(0))


def export(name: str, target: str = "onnx", out: str | os.PathLike[str] | None = None,
           config: Mapping[str, Any] | None = None) -> Path:
    """Export ``name`` to ``target`` at ``out``; returns the written path."""
    from neuroedge.paths import artifact_dir

    spec = get_model(name)
    if target not in spec.exportable:
        raise ExportRefused(f"{name} cannot be exported to {target!r} (exportable: "
                            f"{', '.join(spec.exportable) or 'none'})")
    program = spec.build({**spec.default_config, **(config or {})})
    path = Path(out) if out else artifact_dir(name, target) / f"model.{target}"
    if target == "onnx":
        from neuroedge.export.onnx import export_onnx

        if not isinstance(program, TorchProgram):
            raise ExportRefused(f"{name} builds a {program.kind} program; ONNX needs torch")
        return export_onnx(program, spec, path)
    if target == "nir":
        from neuroedge.export.nir import to_nir, write_nir

        if not isinstance(program, TorchProgram):
            raise ExportRefused(f"{name} builds a {program.kind} program; NIR needs a torch SNN")
        return write_nir(to_nir(program, spec), path)
    raise ExportRefused(f"unknown export target {target!r}; valid: {', '.join(EXPORT_TARGETS)}")


def profile(artifact: Artifact, inputs: Mapping[str, Any] | None = None,
            repeats: int = 50) -> Report:
    """Latency of ``artifact`` on its backend (the spec's example input by default)."""
    inputs = artifact.spec.example(0) if inputs is None else inputs
    return get_backend(artifact.backend).profile(artifact, inputs, repeats)
