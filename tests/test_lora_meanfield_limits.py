"""theory.lora_meanfield: documented bounds on the Euler step horizon/layers and on the
bench's seeds and adapters, refused with a ConfigError naming the key and value."""

from __future__ import annotations

import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.lora_meanfield import spec


@pytest.mark.parametrize(
    "config, match",
    [
        ({"horizon": 1e300}, r"horizon=1e\+300 over layers=64: .* h = horizon / layers = 1\.56e"),
        ({"horizon": 1e6}, r"horizon=1000000\.0 .* use horizon <= 64 \(layers <= 100000"),
        ({"horizon": 100.0}, r"h = horizon / layers = 1\.56, above 1 .* or layers >= 100"),
        ({"horizon": 1e6, "layers": 10**5}, r"h = horizon / layers = 10, above 1"),
    ],
)
def test_horizon_beyond_one_residual_step_per_layer_is_refused(config, match) -> None:
    with pytest.raises(ConfigError, match=match):
        spec.build(config)


def test_horizon_at_one_step_per_layer_still_runs() -> None:
    out = spec.build({"horizon": 64.0}).fn(**spec.example())
    assert out["w2"].shape == (1,) and float(out["w2"][0]) >= 0


@pytest.mark.parametrize("key, most", [("seeds", 10**3), ("adapters", 10**4)])
def test_bench_seeds_and_adapters_are_bounded(key, most) -> None:
    with pytest.raises(ConfigError, match=rf"{key}=1000000000: expected an integer in 1\.\.{most}"):
        spec.bench_values({key: 10**9})
    assert spec.bench_values({key: most})[key] == most
