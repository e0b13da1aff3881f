"""The public verbs: model lookup, deploy, export, profile."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuroedge.atomic import check_writable
from neuroedge.errors import BackendUnavailable, ExportRefused
from neuroedge.registry import get_backend, get_model, model_table
from neuroedge.types import Artifact, ModelSpec, Report, TorchProgram

EXPORT_TARGETS = ("onnx", "nir", "tensorrt")


def models() -> dict[str, str]:
    """``{name: one-line summary}`` of every registered model."""
    return {name: get_model(name).summary for name in sorted(model_table())}


def model(name: str) -> ModelSpec:
    return get_model(name)


def deploy(
    name: str,
    backend: str = "host",
    config: Mapping[str, Any] | None = None,
    options: Mapping[str, str] | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> tuple[Artifact, Report]:
    """Build ``name``, compile it for ``backend`` and profile it on ``inputs`` (default: the
    model's example input; see ``neuroedge.arrays.load_inputs`` for a user's own).

    The report has the latency percentiles and throughput, the SOPs, MACs and energy
    estimate counted on the host reference for that input (torch models), and, off the host,
    parity with it: ``max_abs_err``, ``max_rel_err``, ``spike_agreement``,
    ``within_tolerance`` against the model's tolerance, with a "parity: ..." note per breach.
    """
    spec = get_model(name)
    be = get_backend(backend)
    availability = be.probe()
    if not availability.ok:
        raise BackendUnavailable(f"backend {backend!r} is not available: {availability.reason}")
    support = be.supports(spec)
    if not support.ok:
        raise BackendUnavailable(f"backend {backend!r} does not take {name}: {support.reason}")
    spec.check_config(config, "build")
    cfg = {**spec.default_config, **(config or {})}
    program = spec.build(cfg)
    artifact = be.compile(program, spec, options)
    # the config travels with the artifact, so ``profile`` builds the same example input
    artifact = dataclasses.replace(artifact, meta={**artifact.meta, "build_config": cfg})
    example = spec.example_for(0, cfg) if inputs is None else inputs
    report = be.profile(artifact, example)
    metrics, notes = _reference_metrics(program, spec, artifact, example)
    return artifact, Report(
        report.model,
        report.backend,
        report.variant,
        report.device,
        {**report.metrics, **metrics},
        report.fallbacks,
        report.rejections,
        (*report.notes, *notes),
    )


def _reference_metrics(
    program: Any, spec: ModelSpec, artifact: Artifact, example: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Ops counted on a host run of ``example`` and the artifact's parity with it."""
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
    outputs = get_backend(artifact.backend).run(artifact, example)
    parity, notes = check_parity(
        spec, artifact.backend, str(artifact.meta.get("variant", "default")), reference, outputs
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
    spec.check_config(config, "build")
    if out is not None:
        check_writable(out)  # before any build or training
    if target != "tensorrt" and precision != "fp32":
        raise ExportRefused(
            f"precision {precision!r} applies to TensorRT engines; {target!r} exports are fp32"
        )
    if target == "tensorrt":
        return _export_engine(spec, out, config, precision)
    if target not in spec.exportable:
        raise ExportRefused(
            f"{name} cannot be exported to {target!r} (exportable: "
            f"{', '.join(spec.exportable) or 'none'})"
        )
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
    config ``deploy`` built it with); ``deploy`` adds the counted ops and the parity."""
    if inputs is None:
        inputs = artifact.spec.example_for(0, artifact.meta.get("build_config"))
    return get_backend(artifact.backend).profile(artifact, inputs, repeats)


def check_nir(
    path: str | os.PathLike[str],
    backend: str = "lava",
    inputs: str | os.PathLike[str] | None = None,
    dt: float | None = None,
    steps: int = 20,
    batch: int = 2,
    density: float = 0.3,
    seed: int = 0,
    options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run a NIR file (written by any framework) on ``backend`` and compare every output with
    neuroedge's NIR runner on the host, step by step.

    Inputs: a ``.npy`` of shape (T, batch, *input shape) (``inputs``), else random binary
    spikes (``steps`` x ``batch``, each on with probability ``density``). Returns, per graph
    output, its shape, the fraction of equal values (spike agreement for spike trains) and
    the max abs error; plus the backend's chip fit where it reports one.
    """
    from neuroedge.export.nir import read_nir
    from neuroedge.export.nir_run import run_nir
    from neuroedge.types import NIRProgram

    graph = read_nir(path)
    dt = _nir_check_args(graph, path, backend, dt, steps, batch, density)
    name, shape = _nir_input(graph, path)
    x = _nir_input_array(path, inputs, shape, steps, batch, density, seed)
    try:
        reference = run_nir(graph, {name: x}, dt=dt)
    except ExportRefused as err:  # an unsupported node: say which file it is in
        raise ExportRefused(f"{path}: {err}") from None
    outputs = [n for n, v in graph.nodes.items() if type(v).__name__ == "Output"]
    program = NIRProgram(graph, dt)
    spec = _nir_spec(path, program, name, shape, outputs, reference, x)
    artifact, got, seconds = _nir_run_backend(backend, program, spec, options, {name: x})
    report: dict[str, Any] = {
        "file": str(path),
        "backend": backend,
        "dt": dt,
        "steps": int(x.shape[0]),
        "batch": int(x.shape[1]),
        "seconds": seconds,
        "outputs": _nir_compare(outputs, reference, got),
    }
    fit = artifact.meta.get("chip_fit")
    if fit is not None:
        report["chip_fit"] = {"neurons": fit.neurons, "synapses": fit.synapses, "cores": fit.cores}
    return report


def _nir_check_args(
    graph: Any,
    path: str | os.PathLike[str],
    backend: str,
    dt: float | None,
    steps: int,
    batch: int,
    density: float,
) -> Any:
    """The step length (given, else the graph's metadata dt), refusing bad arguments."""
    dt = dt if dt is not None else (graph.metadata or {}).get("dt")
    if dt is None:
        raise ValueError(
            f"{path}: the graph carries no dt in its metadata; give dt (seconds "
            "per step): frameworks disagree on the default"
        )
    try:
        dt = float(dt)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: dt {dt!r} is not a number of seconds per step") from None
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"{path}: dt {dt!r} must be a finite number of seconds > 0")
    if steps < 1 or batch < 1 or not 0.0 <= density <= 1.0:
        raise ValueError(
            f"steps ({steps}) and batch ({batch}) must be >= 1 and density "
            f"({density}) a fraction in [0, 1]"
        )
    if backend not in ("lava",):
        raise ValueError(
            f"backend {backend!r}: NIR files run on 'lava' here (the host "
            "reference is neuroedge's NIR runner, which every output is compared "
            "with)"
        )
    return dt


def _nir_input(graph: Any, path: str | os.PathLike[str]) -> tuple[str, tuple[int, ...]]:
    """The name and per-sample shape of the graph's single Input node."""
    from neuroedge.export.nir_run import node_shape

    names = [n for n, v in graph.nodes.items() if type(v).__name__ == "Input"]
    if len(names) != 1:
        raise ValueError(f"{path}: expected one Input node, found {names}")
    shape = node_shape(graph.nodes[names[0]], "output_type") or node_shape(
        graph.nodes[names[0]], "input_type"
    )
    return names[0], shape


def _nir_input_array(
    path: str | os.PathLike[str],
    inputs: str | os.PathLike[str] | None,
    shape: tuple[int, ...],
    steps: int,
    batch: int,
    density: float,
    seed: int,
) -> Any:
    """The (T, batch, *shape) float32 input: loaded from ``inputs``, else random spikes."""
    import numpy as np

    if inputs is None:
        x = np.random.default_rng(seed).random((steps, batch, *shape)) < density
        return x.astype(np.float32)
    try:
        loaded = np.load(inputs, allow_pickle=False)
        if not isinstance(loaded, np.ndarray):  # an .npz archive: several arrays, which one?
            raise ValueError(f"an .npz archive of {list(loaded.files)}, not one .npy array")
        if not (np.issubdtype(loaded.dtype, np.number) or loaded.dtype == bool):
            raise ValueError(f"dtype {loaded.dtype}")
        if np.iscomplexobj(loaded):  # astype would drop the imaginary part with a warning
            raise ValueError(f"complex dtype {loaded.dtype}; spikes and currents are real")
        x = loaded.astype(np.float32)
    except (ValueError, TypeError, OSError) as err:
        raise ValueError(f"{inputs}: not a numeric .npy array ({err})") from err
    if x.ndim < 2 or 0 in x.shape[:2]:
        raise ValueError(
            f"{inputs}: input of shape {list(x.shape)}; expected (T, batch, ...) with at least "
            "one step and a batch of at least one"
        )
    bad = np.argwhere(~np.isfinite(x))
    if len(bad):
        raise ValueError(
            f"{inputs}: {len(bad)} values are not finite, the first at index "
            f"{tuple(int(i) for i in bad[0])} ({x[tuple(bad[0])]})"
        )
    if x.ndim != 2 + len(shape) or tuple(x.shape[2:]) != shape:
        raise ValueError(
            f"{inputs}: input of shape {list(x.shape)}; {path} expects "
            f"(T, batch, {', '.join(map(str, shape))})"
        )
    return x


def _nir_spec(
    path: str | os.PathLike[str],
    program: Any,
    name: str,
    shape: tuple[int, ...],
    outputs: list[str],
    reference: Mapping[str, Any],
    x: Any,
) -> ModelSpec:
    """A throwaway model spec wrapping the NIR program and its one input."""
    import numpy as np
    from neuroedge.types import IOSpec

    return ModelSpec(
        f"nir:{Path(path).name}",
        "snn",
        f"NIR graph {path}",
        (IOSpec(name, ("T", "batch", *shape)),),
        tuple(IOSpec(o, ("T", "batch", *np.shape(reference[o])[2:])) for o in outputs),
        build=lambda cfg: program,
        example=lambda s: {name: x},
    )


def _nir_run_backend(
    backend: str,
    program: Any,
    spec: ModelSpec,
    options: Mapping[str, str] | None,
    feed: Mapping[str, Any],
) -> tuple[Artifact, Mapping[str, Any], float]:
    """Compile and run the program on ``backend``: its artifact, outputs and seconds taken."""
    import time

    be = get_backend(backend)
    availability = be.probe()
    if not availability.ok:
        raise BackendUnavailable(f"backend {backend!r} is not available: {availability.reason}")
    start = time.perf_counter()
    artifact = be.compile(program, spec, options)
    try:
        got = be.run(artifact, feed)
    finally:
        close = getattr(artifact.handle, "close", None)
        if close is not None:
            close()
    return artifact, got, time.perf_counter() - start


def _nir_compare(
    outputs: list[str], reference: Mapping[str, Any], got: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """Per output: its shape, fraction of equal values, max abs error and reference mean."""
    import numpy as np

    compared: dict[str, dict[str, Any]] = {}
    for name in outputs:
        ref, out = np.asarray(reference[name]), np.asarray(got[name])
        compared[name] = {
            "shape": list(ref.shape),
            "equal_fraction": float(np.mean(ref == out)),
            "max_abs_err": float(np.abs(ref.astype(np.float64) - out).max()) if ref.size else 0.0,
            "reference_mean": float(ref.mean()) if ref.size else 0.0,
        }
    return compared
