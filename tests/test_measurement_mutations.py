"""Measurement code pinned by exact numbers, so a plausible slip fails a test: untimed warm-up
and block-start calls, p50 (not the mean), energy's MAC/SOP order, per-sample counts over a
batch, spike agreement over every spike output, ``within_tolerance`` needing full agreement,
and simulated time steps/s where a benched backend (lava) asks for them."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

from neuroedge.types import HostProgram, IOSpec, Measurement, ModelSpec, Report, TorchProgram


def _spec(**fields: Any) -> ModelSpec:
    """A tiny spec: input x (batch, T, 3), output y; fields override the defaults."""
    base: dict[str, Any] = {
        "name": "ann.tiny_probe",
        "family": "ann",
        "summary": "test spec",
        "inputs": (IOSpec("x", ("batch", "T", 3)),),
        "outputs": (IOSpec("y", ("batch", "T", 3)),),
        "build": lambda config: HostProgram(lambda x: {"y": x * 2.0}),
        "example": lambda seed: {"x": np.full((2, 5, 3), 0.5, np.float32)},
        "tolerance": {"default": 1e-4},
    }
    return ModelSpec(**{**base, **fields})


def _fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """latency's clock, in ns, advanced only by the test's callables."""
    from neuroedge.bench import latency

    now = [0]
    monkeypatch.setattr(latency, "time", types.SimpleNamespace(perf_counter_ns=lambda: now[0]))
    return now


def test_warmup_and_each_blocks_first_call_are_not_timed(monkeypatch) -> None:
    """The k-th call takes k ms, so the times name the calls that were timed."""
    from neuroedge.bench.latency import measure_latency, measure_side_by_side

    now, calls = _fake_clock(monkeypatch), [0]

    def fn() -> None:
        calls[0] += 1
        now[0] += calls[0] * 1_000_000

    # 2 warm-up calls, the block's untimed call 3, then 4 timed ones
    timing = measure_latency(fn, repeats=4, warmup=2)
    # without the warm-up (2, 3, 4, 5); without the block's untimed call (3, 4, 5, 6)
    assert timing.times_ms == (4.0, 5.0, 6.0, 7.0) and calls[0] == 7
    calls[0] = 0
    both = measure_side_by_side({"a": fn, "b": fn}, repeats=4, warmup=1, block=2)
    # warm-up a 1, b 2; block one: a untimed 3, timed 4, 5; b untimed 6, timed 7, 8;
    # block two: a untimed 9, timed 10, 11; b untimed 12, timed 13, 14
    assert both["a"].times_ms == (4.0, 5.0, 10.0, 11.0)
    assert both["b"].times_ms == (7.0, 8.0, 13.0, 14.0) and calls[0] == 14


def test_p50_is_the_median_not_the_mean() -> None:
    from neuroedge.bench.latency import Latency

    metrics = Latency((1.0, 2.0, 3.0, 4.0, 90.0), batch=2).metrics()  # mean 20 ms
    assert metrics["latency_p50_ms"].value == 3.0
    assert metrics["throughput_per_s"].value == pytest.approx(2 / 0.020)


def _two_layer_net() -> Any:
    """fc1 (3 -> 4) on an analog input: 12 MACs a sample; its outputs, all > 0, spike (4
    ones) into fc2 (4 -> 2): 8 SOPs a sample. Every weight is 1, so no pair is pruned."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)
            for layer in (self.fc1, self.fc2):
                torch.nn.init.ones_(layer.weight)
                torch.nn.init.zeros_(layer.bias)

        def forward(self, x: Any) -> Any:
            return self.fc2((self.fc1(x) > 0).float())

    return Net().eval()


def _counted(batches: tuple[int, ...]) -> dict[str, Measurement]:
    """count_metrics of the two-layer net, its evaluate running one call per batch size."""
    import torch
    from neuroedge.bench.energy import HOROWITZ_45NM
    from neuroedge.bench.runner import count_metrics

    net = _two_layer_net()
    program = TorchProgram(net, ("x",), ("y",))
    spec = _spec(
        inputs=(IOSpec("x", ("batch", 3)),),
        outputs=(IOSpec("y", ("batch", 2)),),
        build=lambda config: program,
        example=lambda seed: {"x": np.full((1, 3), 0.5, np.float32)},
        evaluate=lambda run, config: {
            f"y_{b}": Measurement(
                float(run({"x": np.full((b, 3), 0.5, np.float32)})["y"][0, 0]), ""
            )
            for b in batches
        },
    )

    def run(inputs: dict[str, Any]) -> dict[str, Any]:
        with torch.no_grad():
            return {"y": net(torch.as_tensor(inputs["x"])).numpy()}

    return count_metrics(program, spec, {}, run, HOROWITZ_45NM)


def test_energy_charges_macs_at_4_6_pj_and_sops_at_0_9_pj() -> None:
    from neuroedge.bench.energy import HOROWITZ_45NM
    from neuroedge.bench.runner import ops_metrics

    assert (HOROWITZ_45NM.e_mac_pj, HOROWITZ_45NM.e_ac_pj) == (4.6, 0.9)
    metrics = _counted((1,))
    assert metrics["macs_per_sample"].value == 12 and metrics["sops_per_sample"].value == 8
    assert metrics["energy_uj"].value == pytest.approx((4.6 * 12 + 0.9 * 8) * 1e-6)  # swapped: 47.6
    ops = types.SimpleNamespace(
        sops_per_sample=1000.0, macs_per_sample=10.0, sops_per_sample_no_first=0.0, firing_rate=0.1
    )
    energy = ops_metrics(ops)["energy_uj"]
    assert energy.value == pytest.approx((4.6 * 10 + 0.9 * 1000) * 1e-6)
    assert (energy.unit, energy.how) == ("uJ", "estimated")


def test_counts_per_sample_divide_by_the_samples_not_the_calls() -> None:
    one, mixed = _counted((1,)), _counted((4, 1))  # 5 samples in 2 calls
    for key in ("sops_per_sample", "macs_per_sample", "energy_uj"):
        assert mixed[key].value == pytest.approx(one[key].value), key
    assert mixed["sops_per_sample"].value == 8  # 2.5x that if divided by the 2 calls


def test_spike_agreement_pools_every_spike_output() -> None:
    from neuroedge.bench.parity import compare

    ref = {"spikes_a": np.array([1, 0, 1, 0]), "spikes_b": np.array([1, 1, 0, 0])}
    got = {"spikes_a": np.array([0, 1, 1, 0]), "spikes_b": ref["spikes_b"].copy()}
    metrics = compare(ref, got)
    assert metrics["spike_agreement"].value == pytest.approx(6 / 8)  # not spikes_b's 1.0
    # spikes_a: agreement 0.5 at rates 0.5 and 0.5 -> kappa 0; spikes_b identical -> 1
    assert metrics["spike_kappa"].value == pytest.approx(0.5)


def test_within_tolerance_needs_full_spike_agreement_even_at_zero_error() -> None:
    from neuroedge.bench.runner import check_parity

    ref = {"y": np.array([1.0, 2.0]), "spikes": np.array([1.0, 0.0, 1.0, 1.0])}
    got = {"y": ref["y"].copy(), "spikes": np.array([1.0, 0.0, 1.0, 0.0])}
    metrics, notes = check_parity(_spec(), "onnxrt", "default", ref, got)
    assert metrics["max_abs_err"].value == 0.0 and metrics["spike_agreement"].value == 0.75
    assert metrics["within_tolerance"].value == 0.0
    assert notes == ["parity: spike agreement 0.7500 < 1 on onnxrt"]
    metrics, _ = check_parity(_spec(), "onnxrt", "default", ref, ref)
    assert metrics["within_tolerance"].value == 1.0


@pytest.mark.parametrize(
    ("backends", "per_s", "unit"),
    [
        (["host"], 500.0, "samples/s"),
        (["host", "lava"], 2500.0, "time steps/s"),  # lava's throughput_unit is "steps": x T=5
    ],
)
def test_throughput_is_in_time_steps_when_lava_is_benched(
    monkeypatch: pytest.MonkeyPatch, backends: list[str], per_s: float, unit: str
) -> None:
    """Every call of the batch-2, T=5 example takes 4 ms: 500 samples/s, 2500 steps/s. lava
    refuses this ann spec at once (no simulation runs), but being benched sets the unit."""
    from neuroedge.bench import runner
    from neuroedge.bench.latency import Latency

    def fixed(fns: dict[str, Any], **kw: Any) -> dict[str, Latency]:
        return {key: Latency((4.0, 4.0, 4.0), kw["batch"]) for key in fns}

    monkeypatch.setattr(runner, "measure_side_by_side", fixed)
    rows = runner.bench_model(_spec(), backends, repeats=3, progress=False)
    host = next(r for r in rows if r.backend == "host")
    assert isinstance(host, Report) and not host.rejections
    throughput = host.metrics["throughput_per_s"]
    assert throughput.value == pytest.approx(per_s) and throughput.unit == unit
    assert all(r.rejections for r in rows if r.backend == "lava")
