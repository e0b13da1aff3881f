"""Thin ``nn.Module`` wrappers that bind neuron parameters; state stays explicit.

``forward(i, v) -> (z, v')``: the membrane is an argument and a result, never an attribute,
so ONNX export keeps it (see neuroedge.export.onnx).
"""

from __future__ import annotations

import torch
from torch import nn

from neuroedge.models.neurons.functional import LIFParams, LIFState, li_step, lif_step


class LIFCell(nn.Module):
    """A LIF population; marks itself ``is_spiking_neuron`` for the SOP counter."""

    is_spiking_neuron = True

    def __init__(self, params: LIFParams = LIFParams()) -> None:
        super().__init__()
        self.params = params

    def forward(self, i: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z, state = lif_step(i, LIFState(v), self.params)
        return z, state.v


class LICell(nn.Module):
    """A leaky-integrator readout: its potential is the output."""

    def __init__(self, params: LIFParams = LIFParams()) -> None:
        super().__init__()
        self.params = params

    def forward(self, i: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, state = li_step(i, LIFState(v), self.params)
        return y, state.v
