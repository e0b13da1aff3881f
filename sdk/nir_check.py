"""``check_nir``: any framework's NIR graph on a backend, compared output by output with
neuroedge's NIR runner on the host (``neuroedge nir FILE``)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuroedge.errors import BackendUnavailable, ConfigError, ExportRefused, InputError
from neuroedge.registry import get_backend, probed
from neuroedge.types import Artifact, ModelSpec

# the random spike input's settings when no ``inputs`` file is given
RANDOM_INPUT: dict[str, Any] = {"steps": 20, "batch": 2, "density": 0.3, "seed": 0}


def check_nir(
    path: str | os.PathLike[str],
    backend: str = "lava",
    inputs: str | os.PathLike[str] | None = None,
    dt: float | None = None,
    steps: int | None = None,
    batch: int | None = None,
    density: float | None = None,
    seed: int | None = None,
    options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run a NIR file (written by any framework) on ``backend`` and compare every output with
    neuroedge's NIR runner on the host, step by step.

    Inputs: a ``.npy`` of shape (T, batch, *input shape) (``inputs``), else random binary
    spikes (``steps`` x ``batch``, on with probability ``density``, ``seed``; defaults
    ``RANDOM_INPUT``; refused with ``inputs``, whose shape gives T and batch). Returns, per graph
    output, its shape, the fraction of equal values (spike agreement for spike trains) and
    the max abs error; plus the backend's chip fit where it reports one.
    """
    from neuroedge.export.nir import read_nir
    from neuroedge.export.nir_run import run_nir
    from neuroedge.types import NIRProgram

    from neuroedge.errors import ArtifactError
    from neuroedge.paths import refuse_empty

    refuse_empty(path, "NIR file", "name a .nir file", ArtifactError)  # '' was the folder '.'
    if Path(path).is_dir():  # was "no such NIR file", of a folder that exists
        raise ArtifactError(f"{path}: is a directory, not a NIR file")
    steps, batch, density, seed = _random_input(inputs, steps, batch, density, seed)
    graph = read_nir(path)
    dt = _nir_check_args(graph, path, backend, dt, steps, batch, density)
    name, shape = _nir_input(graph, path)
    x = _nir_input_array(path, inputs, shape, steps, batch, density, seed)
    options = _nir_check_options(backend, _nir_options(backend, options, x))
    try:
        reference = run_nir(graph, {name: x}, dt=dt)
    except ExportRefused as err:  # an unsupported node: say which file it is in
        raise ExportRefused(f"{path}: {err}") from None
    _nir_check_mapping(backend, path, graph, dt, options)
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
    if "input_scale" in artifact.meta:
        report["input_scale"] = artifact.meta["input_scale"]
    fit = artifact.meta.get("chip_fit")
    if fit is not None:
        report["chip_fit"] = {"neurons": fit.neurons, "synapses": fit.synapses, "cores": fit.cores}
    return report


def _random_input(
    inputs: Any, steps: Any, batch: Any, density: Any, seed: Any
) -> tuple[Any, Any, Any, Any]:
    """The random input's settings, defaulted and the seed checked; InputError where any is
    given with an input file."""
    given = dict(zip(RANDOM_INPUT, (steps, batch, density, seed)))
    named = [k for k, v in given.items() if v is not None]
    if inputs is not None and named:
        flags = ", ".join(f"{k} (--{k})" for k in named)
        raise InputError(
            f"{flags} set the random spike input; with the input file {inputs} they have no "
            "use (its shape gives T and batch): leave them out"
        )
    steps, batch, density, seed = (RANDOM_INPUT[k] if v is None else v for k, v in given.items())
    from neuroedge.config_values import SEED_MAX

    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed={seed!r}: expected an integer in [0, 2**32) (numpy's seeds)")
    return steps, batch, density, seed


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
    dt = _nir_dt(graph, path, dt)
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


def _nir_dt(graph: Any, path: str | os.PathLike[str], given: float | None) -> float:
    """The graph's dt in seconds: the file's metadata, else ``given``. Given as well, it must
    equal the file's (up to float32 rounding: rel. 1e-6): a different one is refused, never
    silently preferred; the file's dt is what its weights were trained at."""
    stored = (graph.metadata or {}).get("dt")
    if stored is None and given is None:
        raise ValueError(
            f"{path}: the graph carries no dt in its metadata; give dt (seconds "
            "per step): frameworks disagree on the default"
        )
    values = []
    for value in (stored, given):
        if value is None:
            continue
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{path}: dt {value!r} is not a number of seconds per step") from None
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{path}: dt {value!r} must be a finite number of seconds > 0")
        values.append(value)
    if len(values) == 2 and not math.isclose(values[0], values[1], rel_tol=1e-6):
        raise ConfigError(
            f"{path}: dt {values[1]:g} s (given, --dt) differs from the dt {values[0]:g} s "
            "the file stores; leave --dt out to run at the file's dt (--dt is for files "
            "without one)"
        )
    return values[0]


def _nir_options(
    backend: str, options: Mapping[str, str] | None, x: Any
) -> Mapping[str, str] | None:
    """``options`` with lava's ``input_scale`` defaulted for the input ``x`` when absent:
    1 for binary spikes (the random input, or a 0/1 ``--input``), else 255 (graded inputs
    in [0, 1]): see neuroedge.backends.lava.default_input_scale."""
    if backend != "lava" or "input_scale" in (options or {}):
        return options
    from neuroedge.backends.lava import default_input_scale

    return {**(options or {}), "input_scale": str(int(default_input_scale(x)))}


def _nir_check_options(backend: str, options: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """``options``, checked as the backend's compile checks them where that needs no backend
    installed, before its probe (which ``_nir_run_backend`` reads first):
    ``check_options_before_build`` (lava's ``checked_options``: every value), so a bad value is
    the same error on every machine, lava installed or not."""
    from neuroedge.backends.base import check_options_before_build

    check_options_before_build(get_backend(backend), options)
    return options


def _nir_check_mapping(
    backend: str,
    path: str | os.PathLike[str],
    graph: Any,
    dt: float,
    options: Mapping[str, str] | None,
) -> None:
    """Whether lava takes ``graph`` (its populations, their time constants at ``dt``, the chip
    fit), as its compile maps it, before its probe: the mapping needs no lava installed."""
    if backend != "lava":
        return
    from neuroedge.backends.base import int_option
    from neuroedge.backends.lava_map import Loihi2Limits, chip_fit, plan

    try:
        layers = plan(graph, dt)
    except ExportRefused as err:  # a node lava cannot map: say which file it is in
        raise ExportRefused(f"{path}: {err}") from None
    fit = chip_fit(layers, Loihi2Limits(chips=int_option(backend, options or {}, "chips", 1)))
    if not fit.fits:
        raise ExportRefused(f"{path} does not fit Loihi 2: {fit.reason}")


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

    from neuroedge.npyfile import load_npy

    if inputs is None:
        x = np.random.default_rng(seed).random((steps, batch, *shape)) < density
        return x.astype(np.float32)
    try:
        loaded = load_npy(inputs)  # an .npz archive is refused: several arrays, which one?
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
    availability = probed(be)
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
    """Per output: its shape, fraction of equal values, max abs error and reference mean;
    ``spike_kappa`` (Cohen's kappa, neuroedge.bench.parity.spike_kappa: agreement beyond
    chance at the two firing rates) where both sides hold only 0 and 1 (a spike train); and
    a ``warning`` when the reference never changes (no spike, or a constant readout): any
    backend that is silent too then "agrees" 1.0 (kappa 1.0 too), which proves nothing
    (often a dt that leaves the neurons below threshold)."""
    import numpy as np
    from neuroedge.bench.parity import is_binary, spike_kappa

    compared: dict[str, dict[str, Any]] = {}
    for name in outputs:
        ref, out = np.asarray(reference[name]), np.asarray(got[name])
        silent = bool(ref.size == 0 or np.all(ref == ref.flat[0]))
        compared[name] = {
            "shape": list(ref.shape),
            "equal_fraction": float(np.mean(ref == out)),
            "max_abs_err": float(np.abs(ref.astype(np.float64) - out).max()) if ref.size else 0.0,
            "reference_mean": float(ref.mean()) if ref.size else 0.0,
            "reference_silent": silent,
        }
        if ref.size and is_binary(ref) and is_binary(out):
            compared[name]["spike_kappa"] = spike_kappa(ref, out)
        if silent:
            compared[name]["warning"] = (
                "reference output silent (constant "
                f"{float(ref.flat[0]) if ref.size else 0.0:g} over all steps): the comparison "
                "proves nothing; check dt and the input (--dt, --density, --input)"
            )
    return compared
