"""The Lava backend: a neuroedge SNN or NIR graph run as Lava processes under Loihi 2's
simulator configuration (``Loihi2SimCfg``), floating_pt or fixed_pt (bit-accurate) variants.

Install Lava with ``python -m neuroedge.backends.lava_install`` (lava-nc 0.10.0 on Python 3.11;
see that module). The mapping (neuron equations, threshold folding, quantisation, chip fit) is
in neuroedge.backends.lava_map, the processes are built in neuroedge.backends.lava_processes;
this module compiles and runs them:

    RingBuffer(x) -> Sparse/Dense -> LIF -> Sparse/Dense -> LIF -> ... -> Dense -> RingBuffer
                                      '-> RingBuffer (spikes)   '-> RingBuffer (spikes)

Design decisions, and why:

* Batch: one Lava network per batch size, the batch laid side by side in the neuron axis with
  block-diagonal synapses (``kron(I_B, W)``): a whole batch runs in one Lava run.
* Each synaptic process delays by one step, so a population at depth d (longest path from
  the input, see lava_map) shows host step t at Lava step t + d; a run lasts T + max depth
  steps (zero input at the end) and outputs are realigned. Graphs with shortcuts (a
  population fed by several edges, as a residual net's membrane shortcut) get one synapse
  per edge into the same ``a_in``, the shorter paths delayed by ``DelaySparse``/``DelayDense``
  so every input of a population carries the same host step.
* Outputs: the graph's Output nodes, plus any ``"concat:<name>"`` metadata entry (an output
  that is several populations flattened and concatenated, which NIR cannot express as a node).
* Recurrence (a population's edge onto itself): a plain synapse from its spikes back into it,
  which arrives at the next step by itself. Such a network is rebuilt for every call: a loop
  that keeps firing through the zero padding after the input would otherwise carry the last
  call's spikes into the next call's first step (tested with a self-exciting population).
* A bias into a CubaLIF's synaptic current cannot be a voltage bias (it accumulates in u):
  it comes from a second source, a constant channel per sample during the input steps.
* The network is compiled once per (batch, T) and reused: each call writes the new input
  into the source ring buffer and runs T + depth steps; ``LIFReset`` zeroes each population's
  u and v at the step its input starts (so a bias never integrates alone during the pipeline
  fill), and no state goes through Lava's Var.set, which ships arrays element by element.
  Throughput therefore measures simulated steps, not compilation.
* Spikes are recorded packed 8 per value by a fixed Sparse process (see packing_matrix),
  because reading results (Var.get) is the slowest part of a Lava CPU run.
* Hardware: ``Loihi2HwCfg`` is selected by default when Intel's Loihi extension (lava-loihi,
  INRC only) is installed, else ``Loihi2SimCfg``; ``options["config"]`` ("hw"|"sim") forces
  one, and "hw" without the extension is refused with the reason. The probe says which.
"""

from __future__ import annotations

import importlib.util
import threading
import weakref
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from neuroedge.backends.base import MeasuredBackend, axes_meta, check_options, int_option
from neuroedge.backends.lava_install import import_problem, installed_problem, installed_version
from neuroedge.backends.lava_map import Layer, Loihi2Limits, chip_fit, plan, quantize
from neuroedge.backends.lava_processes import (  # public names, kept importable from here
    PACK,  # noqa: F401
    build_processes,  # noqa: F401
    build_registered,
    packing_matrix,  # noqa: F401
    stop_network,
    unpack_spikes,
)
from neuroedge.log_handlers import handlers_kept
from neuroedge.signals import sigint_blocked
from neuroedge.errors import BackendUnavailable, ConfigError, ExportRefused, InputError
from neuroedge.shapes import as_numpy, bind_inputs
from neuroedge.types import (
    Artifact,
    Availability,
    ModelSpec,
    NIRProgram,
    Program,
    Support,
    TorchProgram,
)

VARIANTS = ("floating_pt", "fixed_pt")
OPTIONS = ("variant", "config", "chips", "input_scale")  # what compile reads
HW_EXTENSION = "lava.magma.compiler.subcompilers.nc"
DEFAULT_INPUT_SCALE = 255.0  # graded inputs in [0, 1]; see default_input_scale for spikes


def hardware_reason() -> str | None:
    """None when Intel's Loihi 2 extension is importable, else why the simulator is used."""
    if importlib.util.find_spec("lava") is None:
        return "lava is not installed"
    try:
        found = importlib.util.find_spec(HW_EXTENSION) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        return (
            "Loihi 2 hardware extension (lava-loihi, Intel INRC members only) is not "
            "installed: runs use the Loihi2SimCfg CPU simulation"
        )
    return None


class LavaBackend(MeasuredBackend):
    name: ClassVar[str] = "lava"
    finite_inputs: ClassVar[bool] = True
    variants: ClassVar[tuple[str, ...]] = VARIANTS
    throughput_unit: ClassVar[str] = "steps"  # bench reports simulated time steps per second

    def probe(self) -> Availability:
        problem = installed_problem()  # the stock lava-nc crashes at import on Python 3.11
        if problem is not None:
            return Availability(False, problem)
        if importlib.util.find_spec("lava.magma") is None:
            return Availability(
                False, f"lava-nc {installed_version()} is installed but lava.magma is missing"
            )
        hw = hardware_reason()
        where = "Loihi2HwCfg (hardware extension found)" if hw is None else f"Loihi2SimCfg; {hw}"
        return Availability(True, f"lava-nc {installed_version()}: {where}")

    def supports(self, spec: ModelSpec) -> Support:
        """Spiking models whose smoke build maps to Lava populations (traced, not guessed)."""
        if spec.family not in ("snn", "event"):
            return Support(False, f"{spec.name} is a {spec.family} model; Lava runs spiking nets")
        try:
            graph, dt = _graph_of(spec.build({"smoke": True}), spec)
            plan(graph, dt)
        except ExportRefused as err:
            return Support(False, f"{spec.name} does not map to Lava: {err}")
        return Support(True)

    def checked_options(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """``check_options`` and every option value compile reads (variant, config, chips,
        input_scale), checked without lava installed: run, bench, deploy and ``neuroedge nir``
        call it before the build (which may train) and the probe."""
        given = check_options(self.name, options, OPTIONS)
        variant = given.get("variant", "floating_pt")
        if variant not in VARIANTS:
            raise ConfigError(
                f"backend 'lava' option variant={variant!r}: expected one of {', '.join(VARIANTS)}"
            )
        config = given.get("config", "sim")
        if config not in ("hw", "sim"):
            raise ConfigError(f"backend 'lava' option config={config!r}: expected 'hw' or 'sim'")
        int_option(self.name, given, "chips", 1)
        _input_scale(given)
        return given

    def compile(
        self, program: Program, spec: ModelSpec, options: Mapping[str, str] | None = None
    ) -> Artifact:
        """Map ``program`` (TorchProgram SNN or NIRProgram) to Lava; refuses what cannot fit."""
        options = self.checked_options(options)
        variant = options.get("variant", "floating_pt")
        availability = self.probe()  # then lava's import, which the probe leaves to here
        reason = availability.reason if not availability.ok else import_problem()
        if reason is not None:
            raise BackendUnavailable(reason)
        config = options.get("config", "hw" if hardware_reason() is None else "sim")
        if config == "hw" and hardware_reason() is not None:
            raise ExportRefused(f"config=hw: {hardware_reason()}")
        graph, dt = _graph_of(program, spec)
        layers = plan(graph, dt)
        fit = chip_fit(layers, Loihi2Limits(chips=int_option(self.name, options, "chips", 1)))
        if not fit.fits:
            raise ExportRefused(f"{spec.name} does not fit Loihi 2: {fit.reason}")
        input_scale = _input_scale(options)
        scales = {n: input_scale for n, v in graph.nodes.items() if type(v).__name__ == "Input"}
        fixed = (
            [quantize(lay, scales) for lay in layers]  # each picks its bias channel's scale
            if variant == "fixed_pt"
            else None
        )
        outputs = _output_sources(graph)
        meta = {
            "device": "cpu",
            "variant": variant,
            "config": config,
            "chip_fit": fit,
            "dt": dt,
            "input_scale": input_scale,
            "outputs": outputs,
            "weight_quant_err": [f.weight_err for f in fixed] if fixed else [],
            **axes_meta(program),
        }
        handle = LavaNetwork(layers, fixed, variant, config, input_scale, outputs, set(scales))
        return Artifact(self.name, "lava", spec, meta=meta, handle=handle)

    def run(self, artifact: Artifact, inputs: Mapping[str, Any]) -> dict[str, Any]:
        bind_inputs(
            artifact.spec, inputs, finite=self.finite_inputs, fixed=artifact.meta.get("axes")
        )
        if len(inputs) != 1:
            raise ValueError(f"lava runs single-input networks, got inputs {sorted(inputs)}")
        value = as_numpy(next(iter(inputs.values())))  # a tensor may require grad
        return artifact.handle.run(np.asarray(value, dtype=np.float32))


def _input_scale(options: Mapping[str, str]) -> float:
    """The ``input_scale`` option (default ``DEFAULT_INPUT_SCALE``), checked whatever the
    variant: an integer in 1..255 (fixed_pt feeds inputs as 8-bit graded spikes
    ``round(x * input_scale)``; floating_pt does not read it, but a bad value is still an
    error, never ignored)."""
    raw = options.get("input_scale", DEFAULT_INPUT_SCALE)
    try:
        input_scale = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"backend 'lava' option input_scale={raw!r}: expected a number") from None
    if not (1 <= input_scale <= 255 and input_scale.is_integer()):
        shown = int(raw) if isinstance(raw, float) and raw.is_integer() else raw  # --input-scale
        raise ConfigError(
            f"input_scale {shown!r}: fixed_pt inputs are graded spikes round(x * "
            "input_scale), so it must be an integer in 1..255 (checked for every variant)"
        )
    return input_scale


def default_input_scale(x: Any) -> float:
    """The ``input_scale`` a run on input ``x`` should default to: 1 for binary spikes (every
    value 0 or 1: a graded 1 then carries the spike exactly, and a graph input's synapse
    keeps its own 8-bit exponent), else ``DEFAULT_INPUT_SCALE`` (255: graded inputs in
    [0, 1] use all 8 bits). ``neuroedge nir`` applies it when ``--input-scale`` is absent."""
    from neuroedge.bench.parity import is_binary

    return 1.0 if is_binary(x) else DEFAULT_INPUT_SCALE


def _graph_of(program: Program, spec: ModelSpec) -> tuple[Any, float]:
    if isinstance(program, NIRProgram):
        return program.graph, program.dt
    if isinstance(program, TorchProgram):
        from neuroedge.export.nir import to_nir

        graph = to_nir(program, spec)
        return graph, float(graph.metadata["dt"])
    raise ExportRefused(f"lava compiles SNN torch programs or NIR graphs, got {program.kind}")


def _output_sources(graph: Any) -> dict[str, str | tuple[str, ...]]:
    """``{output name: population name}`` for every Output node of the graph, plus every
    ``"concat:<output>": "pop,pop,..."`` metadata entry: an output that is the named
    populations flattened and concatenated (NIR has no concatenating node)."""
    found: dict[str, str | tuple[str, ...]] = {}
    for name, node in graph.nodes.items():
        if type(node).__name__ == "Output":
            found[name] = next(s for s, d in graph.edges if d == name)
    for key, value in (graph.metadata or {}).items():
        if key.startswith("concat:"):
            parts = tuple(str(value).split(","))
            missing = [p for p in parts if p not in graph.nodes]
            if missing:
                raise ExportRefused(
                    f"graph metadata {key!r} names populations {missing} that "
                    "are not nodes of the graph"
                )
            found[key.split(":", 1)[1]] = parts
    return found


def _assemble(pops: dict[str, np.ndarray], source: str | tuple[str, ...]) -> np.ndarray:
    if isinstance(source, str):
        return pops[source]
    steps, batch = pops[source[0]].shape[:2]
    return np.concatenate([pops[p].reshape(steps, batch, -1) for p in source], axis=-1)


class LavaNetwork:
    """Lava processes for one mapping, built per (batch, T) on first use and reused."""

    def __init__(
        self,
        layers: list[Layer],
        fixed: list[Any] | None,
        variant: str,
        config: str,
        input_scale: float,
        outputs: dict[str, str | tuple[str, ...]],
        inputs: set[str],
    ) -> None:
        self.layers, self.fixed, self.variant = layers, fixed, variant
        self.config, self.input_scale, self.outputs = config, input_scale, outputs
        self.inputs = inputs  # names of the graph's Input nodes (graded sources)
        self.recurrent = any(syn.source == layer.name for layer in layers for syn in layer.synapses)
        self._built: dict[tuple[int, int], dict[str, Any]] = {}
        self._lock = threading.Lock()  # one run at a time: two threads on one net hung Lava
        # Lava's runtime keeps worker processes alive until stopped; without this an
        # interpreter that never calls close() would hang at exit.
        self._finalizer = weakref.finalize(self, _stop_all, self._built)

    def close(self) -> None:
        """Stop Lava's runtime processes of every built network (after a run in progress)."""
        with self._lock:
            _stop_all(self._built)

    def _run_cfg(self) -> Any:
        if self.config == "hw":
            from lava.magma.core.run_configs import Loihi2HwCfg

            return Loihi2HwCfg()
        from lava.magma.core.run_configs import Loihi2SimCfg

        return Loihi2SimCfg(select_tag=self.variant)

    def _encode(self, x: np.ndarray, depth: int) -> np.ndarray:
        steps = x.shape[0]
        flat = x.reshape(steps, -1).T  # (batch * features, T), sample-major
        data = np.zeros((flat.shape[0], steps + depth), dtype=np.float64)
        data[:, :steps] = flat
        if self.fixed is not None:
            graded = np.round(data * self.input_scale)  # checked as floats: a cast wraps
            if not np.isfinite(x).all():
                raise InputError(
                    f"fixed_pt input holds {int((~np.isfinite(x)).sum())} NaN or inf values; "
                    "Loihi's 8-bit graded spikes need finite inputs"
                )
            if np.abs(graded).max(initial=0) > 255:
                raise InputError(
                    f"fixed_pt input {float(np.abs(x).max()):.4g} x input_scale "
                    f"{self.input_scale:g} exceeds Loihi's 8-bit graded spikes "
                    "(255); compile with a smaller input_scale option"
                )
            return graded.astype(np.int32)
        return data

    def _step(self, data: np.ndarray, batch: int, steps: int, depth: int) -> dict[str, Any]:
        """The (batch, T) network run over the encoded ``data``; every population's record."""
        from lava.magma.core.run_conditions import RunSteps

        key = (batch, steps)
        if key in self._built and self.recurrent:  # spikes of the last run's tail would
            stop_network(self._built.pop(key))  # circle back into step 0: a fresh net per call
        # Lava adds a root handler per process it makes (Process.__init__) and one to its
        # compiler's logger per compile: kept while it runs (its errors show), then removed
        try:
            with handlers_kept("", "lava.magma.compiler.compiler"):
                if key not in self._built:
                    self._built[key] = build_registered(self, batch, data, steps)
                else:
                    self._built[key]["source"].data.set(data)
                source = self._built[key]["source"]
                if source.runtime is None:  # its workers start without SIGINT: Ctrl-C to the
                    with sigint_blocked():  # group reaches this process alone, which ends them
                        source.create_runtime(run_cfg=self._run_cfg())
                source.run(condition=RunSteps(num_steps=steps + depth))
            return self._collect(self._built[key], steps, batch)
        except BaseException:  # stopped mid-step (SIGTERM, Ctrl-C) or failed: Lava's own stop
            if key in self._built:  # would wait for its workers' answers for ever
                stop_network(self._built.pop(key), orderly=False)
            raise

    def run(self, x: np.ndarray, every_population: bool = False) -> dict[str, np.ndarray]:
        """Step the network over ``x`` (T, batch, ...); outputs realigned to host steps.
        ``every_population``: every population by NIR node name (spikes, or the readout's
        value) instead of the graph's outputs, for per-layer parity."""
        if x.ndim < 2 or 0 in x.shape[:2]:
            raise ValueError(
                f"lava input of shape {list(x.shape)}: needs (T, batch, ...) with T >= 1 and "
                "batch >= 1"
            )
        steps, batch = int(x.shape[0]), int(x.shape[1])
        # a spiking population's record arrives one step after it (the packing synapse)
        depth = max(layer.depth + int(layer.spiking) for layer in self.layers)
        data = self._encode(x, depth)
        with self._lock:
            pops = self._step(data, batch, steps, depth)
        if every_population:
            return pops
        return {out: _assemble(pops, src) for out, src in self.outputs.items()}

    def _collect(self, net: dict[str, Any], steps: int, batch: int) -> dict[str, np.ndarray]:
        pops: dict[str, np.ndarray] = {}
        for i, layer in enumerate(self.layers):
            k = layer.depth
            rec = np.asarray(net["sinks"][layer.name].data.get(), dtype=np.float64)
            if layer.spiking:  # packed 8 spikes per value, one step later (packing Dense)
                bits = unpack_spikes(
                    rec[:, k + 1 : k + 1 + steps], batch * int(np.prod(layer.shape))
                )
                pops[layer.name] = bits.T.reshape(steps, batch, *layer.shape)
            else:
                rec = rec[:, k : k + steps].T.reshape(steps, batch, -1)
                pops[layer.name] = _integrate(
                    layer, rec, self.fixed[i].scale if self.fixed else 1.0
                )
        return pops


def _stop_all(built: dict[tuple[int, int], dict[str, Any]]) -> None:
    while built:
        stop_network(built.popitem()[1])


def _integrate(layer: Layer, synaptic: np.ndarray, scale: float) -> np.ndarray:
    """The readout on the host, Lava's LIF equations without a threshold:
    ``u_t = (1 - du) u_{t-1} + a_t / scale``, ``v_t = (1 - dv) v_{t-1} + u_t + bias``."""
    u = np.zeros(synaptic.shape[1:], dtype=np.float64)
    v = np.zeros(synaptic.shape[1:], dtype=np.float64)
    trace = []
    for a in synaptic:
        u = (1.0 - layer.du) * u + a / scale
        v = (1.0 - layer.dv) * v + u + layer.bias
        trace.append(v.copy())
    return np.stack(trace).astype(np.float32).reshape(len(trace), -1, *layer.shape)
