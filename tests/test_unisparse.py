"""snn.unisparse: the BN-threshold identity, energy routing, masks, folding and the budget."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from neuroedge.models.neurons.functional import LIFParams, LIFState, lif_step
from neuroedge.models.unisparse import constraint
from neuroedge.models.unisparse import functional as fn
from neuroedge.models.unisparse import train
from neuroedge.models.unisparse.loop import fit_phase
from neuroedge.models.unisparse.measure import BatchSummedSopCounter, is_binary
from neuroedge.models.unisparse.module import MINI, SpikingResNet, fold
from neuroedge.models.unisparse.pipeline import (
    EnergyBudgetError,
    measure_variant,
    resolve_target,
    run_variants,
)

from unisparse_nets import random_net

TINY = {
    **train.DEFAULTS,
    "train_subset": 192,
    "dense_epochs": 2,
    "sparse_epochs": 2,
    "finetune_epochs": 1,
    "batch": 64,
}


def _spiking_net(seed: int = 0, masked: bool = True) -> SpikingResNet:
    """A random mini-ResNet that fires, with half its weights masked (``masked``)."""
    return random_net(seed, keep=0.5 if masked else None)


def test_bn_threshold_identity_gives_identical_spikes() -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(8, 32, 6, generator=gen) * 2  # (T, batch, channels) conv outputs
    gamma, beta = torch.rand(6, generator=gen) + 0.2, torch.randn(6, generator=gen)
    mean, var, eps = torch.randn(6, generator=gen), torch.rand(6, generator=gen) + 0.1, 1e-5
    a, b = fn.bn_affine(gamma, beta, mean, var, eps)
    theta_eff = fn.effective_threshold(1.0, gamma, var, eps)
    current = fn.bias_current(gamma, beta, mean, var, eps)
    p = LIFParams(tau_mem=2e-3, dt=1e-3)
    v_bn, v_eff, agree, fired = LIFState(torch.zeros(32, 6)), LIFState(torch.zeros(32, 6)), 0, 0
    for xt in x:
        z_bn, v_bn = lif_step(a * xt + b, v_bn, p)
        z_eff, v_eff = lif_step(xt + current, v_eff, p._replace(v_th=theta_eff))
        agree += int((z_bn == z_eff).sum())
        fired += int(z_bn.sum())
    assert fired > 0
    assert agree == x.numel()


def test_gamma_stays_positive_for_any_raw_value() -> None:
    raw = torch.tensor([-50.0, -3.0, 0.0, 4.0])
    assert bool((fn.positive_gamma(raw) > 0).all())


def test_firing_probability_falls_as_threshold_rises() -> None:
    beta = torch.tensor([0.5, 0.0, -0.5])
    rates = fn.firing_probability(torch.ones(3), beta, 1.0)
    assert bool((rates[:-1] > rates[1:]).all())
    narrow = fn.firing_probability(torch.tensor([0.3]), torch.tensor([0.0]), 1.0)
    assert float(narrow) < float(rates[1])


def test_layer_sops_equals_opcounter_count_for_masked_layers() -> None:
    from neuroedge.bench.sops import OpCounter

    folded = fold(_spiking_net())
    xs = torch.rand(4, 8, 1, 8, 8)
    with torch.no_grad(), OpCounter(folded) as generic, BatchSummedSopCounter(folded) as summed:
        folded.forward_sequence(xs)
    ops = generic.totals(8)
    fast = summed.per_sample(8)
    assert ops.sops_per_sample > 0
    assert fast["sops"] == pytest.approx(ops.sops_per_sample, rel=1e-9)
    assert fast["macs"] == pytest.approx(ops.macs_per_sample, rel=1e-9)


def test_is_binary_accepts_only_zeros_and_ones() -> None:
    spikes = (torch.rand(8, 4, 5, 5) > 0.7).float()
    assert is_binary(spikes) and is_binary(torch.zeros(3)) and is_binary(torch.ones(2, 2))
    assert is_binary(torch.zeros(0))
    for bad in (0.5, 1.0 - 2.0**-24, 1e-30, -1.0, 2.0, float("nan")):
        x = spikes.clone()
        x[3, 1, 2, 2] = bad
        assert not is_binary(x), bad


def test_fold_reproduces_training_network_spikes() -> None:
    net = _spiking_net()
    folded = fold(net)
    xs = torch.rand(6, 4, 1, 8, 8)
    with torch.no_grad():
        s_net, s_fold = net.init_state(4), folded.init_state(4)
        agree = total = fired = 0
        for x in xs:
            _, z_a, *s_net = net(x, *s_net)
            _, z_b, *s_fold = folded(x, *s_fold)
            agree += int((z_a == z_b).sum())
            total, fired = total + z_a.numel(), fired + int(z_a.sum())
    assert fired > 0
    assert agree / total >= 0.9999  # exact math; float rounding may flip a tie at threshold
    masked = [m for m in folded.modules() if isinstance(m, torch.nn.Conv2d)][1:]
    assert all(float((m.weight == 0).float().mean()) > 0.3 for m in masked)


def _searching_net(mode: str) -> tuple[SpikingResNet, list[torch.Tensor]]:
    """A seeded unmasked net in training mode, masks in ``mode``, and its spike maps."""
    torch.manual_seed(0)
    net = _spiking_net(masked=False).train()
    for layer in net.masked_layers().values():
        layer.set_mode(mode, 4.0)
    _, maps = net.forward_sequence(
        torch.rand(3, 8, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    )
    return net, maps


def _energy_grads(
    route_spikes: bool, route_masks: bool, spike_scale: float = 1.0, values: list | None = None
) -> tuple[float, float]:
    net, maps = _searching_net("soft")
    terms = constraint.budget_terms(net, maps, route_spikes, route_masks, spike_scale)
    energy = fn.energy_estimate(terms, 8, 0.9)
    if values is not None:
        values.append(float(energy.detach()))
    energy.backward()
    bn = sum(float(b.beta.grad.abs().sum()) for b in net.spike_bns() if b.beta.grad is not None)
    masks = sum(
        float(m.mask_logits.grad.abs().sum())
        for m in net.masked_layers().values()
        if m.mask_logits.grad is not None
    )
    return bn, masks


def test_energy_gradient_reaches_only_the_routed_mechanism() -> None:
    bn_spike, mask_spike = _energy_grads(True, False)
    bn_weight, mask_weight = _energy_grads(False, True)
    assert bn_spike > 0 and mask_spike == 0
    assert mask_weight > 0 and bn_weight == 0


def test_spike_scale_scales_only_the_threshold_gradient() -> None:
    values: list[float] = []
    bn_full, mask_full = _energy_grads(True, True, 1.0, values)
    bn_tenth, mask_tenth = _energy_grads(True, True, 0.1, values)
    assert values[0] == pytest.approx(values[1])  # the energy value is the counted one
    assert bn_tenth == pytest.approx(0.1 * bn_full, rel=1e-4)
    assert mask_tenth == pytest.approx(mask_full, rel=1e-5)


def _constrained(spike_grad: str, lmbda: float) -> tuple[SpikingResNet, torch.Tensor, list]:
    net, maps = _searching_net("ste")
    budget = {"route_spikes": True, "route_masks": True, "lambda": lmbda, "target_uj": 1e-3}
    cfg = {**train.DEFAULTS, "spike_grad": spike_grad, "penalty_rho": 0.0}
    penalty, energy, grads = constraint.constrained_terms(net, maps, budget, cfg, 8)
    assert energy > 0 and budget["lambda"] != lmbda  # the dual step ran
    return net, penalty, grads


def test_surrogate_route_pushes_only_the_thresholds_through_the_spikes() -> None:
    net, penalty, grads = _constrained("surrogate", 2.0)
    bn_params = {id(p) for bn in net.threshold_bns() for p in (bn.gamma_raw, bn.beta)}
    assert grads and all(id(p) in bn_params for p, _ in grads)
    betas = {id(bn.beta) for bn in net.spike_bns()}
    beta_push = sum(float(g.sum()) for p, g in grads if id(p) in betas)
    assert beta_push > 0  # lambda > 0: descent lowers beta (raises the threshold)
    penalty.backward()  # the penalty itself now reaches only the masks
    assert all(bn.beta.grad is None for bn in net.spike_bns())
    assert any(
        m.mask_logits.grad is not None and float(m.mask_logits.grad.abs().sum()) > 0
        for m in net.masked_layers().values()
    )
    _, _, flipped = _constrained("surrogate", -2.0)  # under budget: the push reverses
    assert all(torch.allclose(a, -b) for (_, a), (_, b) in zip(grads, flipped))


def test_threshold_route_reaches_the_projection_shortcuts_bn_as_conv2s() -> None:
    # both BN outputs are summed into the block's output neuron: their betas are one bias
    # current, so the energy route must push them alike (the shortcut's was left out)
    net, _, grads = _constrained("surrogate", 2.0)
    push = {id(p): g for p, g in grads}
    shortcuts = [b for b in net.blocks if hasattr(b.shortcut, "bn")]
    assert shortcuts
    for block in shortcuts:
        conv2, shortcut = push[id(block.conv2.bn.beta)], push.get(id(block.shortcut.bn.beta))
        assert shortcut is not None and float(conv2.abs().sum()) > 0
        torch.testing.assert_close(shortcut, conv2)


def test_model_route_keeps_the_threshold_gradient_in_the_penalty() -> None:
    net, penalty, grads = _constrained("model", 2.0)
    assert grads == []
    penalty.backward()
    assert sum(float(bn.beta.grad.sum()) for bn in net.spike_bns()) > 0


def test_energy_estimate_value_is_the_counted_sops() -> None:
    net = _spiking_net()
    folded = fold(net)
    xs = torch.rand(4, 8, 1, 8, 8)
    with torch.no_grad(), BatchSummedSopCounter(folded) as counter:
        folded.forward_sequence(xs)
        _, maps = net.forward_sequence(xs)
    energy = fn.energy_estimate(constraint.budget_terms(net, maps, True, True), 8, 0.9)
    assert float(energy.detach()) == pytest.approx(0.9e-6 * counter.per_sample(8)["sops"], rel=1e-4)


def test_dual_ascent_tightens_over_budget_and_relaxes_under() -> None:
    assert fn.dual_ascent(1.0, 2.0, 1.0, 0.1) > 1.0
    assert fn.dual_ascent(1.0, 0.5, 1.0, 0.1) < 1.0
    assert fn.dual_ascent(0.0, 0.5, 1.0, 0.1) < 0.0  # under budget: the push reverses
    assert fn.dual_ascent(0.0, 0.0, 1.0, 0.1) == pytest.approx(-0.3)  # clipped, even at E = 0


def test_budget_penalty_gradient_follows_the_multiplier_sign() -> None:
    for lmbda in (2.0, -2.0):
        energy = torch.tensor(0.5, requires_grad=True)
        fn.budget_penalty(energy, 1.0, lmbda).backward()
        assert float(energy.grad) == pytest.approx(lmbda)


def test_augmented_term_pulls_back_to_the_target_without_a_multiplier() -> None:
    for energy_value, sign in ((2.0, 1.0), (0.5, -1.0)):
        energy = torch.tensor(energy_value, requires_grad=True)
        fn.budget_penalty(energy, 1.0, 0.0, rho=4.0).backward()
        assert float(energy.grad) * sign > 0  # over budget: push down; under: let it rise
    energy = torch.tensor(1.0, requires_grad=True)
    fn.budget_penalty(energy, 1.0, 0.0, rho=4.0).backward()
    assert float(energy.grad) == 0.0  # on the target only the multiplier acts


def test_target_anneals_geometrically_from_the_first_energy_to_the_budget() -> None:
    budget = {"target_uj": 1.0, "anneal_batches": 4}
    got = [constraint.current_target(budget, energy) for energy in (16.0, 3.0, 3.0, 3.0, 3.0, 3.0)]
    assert got == pytest.approx([16.0, 8.0, 4.0, 2.0, 1.0, 1.0])
    assert constraint.current_target({"target_uj": 1.0}, 16.0) == 1.0  # no anneal: the budget


def test_distillation_pulls_the_student_toward_the_teacher() -> None:
    labels = torch.tensor([0, 1])
    student = torch.zeros(2, 3, requires_grad=True)
    teacher = torch.tensor([[0.0, 3.0, 0.0], [0.0, 3.0, 0.0]])
    cfg = {"kd_weight": 1.0, "kd_temp": 2.0}
    constraint.task_loss(student, labels, teacher, cfg).backward()
    assert float(student.grad[:, 1].max()) < 0  # raising class 1 (the teacher's) lowers it
    plain = constraint.task_loss(student.detach(), labels, None, cfg)
    assert float(plain) == pytest.approx(float(torch.log(torch.tensor(3.0))))


@pytest.mark.parametrize(
    "bad", [{"budget_ratio": 0.0}, {"budget_ratio": 1.5}, {"energy_target_uj": -1.0}]
)
def test_malformed_budget_is_refused(bad: dict) -> None:
    with pytest.raises(EnergyBudgetError, match="must be"):
        resolve_target({**train.DEFAULTS, **bad}, 1.0)


def test_random_mask_without_unisparse_is_refused() -> None:
    with pytest.raises(ValueError, match="random_mask"):
        run_variants(TINY, ("dense", "random_mask"))


@pytest.fixture(scope="module")
def tiny_dense() -> tuple[SpikingResNet, object]:
    from neuroedge.models.unisparse.pipeline import load_data

    torch.set_num_threads(1)
    data = load_data(TINY)
    net, _ = train.train_dense(data, TINY, progress=False)
    return net, data


def test_constrained_training_cuts_measured_energy(tiny_dense: tuple) -> None:
    net, data = tiny_dense
    free = train.make_net(TINY)
    free.load_state_dict(net.state_dict())
    free_logs = fit_phase(free, data, TINY, 3, 1e-3, None, "free", progress=False)
    e_free = measure_variant("free", free.eval(), free_logs, data, TINY, None)
    target = e_free.metrics["energy_budgeted_uj"].value / 4
    fast = {**TINY, "dual_lr": 0.5, "bn_lr": 0.02}  # few steps: let the multiplier act quickly
    tight, logs = train.sparsify(net.state_dict(), "spike_only", target, data, fast, progress=False)
    e_tight = measure_variant("spike_only", tight, logs, data, fast, target)
    assert logs[0]["lambda"] > 0
    assert e_tight.metrics["energy_budgeted_uj"].value < 0.6 * target * 4


def test_unreachable_budget_is_reported_not_ignored(tiny_dense: tuple) -> None:
    net, data = tiny_dense
    cfg = {**TINY, "sparse_epochs": 1, "finetune_epochs": 1}
    sparse, logs = train.sparsify(net.state_dict(), "spike_only", 1e-9, data, cfg, progress=False)
    result = measure_variant("spike_only", sparse, logs, data, cfg, 1e-9)
    assert result.metrics["budget_met"].value == 0.0
    assert any("NOT met" in note for note in result.notes)


def test_sparsify_rejects_unknown_variant_and_bad_target(tiny_dense: tuple) -> None:
    net, data = tiny_dense
    with pytest.raises(ValueError, match="variant"):
        train.sparsify(net.state_dict(), "magic", 1.0, data, TINY, progress=False)
    with pytest.raises(ValueError, match="positive"):
        train.sparsify(net.state_dict(), "unisparse", float("nan"), data, TINY, progress=False)
    with pytest.raises(ValueError, match="spike_grad"):
        train.sparsify(
            net.state_dict(), "unisparse", 1.0, data, {**TINY, "spike_grad": "x"}, progress=False
        )


def test_random_masks_match_requested_density() -> None:
    net = SpikingResNet(MINI)
    train.random_masks(net, {n: 0.25 for n in net.masked_layers()}, seed=3)
    kept = np.mean([float(m.mask_fixed.mean()) for m in net.masked_layers().values()])
    assert kept == pytest.approx(0.25, abs=0.03)
