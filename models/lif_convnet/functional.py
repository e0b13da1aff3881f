"""The LIF convnet as one pure step: ``(x_t, v1, v2, v3) -> (logits_t, z1, z2, v1', v2', v3')``.

conv1 (1->c1, 3x3) -> LIF -> conv2 (c1->c2, 3x3) -> 2x2 average pool -> LIF -> linear -> LI.
Pooling sits *before* the second LIF so every synaptic layer after the first receives binary
spikes (pooled spikes would not be binary, and would count as MACs instead of SOPs). The step
calls the layers as modules so forward hooks (SOP counting) see every synaptic operation.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def lif_convnet_step(
    net: Any, x: torch.Tensor, v1: torch.Tensor, v2: torch.Tensor, v3: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """One time step of ``net`` (conv1, lif1, conv2, lif2, fc, readout); state is explicit."""
    z1, v1 = net.lif1(net.conv1(x), v1)
    z2, v2 = net.lif2(F.avg_pool2d(net.conv2(z1), 2), v2)
    y, v3 = net.readout(net.fc(z2.flatten(1)), v3)
    return y, z1, z2, v1, v2, v3
