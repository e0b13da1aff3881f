"""Every registered model x every known backend, defined as data.

null and host take every model. Which models the other backends take is written down below
(``TAKES``) and checked against ``supports()``: a pair that should be taken but is refused
fails, and a refusal must state its reason. Only a missing package or device (the backend's
probe) skips a pair (or fails it under NEUROEDGE_REQUIRE).
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
ONNX_MODELS = (
    "event.bivision",
    "snn.lif_convnet",
    "snn.unisparse",
    "ttt.linear_attention",
    "vla.specprune",
)
# the pairs each backend takes (null and host: every model); a model not listed is refused
TAKES = {
    "onnxrt": ONNX_MODELS,  # spec.exportable has "onnx"
    "tensorrt": ONNX_MODELS,  # builds its engine from the ONNX export
    "lava": ("snn.lif_convnet", "snn.unisparse"),  # spiking nets that map to NIR
}


def build(name: str) -> tuple[Any, Any, dict[str, Any]]:
    spec = get_model(name)
    return spec, spec.build({**spec.default_config, **SMOKE}), spec.example(0)


@pytest.mark.parametrize(("model", "backend"), MATRIX, ids=[f"{m}-{b}" for m, b in MATRIX])
def test_model_runs_on_backend(model: str, backend: str, require: Any) -> None:
    be = get_backend(backend)
    support = be.supports(get_model(model))
    expected = backend in ("null", "host") or model in TAKES[backend]
    assert support.ok == expected, f"{backend} takes {model}: {support.ok}, {support.reason}"
    if not support.ok:
        assert support.reason.strip(), f"{backend} refuses {model} without a reason"
        return
    if backend not in ("null", "host"):
        require(backend)
    spec, program, example = build(model)
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
