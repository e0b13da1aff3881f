"""unisparse rate route on the flattened readout input, against the formula written out.

``rate_scaled(S, r)`` has the value of ``S`` and the gradient of the rate model: for an energy
``E = sum_j S_j w_j``, ``dE/dr_c = sum_{j in channel c} S_j w_j / r_c``. The fc input is the
(C, H, W) map flattened channel-major, so feature ``j`` belongs to channel ``j // (H W)``;
``repeat`` instead of ``repeat_interleave`` (channel ``j % C``) passed every unisparse test
before (2026-12 audit: dE/dr [80, 40] instead of [50, 52] on the map below)."""

from __future__ import annotations

import pytest
import torch
from neuroedge.models.unisparse import constraint
from neuroedge.models.unisparse import functional as fn
from unisparse_nets import random_net


def _channel_formula(spikes: torch.Tensor, weight: torch.Tensor, rate: torch.Tensor) -> list:
    """``sum_{j in c} S_j w_j / r_c`` by explicit loops over a (C, H, W) map."""
    channels, height, width = spikes.shape
    out = []
    for c in range(channels):
        total = 0.0
        for y in range(height):
            for x in range(width):
                j = (c * height + y) * width + x  # channel-major flatten index
                total += float(spikes[c, y, x]) * float(weight[j])
        out.append(total / float(rate[c]))
    return out


def test_rate_scaled_on_a_flattened_map_sends_each_feature_to_its_own_channel() -> None:
    spikes = torch.arange(1.0, 9.0).reshape(2, 2, 2)  # channel sums 10 and 26
    rate = torch.tensor([0.2, 0.5], requires_grad=True)
    out = fn.rate_scaled(spikes.reshape(-1), rate)
    assert torch.equal(out.detach(), spikes.reshape(-1))  # the value is the spikes'
    out.sum().backward()
    expected = _channel_formula(spikes, torch.ones(8), rate.detach())
    assert expected == pytest.approx([50.0, 52.0])
    assert rate.grad.tolist() == pytest.approx(expected)


def test_readout_sops_gradient_is_the_channel_sum_over_the_rate() -> None:
    """Through ``layer_sops`` with a gate: feature j costs its surviving fan-out."""
    gen = torch.Generator().manual_seed(0)
    spikes = torch.randint(0, 5, (3, 2, 4), generator=gen).float()
    gate = (torch.rand(5, 24, generator=gen) < 0.5).float()
    rate = torch.tensor([0.1, 0.4, 0.7], requires_grad=True)
    fn.layer_sops(fn.rate_scaled(spikes.reshape(-1), rate), gate).backward()
    expected = _channel_formula(spikes, gate.sum(0), rate.detach())
    assert rate.grad.tolist() == pytest.approx(expected, rel=1e-5)


def test_budget_terms_route_the_readout_gradient_to_the_channel_of_each_feature() -> None:
    """End to end: the last LIF layer feeds only the fc readout, so its BN's beta gradient is
    ``dE/dr_c * dr_c/dbeta_c`` with ``dE/dr_c`` the channel formula above."""
    net = random_net(seed=3)
    xs = torch.rand(3, 4, 1, 8, 8, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        _, maps = net.forward_sequence(xs)
    bn = net.spike_bns()[-1]
    src, fc = net.consumers()[-1]
    assert fc is net.fc and src == len(net.spike_bns()) - 1
    samples, e_ac = 4, 0.9
    energy = fn.energy_estimate(constraint.budget_terms(net, maps, True, False), samples, e_ac)
    energy.backward()
    rate = bn.firing_probability()
    fan_out = fc.gate().detach().sum(0) * e_ac * 1e-6 / samples
    de_dr = torch.tensor(_channel_formula(maps[src], fan_out, rate.detach()))
    assert maps[src].sum() > 0 and de_dr.abs().max() > 0
    expected = torch.autograd.grad((de_dr * rate).sum(), bn.beta)[0]
    assert torch.allclose(bn.beta.grad, expected, rtol=1e-4, atol=1e-12)
