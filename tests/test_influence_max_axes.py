"""graph.influence_max: the ``seeds`` output follows the configured k on every backend."""

from __future__ import annotations

import pytest
from neuroedge.registry import get_backend, get_model


@pytest.mark.parametrize("k", [1, 3])
def test_seeds_have_k_entries_on_host_and_null(k: int) -> None:
    spec = get_model("graph.influence_max")
    assert spec.outputs[0].shape == ("k",)
    program = spec.build({"k": k, "worlds": 10})
    assert program.meta["axes"] == {"k": k}
    inputs = spec.example_for(0, {"k": k, "worlds": 10})
    shapes = {}
    for name in ("host", "null"):
        backend = get_backend(name)
        out = backend.run(backend.compile(program, spec), inputs)
        shapes[name] = (out["seeds"].shape, out["spread"].shape)
    assert shapes == {"host": ((k,), (1,)), "null": ((k,), (1,))}
