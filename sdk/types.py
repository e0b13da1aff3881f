"""Core vocabulary of neuroedge: frozen, typed records that cross module boundaries.

Nothing here imports torch, onnx or any backend library: `import neuroedge` stays cheap.
Every record validates itself in ``__post_init__`` and raises ``ValueError``/``TypeError``
naming the bad value and the allowed ones.
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Union

from neuroedge.config_values import field_bool, field_names, field_real, field_strs, set_fields

FAMILIES = ("ann", "snn", "event", "vla", "ttt", "algorithm")
OP_UNITS = ("MAC", "SOP", "FLOP", "step")
ARTIFACT_FORMATS = ("torch", "onnx", "trt-engine", "nir", "lava", "python", "none")
HOW = ("measured", "counted", "estimated")
DTYPES = ("float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool")


def load_target(target: str) -> Any:
    """The object named by ``"package.module:attribute"``, imported on demand."""
    module_name, sep, attr = target.partition(":")
    if not sep or not attr:
        raise ValueError(f"{target!r} is not of the form 'module:attribute'")
    return getattr(importlib.import_module(module_name), attr)


Hook = Union[Callable[..., Any], str, None]  # a callable, or "module:function" loaded lazily


def _require(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise ValueError(f"{what} {value!r} is not one of {', '.join(allowed)}")


@dataclass(frozen=True)
class Paper:
    """The publication a model or method comes from."""

    title: str
    venue: str  # e.g. "ICML 2026", "arXiv"
    year: int
    url: str = ""


@dataclass(frozen=True)
class IOSpec:
    """One named input or output: shape with symbolic axes ("batch", "T", "tokens") and dtype."""

    name: str
    shape: tuple[int | str, ...]  # ints are fixed sizes, strings are symbolic axes
    dtype: str = "float32"  # numpy dtype name
    bounds: tuple[float, float] | None = None  # inclusive value range (token ids: 0..vocab-1)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"IOSpec name {self.name!r} must be an identifier")
        _require(self.dtype, DTYPES, f"IOSpec {self.name!r} dtype")
        what = f"IOSpec {self.name!r}"
        dims = field_names(self.shape, f"{what} shape", (numbers.Integral, str))
        for dim in dims:
            if isinstance(dim, bool) or (isinstance(dim, numbers.Integral) and dim < 0):
                raise ValueError(f"{what}: bad dimension {dim!r} in {self.shape}")
        set_fields(self, shape=tuple(d if isinstance(d, str) else int(d) for d in dims))
        if self.bounds is not None:
            ends = field_names(self.bounds, f"{what} bounds", numbers.Real)
            if len(ends) != 2 or not ends[0] <= ends[1]:
                raise ValueError(f"{what}: bounds {self.bounds} are not (low, high)")
            set_fields(self, bounds=tuple(field_real(e, f"{what} bounds") for e in ends))

    def describe(self) -> str:
        values = "" if self.bounds is None else f" in [{self.bounds[0]:g}, {self.bounds[1]:g}]"
        return f"{self.name}[{', '.join(str(d) for d in self.shape)}]:{self.dtype}{values}"


@dataclass(frozen=True)
class Efficiency:
    """What a model claims to save: the op unit it counts and its nominal cost per sample."""

    op_unit: str  # MAC, SOP, FLOP or step
    ops_per_sample: float | None = None  # nominal, from the paper or a count; None if data-driven
    sparsity: float | None = None  # fraction of zero weights or activations, 0..1

    def __post_init__(self) -> None:
        _require(self.op_unit, OP_UNITS, "Efficiency op_unit")
        for name in ("ops_per_sample", "sparsity"):
            if getattr(self, name) is not None:
                set_fields(self, **{name: field_real(getattr(self, name), f"Efficiency {name}")})
        if self.sparsity is not None and not 0.0 <= self.sparsity <= 1.0:
            raise ValueError(f"Efficiency sparsity {self.sparsity} is outside [0, 1]")


@dataclass(frozen=True)
class TorchProgram:
    """A torch module stepped over time with explicit state.

    ``module.forward(*inputs_t, *state) -> (*outputs_t, *state')``. For stateful programs the
    inputs carry a leading time axis T and the runner calls the step T times, starting from
    ``init_state(batch)``; stateless programs (no state names) are called once.
    """

    module: Any  # torch.nn.Module
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    state_names: tuple[str, ...] = ()
    init_state: Callable[[int], tuple[Any, ...]] | None = None  # batch -> initial state tensors
    meta: Mapping[str, Any] = field(default_factory=dict)

    kind = "torch"

    def __post_init__(self) -> None:
        for name in ("input_names", "output_names", "state_names"):
            set_fields(self, **{name: field_names(getattr(self, name), f"TorchProgram {name}")})
        if self.state_names and self.init_state is None:
            raise ValueError("TorchProgram with state_names needs init_state(batch)")

    @property
    def stateful(self) -> bool:
        return bool(self.state_names)


@dataclass(frozen=True)
class NIRProgram:
    """A NIR graph (``nir.NIRGraph``) with the time step its continuous parameters assume."""

    graph: Any
    dt: float  # seconds per discrete step
    meta: Mapping[str, Any] = field(default_factory=dict)

    kind = "nir"

    def __post_init__(self) -> None:
        set_fields(self, dt=field_real(self.dt, "NIRProgram dt (seconds per step)"))
        if not (self.dt > 0 and math.isfinite(self.dt)):
            raise ValueError(f"NIRProgram dt must be a positive number of seconds, got {self.dt}")


@dataclass(frozen=True)
class HostProgram:
    """A plain function run on the host: ``fn(**inputs) -> {name: array}``.

    Algorithms (influence maximisation, fair allocation, ...) need not pretend to be modules.
    """

    fn: Callable[..., Mapping[str, Any]]
    meta: Mapping[str, Any] = field(default_factory=dict)

    kind = "host"


Program = Union[TorchProgram, NIRProgram, HostProgram]


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run on this machine, and why not."""

    ok: bool
    reason: str = ""

    def __post_init__(self) -> None:
        field_bool(self.ok, "Availability ok")
        field_strs(self, "reason")
        if not self.ok and not self.reason:
            raise ValueError("an unavailable backend must say why (reason is empty)")


@dataclass(frozen=True)
class Support:
    """Whether a backend takes a given model, and why not."""

    ok: bool
    reason: str = ""

    def __post_init__(self) -> None:
        field_bool(self.ok, "Support ok")
        field_strs(self, "reason")
        if not self.ok and not self.reason:
            raise ValueError("a refusal must carry its reason (reason is empty)")


CONFIG_USES = ("build", "train", "bench")
# 'family.method' (snn.lif_convnet; `neuroedge nir` names "nir:FILE.nir", spaces and all): a
# dot inside, no slash (the name becomes a file name under $NEUROEDGE_HOME), no bare ends
MODEL_NAME = re.compile(r"[^/\\.\s][^/\\]*\.[^/\\]*[^/\\.\s]")


@dataclass(frozen=True)
class ModelSpec:
    """A registered model or method: its IO contract, how to build it, and its tolerances.

    ``build(config) -> Program``; ``example(seed) -> {input name: numpy array}`` (tiny,
    generated, no downloads); ``tolerance[backend]`` is the max abs error allowed against the
    host reference. ``train(config, out)`` and ``bench(out_dir=, backends=, config=, history=)``
    are optional hooks used by the CLI, given as callables or as ``"module:function"`` strings
    so a spec never imports its heavy training or benchmark code; read them with ``hook()``.
    ``bench_backends`` names the backends a ``bench`` hook measures: the CLI refuses others
    rather than hand them to a benchmark that would leave them out. ``recording(path,
    config=, crop=, max_windows=) -> (inputs, line)`` turns an event-camera recording into
    the model's inputs (``neuroedge run NAME --events FILE``).
    """

    name: str
    family: str
    summary: str  # one line, shown by `neuroedge list`
    inputs: tuple[IOSpec, ...]
    outputs: tuple[IOSpec, ...]
    build: Callable[[Mapping[str, Any]], Program]
    example: Callable[[int], dict[str, Any]]
    paper: Paper | None = None
    efficiency: Efficiency = field(default_factory=lambda: Efficiency("FLOP"))
    tolerance: Mapping[str, float] = field(default_factory=dict)
    default_config: Mapping[str, Any] = field(default_factory=dict)
    train: Hook = None
    bench: Hook = None
    recording: Hook = None  # an event recording -> inputs, for ``run --events``
    bench_backends: tuple[str, ...] = ("host",)  # the backends the ``bench`` hook measures
    # True where the bench hook runs ``seeds=[...]`` through ``bench.seeds.map_seeds``, so
    # ``torchrun`` can share the seeds out over processes and machines (``bench.distributed``)
    seed_sweep: bool = False
    # True where the train hook trains data-parallel when started by ``torchrun`` (rank 0
    # writes the checkpoint; ``neuroedge.distributed``); other models refuse such a launch
    data_parallel: bool = False
    # evaluate(run, config) -> {metric: Measurement}: task metrics (accuracy, mAP, ...) computed
    # with ``run(inputs) -> outputs`` of whichever backend is being measured.
    evaluate: Callable[..., Mapping[str, Measurement]] | None = None
    exportable: tuple[str, ...] = ()  # export targets this model supports, e.g. ("onnx", "nir")
    # The config keys each use of the model reads: "build" (run, deploy, export and the
    # generic bench; default_config's keys count too), "train" (the train hook) and "bench"
    # (the bench hook). check_config refuses any other key; a use not listed is not checked.
    config_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not MODEL_NAME.fullmatch(self.name):
            raise ValueError(
                f"model name {self.name!r} must be 'family.method', e.g. snn.lif_convnet"
            )
        _require(self.family, FAMILIES, f"model {self.name!r} family")
        what = f"model {self.name!r}"
        for name in ("inputs", "outputs", "bench_backends", "exportable"):
            kind = IOSpec if name in ("inputs", "outputs") else str
            set_fields(self, **{name: field_names(getattr(self, name), f"{what} {name}", kind)})
        for name in ("seed_sweep", "data_parallel"):
            field_bool(getattr(self, name), f"{what} {name}")
        names = [io.name for io in (*self.inputs, *self.outputs)]
        if len(set(names)) != len(names):
            raise ValueError(f"{what}: duplicate IO names in {names}")
        for use in self.config_keys:
            _require(use, CONFIG_USES, f"{what} config_keys use")
        uses, at = self.config_keys.items(), f"{what} config_keys"
        set_fields(self, config_keys={u: field_names(k, f"{at}[{u!r}]") for u, k in uses})

    def hook(self, name: str) -> Callable[..., Any] | None:
        """The ``train``, ``bench`` or ``recording`` hook as a callable (loading a
        "module:function" string) that refuses config keys the hook does not read
        (``check_config``; a recording reads the build's) before it runs."""
        if name not in ("train", "bench", "recording"):
            raise ValueError(f"unknown hook {name!r}; hooks: train, bench, recording")
        value = getattr(self, name)
        target = load_target(value) if isinstance(value, str) else value
        if target is None:
            return None
        import functools

        signature = inspect.signature(target)

        @functools.wraps(target)
        def checked(*args: Any, **kwargs: Any) -> Any:
            # the same refusal as the CLI's, for hooks called from Python
            config = signature.bind_partial(*args, **kwargs).arguments.get("config")
            self.check_config(config, "build" if name == "recording" else name)
            return target(*args, **kwargs)

        return checked

    def example_for(
        self, seed: int, config: Mapping[str, Any] | None = None, split: str = ""
    ) -> dict[str, Any]:
        """``example(seed)``, given ``config`` (its shapes follow the build config, e.g. a
        model width) and ``split`` where set and the example function takes them."""
        takes = inspect.signature(self.example).parameters
        given = (("config", config), ("split", split))
        return self.example(seed, **{k: v for k, v in given if v and k in takes})

    def built_example(
        self, seed: int, program: Any, config: Mapping[str, Any] | None = None, split: str = ""
    ) -> dict[str, Any]:
        """``example_for`` with what the built ``program`` settled (its ``meta["config"]``: a
        checkpoint's size or split, ...) over ``config``: an input the built net takes;
        ``split="train"``: training data (int8 calibration) where ``example`` takes a split."""
        settled = (getattr(program, "meta", None) or {}).get("config") or {}
        return self.example_for(seed, {**(config or {}), **settled}, split)

    def valid_config_keys(self, use: str) -> set[str] | None:
        """The config keys ``use`` (build, train or bench) reads; None where not declared."""
        if use not in CONFIG_USES:
            raise ValueError(f"unknown config use {use!r}; uses: {', '.join(CONFIG_USES)}")
        if use not in self.config_keys:
            return None
        return set(self.config_keys[use]) | (set(self.default_config) if use == "build" else set())

    def check_config(self, config: Mapping[str, Any] | None, use: str) -> None:
        """ConfigError naming each key of ``config`` that ``use`` (build, train or bench) of
        this model would not read, so a misspelt key fails before any work, not silently; a
        key that is no string; and a ``smoke`` or ``untrained`` switch that is not true or
        false (``neuroedge.config_values.check_keys``)."""
        from neuroedge.config_values import check_keys

        check_keys(self.name, config, self.valid_config_keys(use), use)

    def tolerance_for(self, backend: str) -> float:
        return float(self.tolerance.get(backend, self.tolerance.get("default", 1e-4)))


@dataclass(frozen=True)
class Artifact:
    """What a backend compiled: a file on disk and/or an in-memory handle."""

    backend: str
    format: str
    spec: ModelSpec
    path: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    handle: Any = field(default=None, compare=False, repr=False)  # session, module, process

    def __post_init__(self) -> None:
        _require(self.format, ARTIFACT_FORMATS, "Artifact format")


@dataclass(frozen=True)
class Measurement:
    """One number with its unit and how it was obtained."""

    value: float
    unit: str
    how: Literal["measured", "counted", "estimated"] = "measured"

    def __post_init__(self) -> None:
        _require(self.how, HOW, "Measurement how")
        field_strs(self, "unit")
        set_fields(self, value=field_real(self.value, f"Measurement value ({self.unit})"))

    def to_json(self) -> dict[str, Any]:
        return {"value": float(self.value), "unit": self.unit, "how": self.how}


@dataclass(frozen=True)
class Report:
    """One row of a benchmark: a model variant on one backend, with its metrics.

    ``fallbacks`` lists anything that ran somewhere other than asked (a test fails on any);
    ``rejections`` lists what was refused and why, so a table never has an unexplained gap.
    """

    model: str
    backend: str
    variant: str = "default"
    device: str = "cpu"
    metrics: Mapping[str, Measurement] = field(default_factory=dict)
    fallbacks: tuple[str, ...] = ()
    rejections: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        field_strs(self, "model", "backend", "variant", "device")
        what = f"Report {self.model}/{self.backend}"
        for name in ("fallbacks", "rejections", "notes"):
            set_fields(self, **{name: field_names(getattr(self, name), f"{what} {name}")})
        metrics = self.metrics if isinstance(self.metrics, Mapping) else {None: self.metrics}
        bad = {
            k: v
            for k, v in metrics.items()
            if not (isinstance(k, str) and isinstance(v, Measurement))
        }
        if bad:  # a bare number here fails later, in to_json, far from its maker
            raise TypeError(f"{what} metrics must map names to Measurement(...), got {bad}")

    def with_metrics(self, **more: Measurement) -> Report:
        return replace(self, metrics={**self.metrics, **more})

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "variant": self.variant,
            "backend": self.backend,
            "device": self.device,
            "metrics": {k: m.to_json() for k, m in self.metrics.items()},
            "fallbacks": list(self.fallbacks),
            "rejections": list(self.rejections),
            "notes": list(self.notes),
        }
