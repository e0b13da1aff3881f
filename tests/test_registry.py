"""Explicit registries: unknown names list the valid ones; plugins come from entry points."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import neuroedge
from neuroedge import registry
from neuroedge.errors import UnknownNameError


def test_unknown_model_lists_valid_names() -> None:
    with pytest.raises(UnknownNameError) as err:
        neuroedge.model("snn.nope")
    assert "snn.lif_convnet" in str(err.value)
    assert "unknown model 'snn.nope'" in str(err.value)


def test_unknown_backend_lists_valid_names() -> None:
    with pytest.raises(UnknownNameError, match="valid backends: .*host.*null.*onnxrt"):
        registry.get_backend("tpu")


def test_known_backends_include_the_builtins_and_probes_never_raise() -> None:
    known = neuroedge.known_backends()
    assert {"null", "host", "onnxrt"} <= set(known)
    available = neuroedge.available_backends()
    assert set(available) == set(known)
    assert available["null"].ok and available["host"].ok
    for name, availability in available.items():
        assert availability.ok or availability.reason, name


def test_entry_point_backends_are_added_to_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = SimpleNamespace(name="thirdparty", value="neuroedge.backends.null:NullBackend")
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [fake] if group == registry.BACKEND_GROUP else []
    )
    assert "thirdparty" in registry.known_backends()
    assert type(registry.get_backend("thirdparty")).__name__ == "NullBackend"


def test_every_registered_model_has_a_matching_name() -> None:
    for name in registry.model_names():
        spec = registry.get_model(name)
        assert spec.name == name
        assert spec.summary and spec.inputs and spec.outputs


@pytest.mark.parametrize(
    "name",
    ["snn.unisparse", "snn.lif_convnet", "event.bivision", "ttt.linear_attention", "vla.specprune"],
)
def test_untrained_builds_repeat_and_leave_the_callers_rng_alone(name: str) -> None:
    import torch

    def weights() -> list:
        torch.manual_seed(5)
        program = registry.get_model(name).build({"smoke": True, "untrained": True})
        after = torch.rand(4)  # what user code draws next
        return [*program.module.state_dict().values()], after

    (first, drawn), (second, _) = weights(), weights()
    torch.manual_seed(5)
    assert torch.equal(drawn, torch.rand(4)), "building a model reseeded the caller's RNG"
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


@pytest.mark.parametrize("name", registry.model_names())
def test_smoke_builds_leave_the_callers_rng_and_threads_alone(name: str) -> None:
    """Every registered model built as test_matrix builds it (smoke: the trained ones train a
    few steps) leaves the caller's torch generator and intra-op thread count as they were."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(3)  # neither the 1 a build may use nor the default on a 2-core box
    try:
        torch.manual_seed(1234)
        state = torch.random.get_rng_state()
        spec = registry.get_model(name)
        spec.build({**spec.default_config, "smoke": True})
        assert torch.equal(torch.random.get_rng_state(), state), f"building {name} reseeded torch"
        assert torch.get_num_threads() == 3, f"building {name} changed torch's thread count"
    finally:
        torch.set_num_threads(before)
