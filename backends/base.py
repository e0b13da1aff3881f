"""The backend contract and the pieces every backend shares.

A backend is a small class: ``probe`` (cheap, never raises) is separate from ``supports`` (can I
take this model) and from ``compile``; every refusal carries its reason.
"""

from __future__ import annotations

import numbers
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from neuroedge.shapes import bind_inputs
from neuroedge.types import Artifact, Availability, ModelSpec, Program, Report, Support


@runtime_checkable
class Backend(Protocol):
    name: ClassVar[str]
    # True where ``run`` refuses NaN/inf inputs whatever the program (checked before a build
    # too); a backend whose refusal depends on the built program (host) leaves it False
    finite_inputs: ClassVar[bool]

    def probe(self) -> Availability: ...

    def supports(self, spec: ModelSpec) -> Support: ...

    def compile(
        self, program: Program, spec: ModelSpec, options: Mapping[str, str] | None = None
    ) -> Artifact: ...

    def run(self, artifact: Artifact, inputs: Mapping[str, Any]) -> dict[str, Any]: ...

    def profile(
        self, artifact: Artifact, inputs: Mapping[str, Any], repeats: int = 50
    ) -> Report: ...


def check_options(
    backend: str,
    options: Mapping[str, Any] | None,
    allowed: Sequence[str] | None,
    values: bool = True,
) -> dict[str, Any]:
    """``options`` as a dict, a None value meaning not set (left out); ConfigError for options
    that are no mapping (``"form=step"``), a name that is no string, with ``values`` a value
    that is no string, path or number (``--option KEY=VALUE`` gives strings), and, where
    ``allowed`` is not None, a name the backend does not read, naming it and the valid ones
    (a misspelt option must not run with other settings)."""
    from neuroedge.errors import ConfigError

    if options is not None and not isinstance(options, Mapping):
        raise ConfigError(
            f"backend {backend!r} options={options!r} ({type(options).__name__}): expected a "
            "mapping of option names to values, e.g. {'form': 'step'}"
        )
    given = {k: v for k, v in dict(options or {}).items() if v is not None}
    for key, value in given.items():
        if not isinstance(key, str):
            raise ConfigError(f"backend {backend!r} option name {key!r} is not a string")
        if not values:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, os.PathLike, numbers.Real)):
            raise ConfigError(
                f"backend {backend!r} option {key}={value!r} ({type(value).__name__}): "
                "expected a string or a number, as --option KEY=VALUE gives (several values: "
                "one comma-separated string)"
            )
    if allowed is None:
        return given
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ConfigError(
            f"backend {backend!r} has no option {', '.join(map(repr, unknown))}; its options: "
            f"{', '.join(allowed) or 'none'}"
        )
    return given


def check_options_before_build(backend: Any, options: Mapping[str, Any] | None) -> None:
    """``check_options`` as ``backend``'s compile will run it, before the model is built (a
    build may train): the backend's own ``checked_options(options)`` where it has one, else
    the names its module declares compile reads (``OPTIONS``: neuroedge's own backends), else
    a mapping with string names only (a plugin's compile checks its names and values)."""
    own = getattr(backend, "checked_options", None)
    if callable(own):
        own(options)
        return
    module = type(backend).__module__
    declared = None
    if module.startswith("neuroedge.backends."):
        declared = getattr(sys.modules.get(module), "OPTIONS", None)
    if declared is None:
        check_options(backend.name, options, None, values=False)
    else:
        check_options(backend.name, options, tuple(declared))


def axes_meta(program: Any) -> dict[str, Any]:
    """``{"axes": {...}}`` for an artifact's meta when the built program fixes symbolic axes
    (``meta["axes"]``: a model width, a sensor side), else ``{}``; every backend's ``run``
    passes ``artifact.meta.get("axes")`` to ``bind_inputs``, so a mismatch is named first."""
    axes = (getattr(program, "meta", None) or {}).get("axes")
    return {"axes": dict(axes)} if axes else {}


def int_option(backend: str, options: Mapping[str, Any], key: str, default: int) -> int:
    """An integer option >= 1 (given as a number or a numeric string), or ConfigError."""
    from neuroedge.errors import ConfigError

    value = options.get(key, default)
    try:
        number = int(str(value))
    except ValueError:
        number = 0
    if isinstance(value, bool) or number < 1:
        raise ConfigError(f"backend {backend!r} option {key}={value!r}: expected an integer >= 1")
    return number


class MeasuredBackend:
    """Shared ``profile``: warm-up, then timed repeats of ``run`` (p50/p90/p99, throughput)."""

    name: ClassVar[str] = "abstract"
    finite_inputs: ClassVar[bool] = False

    def run(self, artifact: Artifact, inputs: Mapping[str, Any]) -> dict[str, Any]:
        raise TypeError(f"{type(self).__name__} must define run()")

    def profile(self, artifact: Artifact, inputs: Mapping[str, Any], repeats: int = 50) -> Report:
        from neuroedge.bench.latency import measure_latency
        from neuroedge.seeding import one_thread

        symbols = bind_inputs(artifact.spec, inputs)
        with one_thread():  # torch on one intra-op thread, as ONNX Runtime's sessions and bench
            timing = measure_latency(
                lambda: self.run(artifact, inputs), repeats=repeats, batch=symbols.get("batch", 1)
            )
        return Report(
            model=artifact.spec.name,
            backend=self.name,
            variant=str(artifact.meta.get("variant", "default")),
            device=str(artifact.meta.get("device", "cpu")),
            metrics=timing.metrics(),
            fallbacks=tuple(artifact.meta.get("fallbacks", ())),
        )


def unroll(
    step: Callable[[Sequence[Any]], Sequence[Any]],
    inputs: Sequence[Any],
    state: Sequence[Any],
    n_outputs: int,
    stack: Callable[[list[Any]], Any],
) -> tuple[list[Any], list[Any]]:
    """Run ``step(x_t..., state...) -> (y_t..., state'...)`` over the leading time axis.

    Returns the outputs stacked over time and the final state. The same loop drives the host
    reference and every runtime, so parity compares like with like.
    """
    steps = int(inputs[0].shape[0])
    if any(int(x.shape[0]) != steps for x in inputs):
        raise ValueError(f"time axes differ: {[tuple(x.shape) for x in inputs]}")
    trace: list[list[Any]] = [[] for _ in range(n_outputs)]
    state = list(state)
    for t in range(steps):
        result = step([x[t] for x in inputs] + state)
        for slot, y in zip(trace, result[:n_outputs]):
            slot.append(y)
        state = list(result[n_outputs:])
    return [stack(ys) for ys in trace], state
