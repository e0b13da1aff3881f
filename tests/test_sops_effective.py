"""Effective MACs (NeuroBench's Effective_MACs: zero inputs cost nothing) beside the dense MACs
of analog inputs, checked against hand-computed counts. Each test failed on the counter before
effective MACs existed (no such field); the exact values also fail a counter that charges every
input element (dense) as effective."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from neuroedge.bench.sops import OpCounter


def _linear() -> nn.Linear:
    layer = nn.Linear(3, 2, bias=True)  # a bias is no synaptic operation: never counted
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]))
    return layer


def test_linear_effective_macs_count_nonzero_inputs_only() -> None:
    layer = _linear()
    x = torch.tensor([[0.5, 0.0, -2.0], [0.0, 0.0, 0.0], [0.0, 0.7, 0.0]])
    with OpCounter(layer) as counter:
        layer(x)
    counts = counter.totals(3)
    # dense: each input element x its nonzero fan-out (input 0 -> w=1, input 1 -> w=3,
    # input 2 -> w=2) = 3 pairs per sample, zero inputs included
    assert counts.macs_per_sample == 3.0
    # effective: sample 1 inputs 0 and 2 -> out 0 via w=1 and w=2: 2 pairs; sample 2 all
    # zero: 0; sample 3 input 1 -> out 1 via w=3: 1 pair. (2 + 0 + 1) / 3 samples
    assert counts.effective_macs_per_sample == 1.0
    assert counts.sops_per_sample == 0.0 and counts.effective_ops_per_sample == 1.0


def test_conv_effective_macs_skip_zero_inputs_and_pruned_weights() -> None:
    conv = nn.Conv2d(1, 1, 3, padding=1, bias=False)
    with torch.no_grad():
        conv.weight.fill_(1.0)
        conv.weight[0, 0, 1, 1] = 0.0  # centre tap pruned
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 0, 0] = 0.7  # corner: reaches 4 outputs in the padded image, 3 without the centre
    x[0, 0, 1, 1] = -1.3  # interior: reaches 9 outputs, 8 without the centre
    with OpCounter(conv) as counter:
        conv(x)
    counts = counter.totals(1)
    # dense: fan-out of all 16 pixels (4 corners x 4 + 8 edges x 6 + 4 interior x 9 = 100)
    # minus the centre tap each pixel has (16): 84
    assert counts.macs_per_sample == 84.0
    assert counts.effective_macs_per_sample == 3.0 + 8.0
    assert counts.effective_ops_per_sample == 11.0


def test_binary_inputs_keep_their_sops_and_have_no_macs_of_either_kind() -> None:
    conv = nn.Conv2d(1, 1, 3, padding=1, bias=False)
    with torch.no_grad():
        conv.weight.fill_(1.0)
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 0, 0] = 1.0
    x[0, 0, 1, 1] = 1.0
    with OpCounter(conv) as counter:
        conv(x)
    counts = counter.totals(1)
    assert counts.sops_per_sample == 13.0  # as before: 4 + 9
    assert counts.macs_per_sample == 0.0 and counts.effective_macs_per_sample == 0.0
    assert counts.effective_ops_per_sample == counts.sops_per_sample


def test_effective_counts_accumulate_over_steps_with_and_without_the_first_layer() -> None:
    net = nn.Sequential(_linear(), nn.Linear(2, 1, bias=False))
    with torch.no_grad():
        net[1].weight.fill_(1.0)
    with OpCounter(net) as counter:
        for x in ([[0.5, 0.0, 0.0]], [[0.0, 0.3, 0.0]], [[0.0, 0.2, -1.0]]):  # three steps
            net[0](torch.tensor(x))  # the first layer sees analog input
            net[1](torch.tensor([[1.0, 1.0]]))  # layer 1 sees spikes: 2 SOPs per step
    counts = counter.totals(1)
    assert counts.first_layer == "0"
    assert counts.sops_per_sample == counts.sops_per_sample_no_first == 6.0
    # layer 0: dense 3 per step x 3 steps = 9; effective 1 + 1 + 2 (input 0 -> w=1; input
    # 1 -> w=3; inputs 1 and 2 -> w=3 and w=2) = 4
    assert counts.macs_per_sample == 9.0 and counts.effective_macs_per_sample == 4.0
    assert counts.effective_macs_per_sample_no_first == 0.0
    assert counts.effective_ops_per_sample == 10.0
    assert counts.effective_ops_per_sample_no_first == 6.0
    assert counter.totals(1).effective_macs_per_sample == 4.0  # a second totals() adds nothing


def test_effective_macs_follow_neurobench_on_a_random_sparse_input() -> None:
    """NeuroBench's recipe, spelled out: binarize the input (nonzero -> 1), binarize the
    weights (nonzero -> 1), drop the bias, run the layer and sum its output."""
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1)
    with torch.no_grad():
        conv.weight[conv.weight.abs() < 0.1] = 0.0  # some pruned weights
    x = torch.randn(4, 2, 9, 9) * (torch.rand(4, 2, 9, 9) < 0.2)  # ~80 % zeros, analog
    with OpCounter(conv) as counter:
        conv(x)
    counts = counter.totals(4)
    binary = nn.functional.conv2d(
        (x != 0).double(), (conv.weight != 0).double(), None, conv.stride, conv.padding
    )
    dense = nn.functional.conv2d(
        torch.ones_like(x).double(), (conv.weight != 0).double(), None, conv.stride, conv.padding
    )
    assert counts.effective_macs_per_sample == pytest.approx(float(binary.sum()) / 4)
    assert counts.macs_per_sample == pytest.approx(float(dense.sum()) / 4)
    assert counts.effective_macs_per_sample < 0.4 * counts.macs_per_sample
