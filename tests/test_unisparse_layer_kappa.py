"""snn.unisparse's ``spikes`` concatenates its seven LIF layers: parity scores Cohen's kappa per
layer (the mean and the worst layer, as the lava rows do), not pooled over the concatenation,
where layers at different firing rates make chance agreement look low and kappa high."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from neuroedge.bench import parity
from neuroedge.errors import ParityError
from neuroedge.models.unisparse import spec as spec_mod
from neuroedge.models.unisparse.pipeline import VariantResult

from unisparse_nets import random_net


def _two_layers(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two 200-neuron layers firing at 90% and 10%, each candidate independent of its
    reference (the auditor's reproducer): pooled kappa ~0.64, per layer ~0."""
    rng = np.random.default_rng(seed)
    shape = (8, 64, 200)
    ref = [(rng.random(shape) < p).astype(np.float32) for p in (0.9, 0.1)]
    got = [(rng.random(shape) < p).astype(np.float32) for p in (0.9, 0.1)]
    return np.concatenate(ref, -1), np.concatenate(got, -1)


def test_compare_scores_each_declared_layer_of_a_concatenated_output() -> None:
    ref, got = _two_layers()
    pooled = parity.compare({"spikes": ref}, {"spikes": got})["spike_kappa"].value
    assert pooled == pytest.approx(0.64, abs=0.02)  # one layer, as before: overstated
    metrics = parity.compare({"spikes": ref}, {"spikes": got}, layers={"spikes": (200, 200)})
    halves = [(ref[..., a : a + 200], got[..., a : a + 200]) for a in (0, 200)]
    kappas = [parity.spike_kappa(r, g) for r, g in halves]
    assert metrics["spike_kappa"].value == pytest.approx(np.mean(kappas))
    assert abs(metrics["spike_kappa"].value) < 0.02
    assert metrics["min_layer_spike_kappa"].value == pytest.approx(min(kappas))
    least = min(float(np.mean(r == g)) for r, g in halves)
    assert metrics["min_layer_spike_agreement"].value == pytest.approx(least)
    assert metrics["spike_agreement"].value == pytest.approx(float(np.mean(ref == got)))
    assert parity.layer_parity(ref, got, (200, 200)) == (
        [float(np.mean(r == g)) for r, g in halves],
        kappas,
    )


@pytest.mark.parametrize(
    ("sizes", "match"),
    [((200, 100), "sum to 300, not its last axis 400"), ((400, 0), "positive ints")],
)
def test_layer_sizes_that_do_not_tile_the_output_are_refused(sizes: Any, match: str) -> None:
    ref, got = _two_layers()
    with pytest.raises(ParityError, match=f"'spikes'.*{match}"):
        parity.compare({"spikes": ref}, {"spikes": got}, layers={"spikes": sizes})


def test_the_unisparse_program_declares_its_lif_layers_in_concatenation_order() -> None:
    program = spec_mod.build({"smoke": True})
    layers = parity.spike_layers(program)
    assert layers == {"spikes": (1024, 1024, 1024, 512, 512, 256, 256)}
    assert sum(layers["spikes"]) == spec_mod.NEURONS
    shapes = program.module.arch.neuron_shapes()
    assert layers["spikes"] == tuple(int(np.prod(s)) for s in shapes)


class _Independent:
    """An onnxrt stand-in: the host's outputs with each LIF layer's spikes redrawn at that
    layer's own rate, independent of the host's (per-layer kappa ~0)."""

    def probe(self) -> Any:
        return SimpleNamespace(ok=True, reason="")

    def compile_at(self, program: Any, *_: Any) -> Any:
        return program

    def run(self, program: Any, xs: Any) -> dict[str, np.ndarray]:
        from neuroedge.backends.host import run_torch_program

        out = dict(run_torch_program(program, xs))
        rng, cut, parts = np.random.default_rng(1), 0, []
        for n in (int(np.prod(s)) for s in program.module.arch.neuron_shapes()):
            layer = out["spikes"][..., cut : cut + n]
            parts.append((rng.random(layer.shape) < layer.mean()).astype(layer.dtype))
            cut += n
        out["spikes"] = np.concatenate(parts, -1)
        return out


def _rows(tmp_path: Path) -> list[Any]:
    from neuroedge.models.unisparse.export_parity import onnx_rows

    from neuroedge.seeding import seeded

    with seeded(0):  # the convolutions' initial weights too: a silent layer's kappa is 1
        net = random_net(0, beta=(0.6, 1.2))
    results = {"v": VariantResult("v", net, [], {}, [])}
    return onnx_rows("snn.unisparse", results, tmp_path, {"seed": 0, "steps": 2})


def test_onnx_rows_report_the_per_layer_kappa_as_the_lava_rows(tmp_path, monkeypatch) -> None:
    import neuroedge.registry

    monkeypatch.setattr(neuroedge.registry, "get_backend", lambda name: _Independent())
    (row,) = _rows(tmp_path)
    assert abs(row.metrics["spike_kappa"].value) < 0.05  # pooled, the layers' rates lift it
    assert row.metrics["min_layer_spike_kappa"].value < 0.05
    assert "min_layer_spike_agreement" in row.metrics


def test_real_onnxrt_parity_of_unisparse_is_one_per_layer(tmp_path: Path, require) -> None:
    require("onnxrt")
    (row,) = _rows(tmp_path)
    assert row.metrics["spike_agreement"].value == 1.0
    assert row.metrics["spike_kappa"].value == row.metrics["min_layer_spike_kappa"].value == 1.0
    assert row.metrics["min_layer_spike_agreement"].value == 1.0


def _per_layer(metrics: Any) -> None:
    assert "min_layer_spike_kappa" in metrics and "min_layer_spike_agreement" in metrics


def test_the_generic_bench_deploy_and_gpu_check_score_per_layer(monkeypatch) -> None:
    """Every parity site reads the program's layers, not only the unisparse bench's."""
    import neuroedge as ne
    from neuroedge.backends.host import run_torch_program
    from neuroedge.bench import gpu_check
    from neuroedge.bench.runner import bench_model

    config = {"smoke": True}
    _, report = ne.deploy(spec_mod.SPEC.name, "onnxrt", config=config, repeats=2)
    _per_layer(report.metrics)
    rows = bench_model(spec_mod.SPEC, ["host", "onnxrt"], config=config, repeats=2)
    _per_layer(next(r for r in rows if r.backend == "onnxrt").metrics)
    program = spec_mod.SPEC.build(config)
    example = spec_mod.SPEC.built_example(0, program)
    reference = run_torch_program(program, example)
    route = lambda *args: ((lambda x: run_torch_program(program, x)), None)  # noqa: E731
    monkeypatch.setattr(gpu_check, "compile_route", route)  # the GPU's runner, on the CPU
    row, _ = gpu_check._check_route(spec_mod.SPEC, "onnxrt-cuda", program, reference, example)
    _per_layer(row.metrics)
