"""snn.unisparse: the measured energy's price, the budget check's boundary, the mask gate, the
augmented slope, the random-mask control's densities and the reported thresholds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from neuroedge.models.unisparse import constraint, train
from neuroedge.models.unisparse import functional as fn
from neuroedge.models.unisparse.data import ImageSplit, direct_encoding
from neuroedge.models.unisparse.module import MINI, THETA, SparseLinear, SpikingResNet, fold
from neuroedge.models.unisparse.pipeline import BUDGET_SLACK, mask_densities, measure_variant

from unisparse_nets import random_net


def _net(seed: int = 0, masked: bool = True) -> SpikingResNet:
    """A random mini-ResNet that fires, with a different mask density per layer (``masked``)."""
    return random_net(seed, keep=(lambda i: 0.2 + 0.1 * i) if masked else None)


def _data(n: int = 48) -> ImageSplit:
    x = np.random.default_rng(0).random((n, 1, 8, 8), dtype=np.float32)
    y = np.arange(n) % 10
    return ImageSplit(x, y, x, y)


def test_measured_energy_is_priced_at_the_configs_e_ac_pj() -> None:
    # the default is 0.9 pJ: the bench's default figures are priced as before
    assert train.DEFAULTS["e_ac_pj"] == 0.9
    net, data = _net(), _data()
    cfg = {**train.DEFAULTS, "e_ac_pj": 1.8}
    metrics = measure_variant("dense", net, [], data, cfg, None).metrics
    with torch.no_grad():
        _, maps = net.forward_sequence(torch.from_numpy(direct_encoding(data.x_test, 4)))
    terms = constraint.budget_terms(net, maps, False, False)
    trained_on = float(fn.energy_estimate(terms, len(data.y_test), cfg["e_ac_pj"]))
    assert trained_on > 0
    assert metrics["energy_budgeted_uj"].value == pytest.approx(trained_on, rel=1e-4)
    sops, macs = metrics["sops_per_sample"].value, metrics["macs_per_sample"].value
    assert metrics["energy_uj"].value == pytest.approx((4.6 * macs + 1.8 * sops) * 1e-6)


def test_budget_is_met_within_the_slack_and_missed_beyond_it() -> None:
    assert BUDGET_SLACK == 0.05
    net, data = _net(), _data()
    cfg = dict(train.DEFAULTS)
    measured = measure_variant("x", net, [], data, cfg, None).metrics["energy_budgeted_uj"].value
    logs = [{"seconds": 1.0, "energy_uj": measured / 2}]  # the training energy is not the test's
    for over, met in ((1.0, True), (1.04, True), (1.06, False), (2.0, False)):
        result = measure_variant("x", net, logs, data, cfg, measured / over)
        assert result.metrics["budget_met"].value == float(met), over
        assert result.metrics["energy_target_uj"].value == pytest.approx(measured / over)
        assert any("NOT met" in note for note in result.notes) == (not met), over


def test_ste_gate_is_binary_forward_tempered_sigmoid_backward_and_freezes_to_it() -> None:
    layer = SparseLinear(40, 25)
    with torch.no_grad():
        layer.mask_logits.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(0))
    temperature = 4.0
    layer.set_mode("ste", temperature)
    gate = layer.gate()
    logits = layer.mask_logits.detach()
    # binary + soft - soft: 1[m > 0] up to the rounding of adding and removing sigmoid(T m)
    torch.testing.assert_close(gate.detach(), (logits > 0).float(), rtol=0.0, atol=1e-6)
    gate.sum().backward()
    soft = torch.sigmoid(temperature * logits)
    torch.testing.assert_close(layer.mask_logits.grad, temperature * soft * (1 - soft))
    layer.freeze_learned()  # the deployed mask is the forward gate: 1[m > 0]
    assert torch.equal(layer.gate(), (logits > 0).float())


def _slope_grads(rho: float, lmbda: float, over: float) -> tuple[dict[int, torch.Tensor], float]:
    """The surrogate-route threshold gradients of one constrained batch with the energy
    ``over`` times the target, and dE/dparam itself (by id), on identical nets."""
    torch.manual_seed(0)
    net = _net(masked=False).train()
    for layer in net.masked_layers().values():
        layer.set_mode("ste", 4.0)
    xs = torch.rand(3, 8, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    _, maps = net.forward_sequence(xs)
    terms = constraint.budget_terms(net, maps, False, True)
    value = float(fn.energy_estimate(terms, 8, 0.9).detach())
    budget = {"route_spikes": True, "route_masks": True, "lambda": lmbda, "target_uj": value / over}
    cfg = {**train.DEFAULTS, "spike_grad": "surrogate", "penalty_rho": rho}
    _, energy, grads = constraint.constrained_terms(net, maps, budget, cfg, 8)
    assert energy == pytest.approx(value)
    unit = constraint.threshold_gradients(net, maps, terms, 8, 0.9, 1.0)
    slopes = {id(p): g for p, g in grads}
    return {id(p): (slopes[id(p)], g) for p, g in unit}, value / over


def test_surrogate_slope_carries_the_augmented_term() -> None:
    lmbda, rho, over = 0.5, 2.0, 1.5  # gap 0.5: rho * gap = 1 > lambda
    pairs, target = _slope_grads(rho, lmbda, over)
    slope = (lmbda + rho * (over - 1.0)) / target
    assert pairs and any(float(g.abs().sum()) > 0 for _, g in pairs.values())
    for got, unit in pairs.values():
        torch.testing.assert_close(got, slope * unit, rtol=1e-4, atol=0.0)


def _reference_densities() -> dict[str, float]:
    return mask_densities(_net())


def test_random_masks_reproduce_each_layers_density_exactly() -> None:
    densities = _reference_densities()
    assert len({round(d, 2) for d in densities.values()}) == len(densities)  # all distinct
    net = SpikingResNet(MINI)
    train.random_masks(net, densities, seed=1)
    for name, layer in net.masked_layers().items():
        assert layer.mode == "fixed"
        kept = int(layer.mask_fixed.sum())
        assert kept == round(densities[name] * layer.mask_fixed.numel()), name
    assert mask_densities(net) == pytest.approx(densities, abs=1e-7)


def test_random_masks_are_seeded() -> None:
    densities = _reference_densities()
    nets = [SpikingResNet(MINI) for _ in range(3)]
    for net, seed in zip(nets, (1, 1, 2)):
        train.random_masks(net, densities, seed=seed)
    masks = [[m.mask_fixed for m in net.masked_layers().values()] for net in nets]
    assert all(torch.equal(a, b) for a, b in zip(masks[0], masks[1]))
    assert not all(torch.equal(a, b) for a, b in zip(masks[0], masks[2]))


def test_reported_threshold_is_the_deployed_nets() -> None:
    net = _net(masked=False)
    folded = fold(net)
    pairs = [(net.stem, folded.stem)]
    for src, dst in zip(net.blocks, folded.blocks):
        pairs += [(src.conv1, dst.conv1), (src.conv2, dst.conv2)]
    for src, dst in pairs:
        bn = src.bn
        assert not torch.allclose(bn.running_mean.abs(), bn.running_var)
        expected = fn.effective_threshold(THETA, bn.gamma, bn.running_var, bn.eps)
        torch.testing.assert_close(bn.effective_threshold(), expected)
        # the folded conv scales channel c by a_c: theta_eff = THETA / a_c on the raw conv
        scale = (dst.weight / src.conv.weight).flatten(1).mean(1)
        torch.testing.assert_close(bn.effective_threshold(), THETA / scale, rtol=1e-5, atol=0)
