"""Leaky integrate-and-fire dynamics as pure step functions ``(input, state, params) -> ...``.

Continuous model (NIR's LIF): ``tau * dv/dt = (v_leak - v) + r * i``. One forward-Euler step
of length ``dt``::

    v_pre = v + dt / tau * (v_leak - v + r * i)
    z     = H(v_pre - v_th)                        # spike
    v'    = v_pre * (1 - z) + v_reset * z          # reset "zero" (to v_reset)
    v'    = v_pre - v_th * z                       # reset "subtract"

The leaky integrator (LI, a readout without spikes) is the same without threshold and reset.
Every parameter but ``reset``/``dt``/``alpha`` may be a float or a 1-D per-channel tensor (or
array): one value per channel, applied along dim 1 of the state (batch, C, ...), so a conv
population (batch, C, H, W) reads it as (C, 1, 1), as NIR export does (neuroedge.export.nir).
Training uses the SuperSpike surrogate gradient ``1 / (alpha * |v_pre - v_th| + 1)^2``; in
inference, tracing and ONNX export the spike is the plain Heaviside ``(v_pre - v_th) > 0``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

RESETS = ("zero", "subtract")


class LIFParams(NamedTuple):
    tau_mem: Any = 2e-3  # membrane time constant, seconds
    v_th: Any = 1.0  # threshold: float or per-channel tensor, volts (arbitrary units)
    v_leak: Any = 0.0  # leak (resting) potential
    v_reset: Any = 0.0  # potential after a spike when reset == "zero"
    r: Any = 1.0  # input resistance
    reset: str = "zero"  # "zero" or "subtract"
    dt: float = 1e-3  # step length, seconds
    alpha: float = 10.0  # surrogate gradient sharpness


class LIFState(NamedTuple):
    v: torch.Tensor  # membrane potential


class _SuperSpike(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, alpha: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        return grad / (ctx.alpha * x.abs() + 1.0) ** 2, None


def heaviside(x: torch.Tensor, alpha: float = 10.0) -> torch.Tensor:
    """Spike where ``x > 0``; surrogate gradient only when autograd needs one."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _SuperSpike.apply(x, alpha)
    return (x > 0).to(x.dtype)


def per_channel(value: Any, like: torch.Tensor, name: str = "parameter") -> Any:
    """``value`` shaped to broadcast per channel against a population ``like`` (batch, C, ...).

    Scalars and tensors of any other rank pass unchanged. A 1-D tensor or array holds one value
    per channel (dim 1): it becomes (C, 1, ..., 1), since plain broadcasting would apply it
    along the *last* axis (W of a conv population: a crash if C != W, per column if C == W)."""
    if getattr(value, "ndim", 0) != 1 or like.dim() < 2:
        return value
    if not isinstance(value, torch.Tensor):
        value = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    if value.numel() not in (1, like.shape[1]):
        raise ValueError(
            f"per-channel {name} has {value.numel()} values but the population "
            f"{tuple(like.shape)} has {like.shape[1]} channels (dim 1)"
        )
    return value.reshape(-1, *([1] * (like.dim() - 2)))


def _bound(p: LIFParams, i: torch.Tensor, v: torch.Tensor) -> LIFParams:
    """``p`` with every neuron parameter shaped per channel for the population of ``i``/``v``."""
    names = ("tau_mem", "v_th", "v_leak", "v_reset", "r")
    if all(getattr(getattr(p, n), "ndim", 0) != 1 for n in names):
        return p  # scalars (the usual case, every time step): nothing to reshape
    like = i if i.dim() > v.dim() else v
    return p._replace(**{n: per_channel(getattr(p, n), like, n) for n in names})


def lif_step(
    i: torch.Tensor, state: LIFState, p: LIFParams = LIFParams()
) -> tuple[torch.Tensor, LIFState]:
    """One Euler step of a LIF population; returns spikes and the new state."""
    if p.reset not in RESETS:
        raise ValueError(f"reset {p.reset!r} is not one of {RESETS}")
    p = _bound(p, i, state.v)
    v_pre = state.v + (p.dt / p.tau_mem) * (p.v_leak - state.v + p.r * i)
    z = heaviside(v_pre - p.v_th, p.alpha)
    if p.reset == "zero":
        v_new = v_pre * (1.0 - z) + p.v_reset * z
    else:
        v_new = v_pre - p.v_th * z
    return z, LIFState(v_new)


def li_step(
    i: torch.Tensor, state: LIFState, p: LIFParams = LIFParams()
) -> tuple[torch.Tensor, LIFState]:
    """One Euler step of a leaky integrator (no spikes); returns the potential and state."""
    p = _bound(p, i, state.v)
    v_new = state.v + (p.dt / p.tau_mem) * (p.v_leak - state.v + p.r * i)
    return v_new, LIFState(v_new)
