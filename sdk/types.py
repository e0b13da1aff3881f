"""Core vocabulary of neuroedge: frozen, typed records that cross module boundaries.

Nothing here imports torch, onnx or any backend library: `import neuroedge` stays cheap.
Every record validates itself in ``__post_init__`` and raises ``ValueError``/``TypeError``
naming the bad value and the allowed ones.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union

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
        if not self.name.isidentifier():
            raise ValueError(f"IOSpec name {self.name!r} must be an identifier")
        _require(self.dtype, DTYPES, f"IOSpec {self.name!r} dtype")
        if self.bounds is not None and not (
            len(self.bounds) == 2 and self.bounds[0] <= self.bounds[1]
        ):
            raise ValueError(f"IOSpec {self.name!r}: bounds {self.bounds} are not (low, high)")
        for dim in self.shape:
            if not isinstance(dim, (int, str)) or (isinstance(dim, int) and dim < 0):
                raise ValueError(f"IOSpec {self.name!r}: bad dimension {dim!r} in {self.shape}")

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
        if not self.ok and not self.reason:
            raise ValueError("an unavailable backend must say why (reason is empty)")


@dataclass(frozen=True)
class Support:
    """Whether a backend takes a given model, and why not."""

    ok: bool
    reason: str = ""

    def __post_init__(self) -> None:
        if not self.ok and not self.reason:
            raise ValueError("a refusal must carry its reason (reason is empty)")


CONFIG_USES = ("build", "train", "bench")


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
        if "." not in self.name:
            raise ValueError(f"model name {self.name!r} must be 'family.method'")
        _require(self.family, FAMILIES, f"model {self.name!r} family")
        names = [io.name for io in (*self.inputs, *self.outputs)]
        if len(set(names)) != len(names):
            raise ValueError(f"model {self.name!r}: duplicate IO names in {names}")
        for use in self.config_keys:
            _require(use, CONFIG_USES, f"model {self.name!r} config_keys use")

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
        import inspect

        signature = inspect.signature(target)

        @functools.wraps(target)
        def checked(*args: Any, **kwargs: Any) -> Any:
            # the same refusal as the CLI's, for hooks called from Python
            config = signature.bind_partial(*args, **kwargs).arguments.get("config")
            self.check_config(config, "build" if name == "recording" else name)
            return target(*args, **kwargs)

        return checked

    def example_for(self, seed: int, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``example(seed)``, or ``example(seed, config=config)`` where the example function
        takes a ``config`` (its shapes follow the build config, e.g. a model width)."""
        import inspect

        if config and "config" in inspect.signature(self.example).parameters:
            return self.example(seed, config=config)
        return self.example(seed)

    def built_example(
        self, seed: int, program: Any, config: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``example_for`` with what the built ``program`` settled (its ``meta["config"]``: a
        checkpoint's size or split, ...) over ``config``: an input the built net takes."""
        settled = (getattr(program, "meta", None) or {}).get("config") or {}
        return self.example_for(seed, {**(config or {}), **settled})

    def valid_config_keys(self, use: str) -> set[str] | None:
        """The config keys ``use`` (build, train or bench) reads; None where not declared."""
        if use not in CONFIG_USES:
            raise ValueError(f"unknown config use {use!r}; uses: {', '.join(CONFIG_USES)}")
        if use not in self.config_keys:
            return None
        return set(self.config_keys[use]) | (set(self.default_config) if use == "build" else set())

    def check_config(self, config: Mapping[str, Any] | None, use: str) -> None:
        """ConfigError naming each key of ``config`` that ``use`` (build, train or bench) of
        this model would not read, so a misspelt key fails before any work, not silently; and
        a ``smoke`` or ``untrained`` switch that is not true or false."""
        from neuroedge.config_values import FLAGS, flag

        for key in FLAGS:
            if config and key in config:
                flag(config, key)  # "no" would be truthy: an untrained model run silently
        valid = self.valid_config_keys(use)
        if not config or valid is None:
            return
        from neuroedge.errors import ConfigError

        unknown = [k for k in config if k not in valid]
        if unknown:
            import difflib

            hints = [
                f"{k!r}"
                + (
                    f" (did you mean {near[0]!r}?)"
                    if (near := difflib.get_close_matches(k, valid, 1))
                    else ""
                )
                for k in unknown
            ]
            what = {"build": "build", "train": "training", "bench": "benchmark"}[use]
            raise ConfigError(
                f"{self.name}'s {what} does not read the config key"
                f"{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; "
                f"its keys: {', '.join(sorted(valid)) or 'none'}"
            )

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
        if not isinstance(self.value, (int, float)):
            raise TypeError(f"Measurement value must be a number, got {type(self.value).__name__}")

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

    def with_metrics(self, **more: Measurement) -> Report:
        merged = {**self.metrics, **more}
        return Report(
            self.model,
            self.backend,
            self.variant,
            self.device,
            merged,
            self.fallbacks,
            self.rejections,
            self.notes,
        )

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
