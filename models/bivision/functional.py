"""The STATNF neuron as a pure step function ``(I, state, params) -> (s, state')``.

The paper names a "micro-level noise-filtering neuron" and nothing more; this is the
parametrization of research note 2.4 (spatio-temporal adaptive threshold, noise filtering).
Per channel c, for a feature map I[t] (after the synaptic conv)::

    v[t] = lam_c * v[t-1] * (1 - s[t-1]) + I[t] + (K_c * s[t-1])      # K_c: depthwise 3x3
    h[t] = rho * h[t-1] + s[t-1]                                       # spike trace
    theta[t] = theta0 + a_c * h[t]                                     # adaptive threshold
    s[t] = H(v[t] - theta[t])

Decisions and reasons:

* Spatial support ``K_c * s[t-1]``: a lateral excitatory depthwise 3x3 conv of the layer's own
  previous spikes (the centre tap zeroed): a neuron whose neighbours fired is pushed over
  threshold, an isolated one is not (the DVS background-activity filter, learned per channel).
  The term acts on spikes, so it costs accumulates (SOPs), which the counter sees.
* Adaptive threshold (ALIF-like) with a decaying spike trace: a neuron that keeps firing (a hot
  pixel, flicker) raises its own threshold; ``rho = 0.5`` fixed (T is short, 5 steps).
* ``lam_c = sigmoid(beta_c)`` and ``a_c = softplus(alpha_c)`` are learned per channel and
  kept in range by construction; ``theta0 = 1``. Surrogate gradient: SuperSpike (as the other
  SNNs here), plain Heaviside in inference and export.
* State is explicit ``(v, s, h)``: ONNX export keeps it (see neuroedge.export.onnx).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from neuroedge.models.neurons.functional import heaviside


class STATNFState(NamedTuple):
    v: torch.Tensor  # membrane potential
    s: torch.Tensor  # spikes of the previous step
    h: torch.Tensor  # spike trace driving the threshold


class STATNFParams(NamedTuple):
    beta: torch.Tensor  # (C,) leak logit: lam = sigmoid(beta)
    alpha: torch.Tensor  # (C,) adaptation logit: a = softplus(alpha)
    lateral: torch.Tensor  # (C, 1, 3, 3) depthwise support kernel, centre tap ignored
    theta0: float = 1.0
    rho: float = 0.5
    sharpness: float = 10.0  # surrogate gradient sharpness


CENTRE_MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])


def statnf_step(
    i: torch.Tensor, state: STATNFState, p: STATNFParams, support: torch.Tensor
) -> tuple[torch.Tensor, STATNFState]:
    """One STATNF step for input current ``i`` (B, C, H, W); ``support`` = K * s[t-1]."""
    shape = (1, -1, 1, 1)
    lam = torch.sigmoid(p.beta).view(shape)
    a = F.softplus(p.alpha).view(shape)
    v = lam * state.v * (1.0 - state.s) + i + support
    h = p.rho * state.h + state.s
    s = heaviside(v - (p.theta0 + a * h), p.sharpness)
    return s, STATNFState(v, s, h)
