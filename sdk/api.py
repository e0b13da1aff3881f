"""The public verbs: model lookup, deploy, export, profile."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuroedge.atomic import check_writable
from neuroedge.config_values import check_repeats
from neuroedge.errors import BackendUnavailable, ExportRefused
from neuroedge.registry import get_backend, get_model, model_table, probed
from neuroedge.nir_check import check_nir  # noqa: F401 (public: neuroedge.api.check_nir)
from neuroedge.types import Artifact, ModelSpec, Report, TorchProgram

EXPORT_TARGETS = ("onnx", "nir", "tensorrt")


def models() -> dict[str, str]:
    """``{name: one-line summary}`` of every registered model."""
    return {name: get_model(name).summary for name in sorted(model_table())}


def model(name: str) -> ModelSpec:
    return get_model(name)


def ready_backend(name: str, backend: str) -> Any:
    """The backend ``backend``, available on this machine and taking model ``name``;
    BackendUnavailable names the reason otherwise (cheap: before any input is made)."""
    be = get_backend(backend)
    availability = probed(be)  # a probe that raises is its reason, as in doctor
    if not availability.ok:
        raise BackendUnavailable(f"backend {backend!r} is not available: {availability.reason}")
    support = be.supports(get_model(name))
    if not support.ok:
        raise BackendUnavailable(f"backend {backend!r} does not take {name}: {support.reason}")
    return be


UNTRAINED_NOTE = "weights: untrained (random initialisation)"


def deploy(
    name: str,
    backend: str = "host",
    config: Mapping[str, Any] | None = None,
    options: Mapping[str, str] | None = None,
    inputs: Mapping[str, Any] | None = None,
    repeats: int = 50,
) -> tuple[Artifact, Report]:
    """Build ``name``, compile it for ``backend`` and profile it on ``inputs`` (default: the
    built net's example input; see ``neuroedge.arrays.load_inputs`` for a user's own), timed
    over ``repeats`` calls after the warm-up.

    The report has the latency percentiles and throughput, the SOPs, MACs and energy
    estimate counted on the host reference for that input (torch models), and, off the host,
    parity with it: ``max_abs_err``, ``max_rel_err``, ``spike_agreement``,
    ``within_tolerance`` against the model's tolerance, with a "parity: ..." note per breach.
    """
    artifact, report, _ = deploy_with_inputs(name, backend, config, options, inputs, repeats)
    return artifact, report


def deploy_with_inputs(
    name: str,
    backend: str = "host",
    config: Mapping[str, Any] | None = None,
    options: Mapping[str, str] | None = None,
    inputs: Mapping[str, Any] | None = None,
    repeats: int = 50,
    seed: int = 0,
) -> tuple[Artifact, Report, Mapping[str, Any]]:
    """``deploy``, also returning the inputs it profiled: ``inputs``, else the example for
    ``seed`` of the net the build made (``ModelSpec.built_example``: its settings as the build
    settled them, e.g. a checkpoint's split, not the checkpoint file read again, which another
    process may have replaced since)."""
    repeats = check_repeats(repeats)
    spec, be = get_model(name), ready_backend(name, backend)
    spec.check_config(config, "build")
    _check_before_build(spec, be, options, inputs)
    cfg = {**spec.default_config, **(config or {})}
    program = spec.build(cfg)
    artifact = be.compile(program, spec, options)
    # what the build settled travels with the artifact: ``profile`` builds the same example
    settled = {**cfg, **((getattr(program, "meta", None) or {}).get("config") or {})}
    artifact = dataclasses.replace(artifact, meta={**artifact.meta, "build_config": settled})
    example = spec.built_example(seed, program, cfg) if inputs is None else inputs
    report = be.profile(artifact, example, repeats)
    metrics, notes = _reference_metrics(program, spec, artifact, example)
    if (getattr(program, "meta", None) or {}).get("trained") is False:  # as the bench notes it
        notes = (UNTRAINED_NOTE, *notes)  # train_if_missing=false ran random weights unsaid
    return (
        artifact,
        Report(
            report.model,
            report.backend,
            report.variant,
            report.device,
            {**report.metrics, **metrics},
            report.fallbacks,
            report.rejections,
            (*report.notes, *notes),
        ),
        example,
    )


def _check_before_build(
    spec: ModelSpec, be: Any, options: Mapping[str, Any] | None, inputs: Any
) -> None:
    """What needs no built net, checked before the build (which may train for minutes): the
    options by name and type as the backend's compile checks them, and ``inputs`` by names,
    dtypes, ranks, fixed and shared axes, bounds (and NaN where the backend's ``finite_inputs``
    says its run refuses it whatever the build makes); the axes the built net fixes (its
    ``meta["axes"]``) are checked when the backend runs them; a value that is not text
    (``neuroedge.paths.refuse_undecodable``) is refused by name."""
    from neuroedge.backends.base import check_options_before_build
    from neuroedge.errors import ConfigError
    from neuroedge.paths import refuse_undecodable
    from neuroedge.shapes import bind_inputs

    check_options_before_build(be, options)
    for key, value in (options or {}).items():  # a path=... name that is not text, as the CLI
        if isinstance(value, (str, os.PathLike)):
            refuse_undecodable(value, f"option {key}", ConfigError)
    if inputs is not None:
        bind_inputs(spec, inputs, finite=bool(getattr(be, "finite_inputs", False)))


def _reference_metrics(
    program: Any, spec: ModelSpec, artifact: Artifact, example: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Ops counted on a host run of ``example`` and the artifact's parity with it."""
    from neuroedge.bench.parity import spike_layers
    from neuroedge.bench.runner import check_parity, ops_metrics
    from neuroedge.bench.sops import OpCounter
    from neuroedge.shapes import bind_inputs

    host = get_backend("host")
    host_art = artifact if artifact.backend == "host" else host.compile(program, spec)
    metrics: dict[str, Any] = {}
    if isinstance(program, TorchProgram):
        with OpCounter(program.module) as counter:
            reference = host.run(host_art, example)
        metrics.update(ops_metrics(counter.totals(bind_inputs(spec, example).get("batch", 1))))
    else:
        reference = host.run(host_art, example)
    if artifact.backend == "host":
        return metrics, []
    if artifact.backend == "null":  # zero outputs by design: no parity (as the bench runner)
        return metrics, ["null backend: fake timing and zero outputs; no parity"]
    outputs = get_backend(artifact.backend).run(artifact, example)
    variant = str(artifact.meta.get("variant", "default"))
    parity, notes = check_parity(
        spec, artifact.backend, variant, reference, outputs, layers=spike_layers(program)
    )
    return {**metrics, **parity}, notes


def export(
    name: str,
    target: str = "onnx",
    out: str | os.PathLike[str] | None = None,
    config: Mapping[str, Any] | None = None,
    precision: str = "fp32",
) -> Path:
    """Export ``name`` to ``target`` at ``out``; returns the written path.

    ``tensorrt`` builds a serialized engine (``precision`` fp32, fp16 or int8, calibrated on
    the model's examples) for the GPU it runs on, from the model's ONNX export; it needs
    TensorRT and an NVIDIA GPU and is refused with the probe's reason elsewhere.
    """
    from neuroedge.paths import artifact_dir

    spec = get_model(name)
    if target not in EXPORT_TARGETS:  # before the model's own list, which may lack it
        raise ExportRefused(
            f"unknown export target {target!r}; valid: {', '.join(EXPORT_TARGETS)}"
            f" ({name} exports to {', '.join(spec.exportable) or 'none'})"
        )
    spec.check_config(config, "build")
    if out is not None:
        _check_out(out)  # before any build or training
    if target not in ("tensorrt", "onnx") and precision != "fp32":
        raise ExportRefused(
            f"precision {precision!r} applies to ONNX graphs and TensorRT engines; {target!r} "
            "exports are fp32"
        )
    if target == "tensorrt":
        return _export_engine(spec, out, config, precision)
    from neuroedge.export.tensorrt import VARIANTS as PRECISIONS  # fp32, fp16, int8

    if precision not in PRECISIONS:
        raise ExportRefused(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    if target not in spec.exportable:
        raise ExportRefused(
            f"{name} cannot be exported to {target!r} (exportable: "
            f"{', '.join(spec.exportable) or 'none'})"
        )
    program = spec.build({**spec.default_config, **(config or {})})
    stem = "model" if precision == "fp32" else f"model.{precision}"  # never over the fp32 one
    path = Path(out) if out else artifact_dir(name, target) / f"{stem}.{target}"
    if target == "onnx":
        from neuroedge.export.onnx import export_onnx

        if not isinstance(program, TorchProgram):
            raise ExportRefused(f"{name} builds a {program.kind} program; ONNX needs torch")
        if precision != "fp32":
            return _export_reduced(program, spec, path, precision)
        return export_onnx(program, spec, path)
    if target == "nir":
        from neuroedge.export.nir import to_nir, write_nir

        if not isinstance(program, TorchProgram):
            raise ExportRefused(f"{name} builds a {program.kind} program; NIR needs a torch SNN")
        return write_nir(to_nir(program, spec), path)
    raise ExportRefused(f"unknown export target {target!r}; valid: {', '.join(EXPORT_TARGETS)}")


def _check_out(out: Any) -> None:
    """``export``'s ``out``: a path (ExportRefused naming it otherwise: 3 was a bare
    TypeError) where a file can be written."""
    if not isinstance(out, (str, os.PathLike)):
        raise ExportRefused(
            f"out={out!r} ({type(out).__name__}): expected a file path (str or os.PathLike)"
        )
    check_writable(out)


def _export_reduced(program: TorchProgram, spec: ModelSpec, path: Path, precision: str) -> Path:
    """The step-form graph in fp16 or int8 (Q/DQ calibrated on the model's examples) at
    ``path``, with its initial state beside it; built through the onnxrt backend, which checks
    ``precision`` before exporting."""
    import tempfile

    from neuroedge.export.tensorrt import carry_state

    with tempfile.TemporaryDirectory() as tmp:
        art = get_backend("onnxrt").compile(
            program,
            spec,
            {"form": "step", "path": str(Path(tmp) / "model.onnx"), "precision": precision},
        )
        return carry_state(Path(str(art.path)), Path(str(art.path)), path)


def _export_engine(
    spec: ModelSpec,
    out: str | os.PathLike[str] | None,
    config: Mapping[str, Any] | None,
    precision: str,
) -> Path:
    from neuroedge.export.tensorrt import VARIANTS
    from neuroedge.paths import artifact_dir

    if precision not in VARIANTS:  # before the probe: a typo is refused on any machine
        raise ExportRefused(
            f"precision {precision!r}: TensorRT engines are built at one of {', '.join(VARIANTS)}"
        )
    if "onnx" not in spec.exportable:
        raise ExportRefused(
            f"{spec.name} has no ONNX export, which a TensorRT engine is "
            f"built from (exportable: {', '.join(spec.exportable) or 'none'})"
        )
    backend = get_backend("tensorrt")
    availability = backend.probe()
    if not availability.ok:
        raise BackendUnavailable(
            f"a TensorRT engine is built on the GPU it will run on; not here: {availability.reason}"
        )
    program = spec.build({**spec.default_config, **(config or {})})
    path = Path(out) if out else artifact_dir(spec.name, "tensorrt") / f"{precision}.engine"
    art = backend.compile(program, spec, {"variant": precision, "engine_path": str(path)})
    return Path(str(art.path))


def profile(
    artifact: Artifact, inputs: Mapping[str, Any] | None = None, repeats: int = 50
) -> Report:
    """Latency of ``artifact`` on its backend (by default the spec's example input for the
    config ``deploy`` built it with, as the build settled it: the built net's); ``deploy`` adds
    the counted ops and the parity."""
    repeats = check_repeats(repeats)
    if inputs is None:
        inputs = artifact.spec.example_for(0, artifact.meta.get("build_config"))
    return get_backend(artifact.backend).profile(artifact, inputs, repeats)
