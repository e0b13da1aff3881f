"""``LIFConvNet``: binds the layers of the LIF convnet; ``forward`` is one explicit-state step."""

from __future__ import annotations

import torch
from torch import nn

from neuroedge.models.lif_convnet.functional import lif_convnet_step
from neuroedge.models.neurons.functional import LIFParams
from neuroedge.models.neurons.module import LICell, LIFCell

IMAGE = 8  # digits are 8x8
STATE_NAMES = ("v1", "v2", "v3")
OUTPUT_NAMES = ("logits", "spikes1", "spikes2")


class LIFConvNet(nn.Module):
    def __init__(
        self,
        channels1: int = 16,
        channels2: int = 32,
        classes: int = 10,
        params: LIFParams = LIFParams(),
    ) -> None:
        super().__init__()
        self.channels = (channels1, channels2, classes)
        self.conv1 = nn.Conv2d(1, channels1, 3, padding=1)
        self.lif1 = LIFCell(params)
        self.conv2 = nn.Conv2d(channels1, channels2, 3, padding=1)
        self.lif2 = LIFCell(params)
        self.fc = nn.Linear(channels2 * (IMAGE // 2) ** 2, classes)
        self.readout = LICell(params)

    def forward(
        self, x: torch.Tensor, v1: torch.Tensor, v2: torch.Tensor, v3: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        return lif_convnet_step(self, x, v1, v2, v3)

    def init_state(
        self, batch: int, device: torch.device | str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Zero membranes ``(v1, v2, v3)`` on ``device`` (default: the CPU)."""
        c1, c2, classes = self.channels
        half = IMAGE // 2
        return (
            torch.zeros(batch, c1, IMAGE, IMAGE, device=device),
            torch.zeros(batch, c2, half, half, device=device),
            torch.zeros(batch, classes, device=device),
        )

    def forward_sequence(self, xs: torch.Tensor) -> torch.Tensor:
        """Logits averaged over time for a (T, batch, 1, 8, 8) input (used in training)."""
        state = self.init_state(xs.shape[1], xs.device)  # training runs on the input's device
        total = torch.zeros(xs.shape[1], self.channels[2], device=xs.device)
        for x in xs:
            y, _, _, *state = self(x, *state)
            total = total + y
        return total / xs.shape[0]
