"""The energy constraint of the sparsifying phases, one batch at a time: the budgeted terms
routed per variant, the task loss (with distillation), the annealed target, the threshold
gradients and the dual step (used by ``loop.run_epoch``; the phases are in ``train``).

The budget is enforced by an augmented Lagrangian on one multiplier,
``L = CE + lambda (E / E' - 1) + rho / 2 (E / E' - 1)^2``,
``lambda <- lambda + eta clip(log(E / E'), -3, 3)`` once per batch (either sign),
``E' = aim E_target`` (aim 0.95 keeps it inside), ``E`` the measured batch energy (see
``functional.energy_estimate``). The pure multiplier (``rho = 0``) winds up while the energy
lags the target and then oscillates with a ~10-epoch period (measured on digits: 5.4x, not
met, at 91.9%); ``rho = 2`` pulls back at once and holds ``E`` within 1% of ``E'`` through
the fine-tune.

Two stabilisers of the constrained phases (the paper leaves the schedule open):

* the target is annealed geometrically from the net's starting energy down to the budget over
  the first ``target_anneal`` fraction of the search batches, so the multiplier tracks a slowly
  moving target instead of slamming a dense net into the budget (which silenced layers);
* the sparse student distils from the dense teacher, ``(1 - a) CE + a t^2 KL(p_t || q_t)``
  with ``a = kd_weight``, ``t = kd_temp``: the soft targets carry the dense net's ranking of
  the wrong classes, which a thresholded, pruned net loses first.

**Threshold gradient (``spike_grad``).** The energy's gradient on ``gamma, beta`` is
back-propagated through the live spike counts with the LIF surrogate gradient, every
downstream layer included, and applied to the BN affine parameters only
(``threshold_gradients``, ``"surrogate"``, default). The previous route, the Gaussian rate
model ``Phi((beta - theta) / gamma)`` (``"model"``, kept for comparison), is not in the task
loss's currency. Calibration on the trained dense digits net (shift every ``beta`` of one LIF
layer by +-0.05, count SOPs on the test split): ``dE/dbeta`` of LIF layers 0..6 is
0.163 / 0.077 / 0.060 / 0.030 / 0.028 / 0.018 / 0.001 uJ per unit; the Gaussian model gives
0.052 / 0.040 / 0.022 / 0.031 / 0.030 / 0.016 / 0.002 (0.3-1.8x: it ignores the downstream
compounding), the surrogate 0.018 / 0.011 / 0.007 / 0.008 / 0.006 / 0.005 / 0.0003
(0.1-0.3x). The task gradient reaches ``gamma, beta`` through that same surrogate, so with
the surrogate route both sides of ``dL/dtheta = -lambda dE/dtheta`` carry the same scale
error and the multiplier trades them fairly; the model route weighs the energy side ~4x
heavier than the surrogate-scaled task side and over-raises the thresholds. Measured (digits,
the same dense net at 96.4%, budget 1/5.5, sparsify seeds 0 / 1 / 2): unisparse 92.8% / 93.9% /
95.3% with the model route (mean 94.0%) vs 95.3% / 93.6% / 96.7% at 5.87x / 5.77x / 5.99x
fewer SOPs with the surrogate route (mean 95.2%);
weight_only 94.7% / 94.7% / 96.1% at 5.45x / 5.87x / 5.58x (mean 95.2%): unisparse wins two
seeds of three, with equal mean accuracy at ~4% less energy. Ten seeds do not confirm it (seeds
0-9, each with its own split and dense net, the bench's default config): unisparse 94.53% mean
at 5.5-6.2x, 2.2 points below dense (96.75%); weight_only 95.00% at 5.1-6.2x; paired
difference -0.47 +- 0.42 points (SE), 4 wins and 6 losses; spike_only 69.4%. Also tried, not
adopted: the spike route only in the fine-tune (masks search alone first): 94.7% / 93.3%;
BN statistics frozen at the dense net's during the constrained phases (train = deploy
normalisation): 91.7% (seed 0); budget 1/5.2 with the model route: 90.6% (weight_only 94.4%).

``spike_scale`` (unisparse only) scales the share of the energy gradient that reaches the BN
affine parameters; the default 1 is the paper's single objective. With the model route on
digits (one seed, budget 1/5.5) 0.1 / 0.3 / 1 gave 92.8% / 94.4% / 92.8%: within the
seed-to-seed scatter, so the default is left at the unweighted objective.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from neuroedge.distributed import current
from neuroedge.models.unisparse.functional import (
    budget_penalty,
    dual_ascent,
    energy_estimate,
    rate_scaled,
)
from neuroedge.models.unisparse.module import SpikingResNet


def budget_terms(
    net: SpikingResNet,
    maps: list[torch.Tensor],
    route_spikes: bool,
    route_masks: bool,
    spike_scale: float = 1.0,
) -> list[tuple[torch.Tensor, torch.Tensor, Any, Any]]:
    """One ``(spike map, gate, stride, padding)`` per budgeted layer, routed per variant.

    ``spike_scale`` scales the energy gradient that reaches the BN affine parameters (the value
    of the energy is unchanged)."""
    rates = [bn.firing_probability() for bn in net.spike_bns()]
    terms = []
    for src, layer in net.consumers():
        s = maps[src]
        if layer is net.fc:
            s = s.reshape(-1)
        s = s.detach()
        if route_spikes:
            s = s + spike_scale * (rate_scaled(s, rates[src]) - s)
        gate = layer.gate() if route_masks else layer.gate().detach()
        conv = getattr(layer, "conv", None)
        terms.append((s, gate, conv.stride if conv else 1, conv.padding if conv else 0))
    return terms


def task_loss(
    logits: torch.Tensor, labels: torch.Tensor, teacher: torch.Tensor | None, cfg: Mapping[str, Any]
) -> torch.Tensor:
    """Cross-entropy, or with teacher logits ``(1 - a) CE + a t^2 KL(teacher_t || student_t)``."""
    ce = F.cross_entropy(logits, labels)
    weight = float(cfg.get("kd_weight", 0.0))
    if teacher is None or weight <= 0:
        return ce
    t = float(cfg["kd_temp"])
    kd = (
        F.kl_div(
            F.log_softmax(logits / t, -1),
            F.log_softmax(teacher / t, -1),
            reduction="batchmean",
            log_target=True,
        )
        * t
        * t
    )
    return (1 - weight) * ce + weight * kd


def current_target(budget: dict[str, Any], energy: float) -> float:
    """The annealed target: ``E0 (E_T / E0)^(k / K)`` for batch ``k < K``, then ``E_T``.

    ``E0`` is the energy measured on the first constrained batch."""
    final, span = budget["target_uj"], int(budget.get("anneal_batches", 0))
    seen = budget.get("seen", 0)
    budget["seen"] = seen + 1
    if seen >= span:
        return final
    start = budget.setdefault("start_uj", max(energy, final))
    return start * (final / start) ** (seen / span)


def threshold_gradients(
    net: SpikingResNet,
    maps: list[torch.Tensor],
    terms: list[tuple[torch.Tensor, torch.Tensor, Any, Any]],
    samples: int,
    e_ac_pj: float,
    scale: float,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``scale * dE/d(gamma_raw, beta)`` of every BN that feeds a LIF layer (projection
    shortcuts' included: ``threshold_bns``), back-propagated through the
    live spike counts (surrogate gradient, every downstream layer included; gates fixed)."""
    live = [
        (maps[src].reshape(-1) if layer is net.fc else maps[src], gate.detach(), st, pad)
        for (src, layer), (_, gate, st, pad) in zip(net.consumers(), terms)
    ]
    params = [p for bn in net.threshold_bns() for p in (bn.gamma_raw, bn.beta)]
    raw = torch.autograd.grad(
        energy_estimate(live, samples, e_ac_pj), params, retain_graph=True, allow_unused=True
    )
    return [(p, scale * g) for p, g in zip(params, raw) if g is not None]


def constrained_terms(
    net: SpikingResNet,
    maps: list[torch.Tensor],
    budget: dict[str, Any],
    cfg: Mapping[str, Any],
    samples: int,
) -> tuple[torch.Tensor, float, list[tuple[torch.Tensor, torch.Tensor]]]:
    """One batch of the constraint: the penalty (its gradient reaches the routed masks, and the
    thresholds under ``spike_grad="model"``), the measured energy, the surrogate-route threshold
    gradients (``spike_grad="surrogate"``; empty otherwise); then one dual step.

    The surrogate route applies ``dP/dE = (lambda + rho (E/E' - 1)) / E'`` times the
    back-propagated ``dE/d(gamma, beta)`` to the BN affine parameters only."""
    e_ac, rho = float(cfg["e_ac_pj"]), float(cfg.get("penalty_rho", 0.0))
    scale = budget.get("spike_scale", 1.0)
    surrogate = budget["route_spikes"] and cfg.get("spike_grad", "surrogate") == "surrogate"
    terms = budget_terms(
        net, maps, budget["route_spikes"] and not surrogate, budget["route_masks"], scale
    )
    energy = energy_estimate(terms, samples, e_ac)
    value = float(energy.detach())
    dp = current()
    if dp is not None:  # data-parallel: the global batch's energy, one multiplier everywhere
        value = dp.mean(value)
    target = current_target(budget, value)
    penalty = budget_penalty(energy, target, budget["lambda"], rho)
    grads = []
    if surrogate:
        slope = (budget["lambda"] + rho * (value / target - 1.0)) / target
        grads = threshold_gradients(net, maps, terms, samples, e_ac, slope * scale)
    budget["lambda"] = dual_ascent(budget["lambda"], value, target, float(cfg["dual_lr"]))
    return penalty, value, grads
