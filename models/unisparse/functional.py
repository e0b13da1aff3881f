"""UniSparse math as pure functions: the BN-threshold identity, the energy model, the masks.

**BN-threshold identity.** For conv output ``x`` (channel ``c``) feeding BN then a LIF neuron
with threshold ``theta``, hard reset to 0 and ``a_c = gamma_c / sqrt(var_c + eps) > 0``::

    y = a_c * x + b_c,      b_c = beta_c - a_c * mu_c
    v_pre = v + dt/tau * (-v + y)           fires iff v_pre > theta

Dividing the (linear, sub-threshold) recurrence by ``a_c`` gives the same spikes for a neuron
driven by ``x + b_c / a_c`` with threshold ``theta / a_c`` (reset to 0 is scale-invariant)::

    theta_eff_c = theta * sqrt(var_c + eps) / gamma_c        (effective_threshold)
    i_bias_c    = beta_c * sqrt(var_c + eps) / gamma_c - mu_c (bias_current)

so ``gamma`` and ``beta`` *are* a learnable per-channel threshold and bias current; shrinking
``gamma`` or lowering ``beta`` raises the threshold and cuts the firing rate. ``gamma`` must stay
positive (else the inequality flips): it is parametrised as ``softplus(gamma_raw)``.

**Firing model of the affine parameters.** In training mode BN makes each channel's input
``y = gamma * xhat + beta`` with ``xhat`` of zero mean and unit variance. Under a Gaussian
``xhat`` the probability that the drive exceeds the threshold is::

    r_c(gamma, beta) = Phi((beta_c - theta) / gamma_c)          (firing_probability)

(for the LIF with tau = 2 steps a constant drive ``y`` fires iff ``y > theta``).

**Energy.** SOPs of a synaptic layer ``l`` fed by spikes ``s`` through weights gated by ``g``::

    SOP_l = sum_t sum_j s_j[t] * fanout_l(j; g)  = sum(conv(S_l, g))  with S_l = sum_{t,b} s

(``layer_sops``; exact for hard masks, equal to neuroedge.bench.sops' count). The budgeted
energy is ``E = E_AC * sum_{l >= 2} SOP_l`` per sample; the analog first layer is outside the
budget (spike sparsity cannot act on it) and is reported separately as MACs.

**One objective.** ``E(gamma, beta, masks) <= E_target``: ``energy_estimate`` returns the
*measured* batch energy as its value, with gradients routed through the two mechanisms::

    S'_l = stopgrad(S_l) * r_c / stopgrad(r_c)   (spike sparsification: d/d gamma, d/d beta)
    g'   = 1[m > 0] (forward), d sigmoid(T m)/dm (backward)   (weight masks: d/d m)

so d E / d gamma = sum_c d SOP / d S_c * S_c * d log r_c / d gamma (the ``"model"`` spike
route). The default spike route (``"surrogate"``, ``constraint.threshold_gradients``) instead
back-propagates ``E`` through the live spike counts with the LIF surrogate gradient, every
downstream layer included, and applies the result to ``gamma, beta`` only: the task loss
reaches the thresholds through the same surrogate, so both sides of the trade-off share its
scale (see ``train`` for the calibration). Each variant switches one or both routes on.
The budget is enforced by the augmented Lagrangian
``lambda (E / E_target - 1) + rho / 2 (E / E_target - 1)^2`` (``budget_penalty``), the
multiplier (either sign) updated by dual ascent on ``log(E / E_target)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

SOFTPLUS_ONE = 0.5413248546129181  # softplus^-1(1): gamma starts at 1


def positive_gamma(gamma_raw: torch.Tensor) -> torch.Tensor:
    """``gamma = softplus(gamma_raw) > 0`` so the BN-threshold identity never flips."""
    return F.softplus(gamma_raw)


def bn_affine(
    gamma: torch.Tensor, beta: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inference BN as ``y = a * x + b``: ``a = gamma / sqrt(var + eps)``, ``b = beta - a mu``."""
    a = gamma / torch.sqrt(var + eps)
    return a, beta - a * mean


def effective_threshold(
    theta: float, gamma: torch.Tensor, var: torch.Tensor, eps: float
) -> torch.Tensor:
    """Per-channel threshold on the raw conv output: ``theta * sqrt(var + eps) / gamma``."""
    return theta * torch.sqrt(var + eps) / gamma


def bias_current(
    gamma: torch.Tensor, beta: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, eps: float
) -> torch.Tensor:
    """Per-channel constant input current in the raw-conv frame: ``b / a``."""
    return beta * torch.sqrt(var + eps) / gamma - mean


def firing_probability(gamma: torch.Tensor, beta: torch.Tensor, theta: float) -> torch.Tensor:
    """``Phi((beta - theta) / gamma)``: the affine parameters' model of the firing rate."""
    return torch.special.ndtr((beta - theta) / gamma)


def mask_gate(
    logits: torch.Tensor, temperature: float, hard: bool, straight_through: bool = False
) -> torch.Tensor:
    """Weight gate: ``1[m > 0]`` once frozen (``hard``); while searching either the soft
    ``sigmoid(T m)`` or, ``straight_through``, the binary gate in the forward pass with the
    gradient of ``sigmoid(T m)`` in the backward pass."""
    binary = (logits > 0).to(logits.dtype)
    if hard:
        return binary
    soft = torch.sigmoid(temperature * logits)
    return binary + soft - soft.detach() if straight_through else soft


def layer_sops(
    spike_map: torch.Tensor, gate: torch.Tensor, stride: Any = 1, padding: Any = 0
) -> torch.Tensor:
    """Synaptic operations of one layer: every (input spike, surviving weight) pair.

    ``spike_map``: spikes summed over time and batch, ``(C, H, W)`` for a conv or ``(N,)`` for
    a linear layer; ``gate``: the weight gate, same shape as the weight.
    """
    if gate.dim() == 2:
        return (spike_map.reshape(1, -1) @ gate.t()).sum()
    return F.conv2d(spike_map.unsqueeze(0), gate, None, stride, padding).sum()


def rate_scaled(spike_map: torch.Tensor, rate: torch.Tensor) -> torch.Tensor:
    """``stopgrad(S) * r / stopgrad(r)``: the value of ``S``, the gradient of the rate model.

    ``rate`` is per channel (first axis of ``spike_map``, or per feature for flattened maps
    whose length is a multiple of the channel count, channel-major as ``flatten`` lays it out).
    """
    ratio = rate / rate.detach().clamp_min(1e-12)
    if spike_map.dim() == 1:
        ratio = ratio.repeat_interleave(spike_map.numel() // ratio.numel())
        return spike_map.detach() * ratio
    return spike_map.detach() * ratio.view(-1, *([1] * (spike_map.dim() - 1)))


def energy_estimate(
    terms: Sequence[tuple[torch.Tensor, torch.Tensor, Any, Any]], samples: int, e_ac_pj: float
) -> torch.Tensor:
    """Energy per sample in microjoules, ``E_AC * sum_l SOP_l / samples``, differentiable.

    ``terms``: one ``(spike_map, gate, stride, padding)`` per budgeted synaptic layer, already
    routed (``rate_scaled`` and/or a gate that carries gradient) as the variant asks.
    """
    total = sum(layer_sops(s, g, st, p) for s, g, st, p in terms)
    return total * e_ac_pj * 1e-6 / samples


def budget_penalty(
    energy: torch.Tensor, target: float, lmbda: float, rho: float = 0.0
) -> torch.Tensor:
    """``lambda (E / E_target - 1) + rho / 2 (E / E_target - 1)^2``, ``lambda`` of either sign:
    the equality form, with an optional augmented-Lagrangian term that damps the oscillation of
    a pure multiplier (it pulls back to the target at once, without waiting for ``lambda``).

    More energy always buys accuracy, so the optimum sits on the budget; a one-sided hinge let
    the energy overshoot to 11x below dense for a 6.7x target (closed masks and raised
    thresholds stay put once the push stops). Linear in ``E`` (not ``log E``), so a silent
    net gives a bounded gradient."""
    gap = energy / target - 1.0
    return lmbda * gap + 0.5 * rho * gap * gap


def dual_ascent(lmbda: float, energy: float, target: float, lr: float) -> float:
    """``lambda += lr * clip(log(E / E_target), -3, 3)``: symmetric in over- and undershoot."""
    ratio = math.log(max(energy, 1e-30) / target)
    return lmbda + lr * min(3.0, max(-3.0, ratio))


def spiking_unit(
    synapse: Any, lif: Any, x: torch.Tensor, v: torch.Tensor, extra: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``conv -> BN`` (or a folded conv) then LIF; ``extra`` is a shortcut current added to the
    membrane input before firing (membrane shortcut)."""
    current = synapse(x)
    if extra is not None:
        current = current + extra
    return lif(current, v)  # called as a module so the SOP counter's neuron hook sees it


def resnet_step(
    net: Any, x: torch.Tensor, states: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """One time step of a spiking ResNet with explicit membranes.

    ``net`` has ``stem``/``stem_lif``, ``blocks`` (each ``conv1``/``lif1``, ``conv2``/``lif2``,
    ``shortcut``) and ``fc``; block outputs are ``LIF(BN2(conv2(z1)) + shortcut(z_in))``, so
    every synaptic layer after the stem sees binary spikes. Returns the step's logits, the
    spikes of every LIF layer in order and their new membranes.
    """
    v_iter = iter(states)
    z, v = spiking_unit(net.stem, net.stem_lif, x, next(v_iter))
    spikes, membranes = [z], [v]
    for block in net.blocks:
        z1, v1 = spiking_unit(block.conv1, block.lif1, z, next(v_iter))
        z, v2 = spiking_unit(block.conv2, block.lif2, z1, next(v_iter), block.shortcut(z))
        spikes += [z1, z]
        membranes += [v1, v2]
    return net.fc(z.flatten(1)), spikes, membranes
