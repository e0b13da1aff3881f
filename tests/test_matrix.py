"""Every registered model x every known backend, defined as data.

null and host never skip. Other backends skip with their own probe's reason (or fail under
NEUROEDGE_REQUIRE), or with the backend's stated reason when it does not take the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from neuroedge.bench.parity import compare
from neuroedge.registry import get_backend, get_model, known_backends, model_names
from neuroedge.shapes import bind_inputs, resolve_shape

SMOKE = {"smoke": True}
MATRIX = [(m, b) for m in model_names() for b in known_backends()]


def build(name: str) -> tuple[Any, Any, dict[str, Any]]:
    spec = get_model(name)
    return spec, spec.build({**spec.default_config, **SMOKE}), spec.example(0)


@pytest.mark.parametrize(("model", "backend"), MATRIX, ids=[f"{m}-{b}" for m, b in MATRIX])
def test_model_runs_on_backend(model: str, backend: str, require: Any) -> None:
    if backend not in ("null", "host"):
        require(backend)
    spec, program, example = build(model)
    be = get_backend(backend)
    support = be.supports(spec)
    if backend in ("null", "host"):
        assert support.ok, support.reason
    elif not support.ok:
        pytest.skip(f"{backend} does not take {model}: {support.reason}")
    artifact = be.compile(program, spec, {})
    assert not artifact.meta.get("fallbacks"), artifact.meta.get("fallbacks")
    outputs = be.run(artifact, example)
    symbols = bind_inputs(spec, example, fixed=artifact.meta.get("axes"))
    for io in spec.outputs:
        assert io.name in outputs, f"{backend} did not return {io.name}"
        assert np.asarray(outputs[io.name]).shape == resolve_shape(io, symbols), io.name
    if backend in ("null", "host"):
        return
    host = get_backend("host")
    reference = host.run(host.compile(program, spec), example)
    metrics = compare(reference, outputs)
    assert metrics["max_abs_err"].value <= spec.tolerance_for(backend)
    if "spike_agreement" in metrics:
        assert metrics["spike_agreement"].value == 1.0


@pytest.mark.parametrize("model", model_names())
def test_null_backend_profile_is_labelled_fake(model: str) -> None:
    spec, program, example = build(model)
    null = get_backend("null")
    report = null.profile(null.compile(program, spec), example, repeats=2)
    assert all(m.how == "estimated" for m in report.metrics.values())
    assert any("fake" in note for note in report.notes)
