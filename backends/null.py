"""The null backend: runs the whole pipeline with fake timing and zero outputs.

Like tinygrad's NULL device, it lets CI exercise every model's plumbing (spec, validation,
output shapes, reports) with no runtime and no hardware.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from neuroedge.backends.base import axes_meta, check_options
from neuroedge.shapes import bind_inputs, resolve_shape
from neuroedge.types import (
    Artifact,
    Availability,
    Measurement,
    ModelSpec,
    Program,
    Report,
    Support,
)

FAKE_LATENCY_MS = 1.0  # every call "takes" this long; labelled estimated, never measured


OPTIONS: tuple[str, ...] = ()  # compile reads none


class NullBackend:
    name: ClassVar[str] = "null"
    finite_inputs: ClassVar[bool] = False  # zero outputs whatever the inputs

    def probe(self) -> Availability:
        return Availability(True, "always available (fake timing, zero outputs)")

    def supports(self, spec: ModelSpec) -> Support:
        return Support(True)

    def compile(
        self, program: Program, spec: ModelSpec, options: Mapping[str, str] | None = None
    ) -> Artifact:
        check_options(self.name, options, OPTIONS)
        return Artifact(
            backend=self.name,
            format="none",
            spec=spec,
            meta={"program_kind": program.kind, **axes_meta(program)},
        )

    def run(self, artifact: Artifact, inputs: Mapping[str, Any]) -> dict[str, Any]:
        symbols = bind_inputs(artifact.spec, inputs, fixed=artifact.meta.get("axes"))
        return {
            io.name: np.zeros(resolve_shape(io, symbols), dtype=io.dtype)
            for io in artifact.spec.outputs
        }

    def profile(self, artifact: Artifact, inputs: Mapping[str, Any], repeats: int = 50) -> Report:
        from neuroedge.config_values import check_repeats

        check_repeats(repeats)  # as the timed backends: 0 would "time" no call yet report one
        symbols = bind_inputs(artifact.spec, inputs, fixed=artifact.meta.get("axes"))
        for _ in range(repeats):
            self.run(artifact, inputs)
        batch = symbols.get("batch", 1)
        fake = {
            f"latency_{q}_ms": Measurement(FAKE_LATENCY_MS, "ms", "estimated")
            for q in ("p50", "p90", "p99")
        }
        fake["throughput_per_s"] = Measurement(1000.0 * batch / FAKE_LATENCY_MS, "1/s", "estimated")
        return Report(
            model=artifact.spec.name,
            backend=self.name,
            metrics=fake,
            notes=("null backend: fake timing, zero outputs",),
        )
