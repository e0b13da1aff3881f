"""The backend contract and the pieces every backend shares.

A backend is a small class: ``probe`` (cheap, never raises) is separate from ``supports`` (can I
take this model) and from ``compile``; every refusal carries its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from neuroedge.shapes import bind_inputs
from neuroedge.types import Artifact, Availability, ModelSpec, Program, Report, Support


@runtime_checkable
class Backend(Protocol):
    name: ClassVar[str]

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
    backend: str, options: Mapping[str, Any] | None, allowed: Sequence[str]
) -> dict[str, Any]:
    """``options`` as a dict; a name the backend does not read is refused, naming it and the
    valid ones (a misspelt option must not run with other settings than asked)."""
    from neuroedge.errors import ConfigError

    given = dict(options or {})
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ConfigError(
            f"backend {backend!r} has no option {', '.join(map(repr, unknown))}; its options: "
            f"{', '.join(allowed) or 'none'}"
        )
    return given


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
