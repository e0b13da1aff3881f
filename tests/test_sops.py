"""SOP/MAC counting through forward hooks, checked against hand-computed examples."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from neuroedge.bench.energy import HOROWITZ_45NM, EnergyModel
from neuroedge.bench.sops import OpCounter
from neuroedge.models.neurons.module import LIFCell


def test_linear_sops_are_spikes_times_surviving_fanout() -> None:
    layer = nn.Linear(3, 2, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]))
    spikes = torch.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    with OpCounter(layer) as counter:
        layer(spikes)
    counts = counter.totals(samples=2)
    # sample 1: input 0 reaches out 0 (w=1), input 2 reaches out 0 (w=2) -> 2
    # sample 2: input 0 reaches out 0, input 1 reaches out 1 (w=3)        -> 2
    assert counts.sops_per_sample == 2.0
    assert counts.macs_per_sample == 0.0


def test_conv_sops_count_fanout_inside_the_padded_image() -> None:
    conv = nn.Conv2d(1, 1, 3, padding=1, bias=False)
    with torch.no_grad():
        conv.weight.fill_(1.0)
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 0, 0] = 1.0  # corner: reaches 4 outputs
    x[0, 0, 1, 1] = 1.0  # interior: reaches 9 outputs
    with OpCounter(conv) as counter:
        conv(x)
    assert counter.totals(1).sops_per_sample == 13.0


def test_analog_input_counts_dense_macs() -> None:
    layer = nn.Linear(3, 2)
    with OpCounter(layer) as counter:
        layer(torch.tensor([[0.5, -1.0, 2.0]]))
    counts = counter.totals(1)
    assert counts.macs_per_sample == 6.0 and counts.sops_per_sample == 0.0


def test_counts_accumulate_over_steps_and_skip_first_layer_on_request() -> None:
    net = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 1, bias=False))
    with torch.no_grad():
        net[0].weight.fill_(1.0)
        net[1].weight.fill_(1.0)
    with OpCounter(net) as counter:
        for _ in range(3):  # three time steps
            net(torch.tensor([[1.0, 0.0]]))
    counts = counter.totals(1)
    # layer 0 sees a binary input (1 spike x fan-out 2) -> 2 SOPs per step
    # layer 1 sees [1, 1] (binary) -> 2 spikes x fan-out 1 -> 2 SOPs per step
    assert counts.sops_per_sample == 12.0
    assert counts.sops_per_sample_no_first == 6.0


def test_firing_rate_comes_from_spiking_neurons() -> None:
    lif = LIFCell()
    with OpCounter(lif) as counter:
        lif(torch.tensor([[10.0, 0.0, 10.0, 0.0]]), torch.zeros(1, 4))
    assert counter.totals(1).firing_rate == 0.5


def test_hooks_are_removed_after_the_context() -> None:
    layer = nn.Linear(2, 2)
    with OpCounter(layer) as counter:
        pass
    layer(torch.ones(1, 2))
    assert counter.totals(1).per_layer == {}


def test_energy_model_uses_the_45nm_constants() -> None:
    estimate = HOROWITZ_45NM.measurement(macs=1_000_000, sops=2_000_000)
    assert estimate.how == "estimated" and estimate.unit == "uJ"
    assert estimate.value == pytest.approx((4.6e6 + 1.8e6) * 1e-6)
    assert EnergyModel("custom", 1.0, 0.1).energy_pj(10, 10) == pytest.approx(11.0)
    with pytest.raises(ValueError, match="energy constants must be finite and >= 0, got -1.0, 0.1"):
        EnergyModel("bad", -1.0, 0.1)
    with pytest.raises(ValueError, match="energy constants must be finite and >= 0, got 1.0, inf"):
        EnergyModel("bad", 1.0, float("inf"))


@pytest.mark.parametrize(
    ("values", "dtype", "binary"),
    [
        ([0.0, 1.0, 1.0], torch.float32, True),
        ([0.0, 0.5, 1.0], torch.float32, False),
        ([0.0, -1.0, 1.0], torch.float32, False),
        ([0.0, 2.0, -1.0], torch.float32, False),
        ([0.5] * 8 + [2.0], torch.float32, False),  # sum x(1-x) = 8/4 - 2 = 0: range decides
        ([0.0, 1e-30, 1.0], torch.float32, False),
        ([0.0, float("nan"), 1.0], torch.float32, False),
        ([0.0, 6e-8, 1.0], torch.float16, False),
        ([0.0, 1.0], torch.bfloat16, True),
        ([0, 1, 1], torch.int64, True),
        ([0, 2], torch.int64, False),
        ([True, False], torch.bool, True),
        ([], torch.float32, True),
    ],
)
def test_binary_inputs_are_told_from_analog_ones(values: list, dtype: Any, binary: bool) -> None:
    from neuroedge.bench.sops import is_binary_tensor

    assert is_binary_tensor(torch.tensor(values, dtype=dtype)) is binary
