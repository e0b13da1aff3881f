"""BiSNet: a spiking backbone, a bidirectional multi-scale neck, detection and class heads.

``forward(x_t, *state) -> (logits_t, detection_t, *state')``: one time step, state explicit.

Backbone: three stride-2 3x3 convs (2 -> c1 -> c2 -> c3 channels), a spiking neuron after
each: scales 1/2, 1/4, 1/8 of the sensor. Neck (BiSNet; after SpikSSD's verified
bidirectional neck, research note 2.2, since the paper's code is not public):

    top-down   P3 = N(L3 s3)          P2 = N(L2 s2 + Up(U3 P3))     P1 = N(L1 s1 + Up(U2 P2))
    bottom-up  Q2 = N(D2 P1 + M2 P2)  Q3 = N(D3 Q2 + M3 P3)

L, U, M are 1x1 convs, D are stride-2 3x3 convs, Up is nearest x2 upsampling applied *after*
the 1x1 conv (same result, a quarter of the synaptic operations). Pre-activations are summed
and then pass a neuron, so every synaptic layer after the first receives binary spikes.
Heads read the neck out with leaky integrators (non-spiking, state explicit). Classification:
a 3x3 conv on the Q3 spikes gives a class-evidence map, its spatial maximum is the step's
logit ("a car somewhere"): the same weights serve every position. Decision and reason: a
linear layer on the flattened Q3 map needs examples of each class at each position; with 192
training recordings it fit the training set and stayed near chance on the test set (0.57 test
vs 0.81 train at 0 Hz/pixel), the evidence map reached 0.77 test / 0.79 train; a spatial
mean (tried earlier) trained to chance, since one small car is diluted by the empty cells.
Detection: a 3x3 conv on Q2 (stride 4) giving, per cell, a centre-heatmap logit and a box
(CenterNet; cell offsets and log size, see ``neuroedge.models.bivision.detection``). Both
convs act on spikes, so they cost SOPs. N is the STATNF neuron or, for the baseline, LIF.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from neuroedge.models.bivision.functional import (
    CENTRE_MASK,
    STATNFParams,
    STATNFState,
    statnf_step,
)
from neuroedge.models.neurons.functional import LIFParams
from neuroedge.models.neurons.module import LICell, LIFCell
from torch import nn

NEURONS = ("statnf", "lif")
DET_CHANNELS = 5  # objectness, dx, dy, log w, log h
NECK_LAYERS = ("s1", "s2", "s3", "p3", "p2", "p1", "q2", "q3")
# Initial synaptic gain over PyTorch's default conv init: with the default, sparse binary input
# leaves every layer below threshold (no spikes, no surrogate gradient, no learning). These
# gains give 5-35 % initial firing on generated data; LIF needs twice STATNF's because its
# Euler step scales the input by dt / tau = 0.5.
INIT_GAIN = {"statnf": 5.0, "lif": 10.0}
# CenterNet's heatmap bias init, logit(0.1): the focal loss starts from a low, stable prior
# instead of p = 0.5 on every one of the (mostly empty) cells.
HEATMAP_PRIOR_LOGIT = -2.19


class STATNFCell(nn.Module):
    """A STATNF population over a (C, H, W) map; ``forward(i, v, s, h) -> (s', v', s', h')``."""

    is_spiking_neuron = True

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.beta = nn.Parameter(torch.zeros(channels))  # lam = 0.5 at start
        self.alpha = nn.Parameter(torch.full((channels,), -2.0))  # a = 0.13 at start
        self.lateral = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        with torch.no_grad():
            self.lateral.weight.mul_(0.3).mul_(CENTRE_MASK)
        self.lateral.weight.register_hook(lambda g: g * CENTRE_MASK.to(g))

    def forward(
        self, i: torch.Tensor, v: torch.Tensor, s: torch.Tensor, h: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        params = STATNFParams(self.beta, self.alpha, self.lateral.weight)
        z, new = statnf_step(i, STATNFState(v, s, h), params, self.lateral(s))
        return z, new.v, new.s, new.h

    state_size = 3


class LIFMapCell(LIFCell):
    """The LIF baseline with the same calling convention as ``STATNFCell`` (state ``(v,)``)."""

    state_size = 1


class BiSNet(nn.Module):
    def __init__(
        self,
        neuron: str = "statnf",
        size: int = 64,
        channels: tuple[int, int, int] = (8, 16, 32),
        fused: int = 16,
        classes: int = 2,
    ) -> None:
        super().__init__()
        if neuron not in NEURONS:
            raise ValueError(f"neuron {neuron!r} is not one of {NEURONS}")
        if size % 8:
            raise ValueError(f"input size {size} must be a multiple of 8 (three stride-2 stages)")
        self.neuron, self.size, self.classes = neuron, size, classes
        c1, c2, c3 = channels
        self.conv1 = nn.Conv2d(2, c1, 3, 2, 1)
        self.conv2 = nn.Conv2d(c1, c2, 3, 2, 1)
        self.conv3 = nn.Conv2d(c2, c3, 3, 2, 1)
        self.lat1, self.lat2, self.lat3 = (nn.Conv2d(c, fused, 1) for c in channels)
        self.up3, self.up2 = nn.Conv2d(fused, fused, 1), nn.Conv2d(fused, fused, 1)
        self.down2, self.down3 = (nn.Conv2d(fused, fused, 3, 2, 1) for _ in range(2))
        self.mix2, self.mix3 = nn.Conv2d(fused, fused, 1), nn.Conv2d(fused, fused, 1)
        widths = (c1, c2, c3, fused, fused, fused, fused, fused)
        self.cells = nn.ModuleList(
            STATNFCell(w) if neuron == "statnf" else LIFMapCell(LIFParams()) for w in widths
        )
        self.cls_map = nn.Conv2d(fused, classes, 3, padding=1)
        self.det = nn.Conv2d(fused, DET_CHANNELS, 3, padding=1)
        self.cls_readout, self.det_readout = LICell(), LICell()
        self.shapes = [
            (w, size // 2**k, size // 2**k) for w, k in zip(widths, (1, 2, 3, 3, 2, 1, 2, 3))
        ]
        with torch.no_grad():
            for conv in (
                self.conv1,
                self.conv2,
                self.conv3,
                self.lat1,
                self.lat2,
                self.lat3,
                self.up3,
                self.up2,
                self.down2,
                self.down3,
                self.mix2,
                self.mix3,
            ):
                conv.weight.mul_(INIT_GAIN[neuron])
            self.det.bias[0] = HEATMAP_PRIOR_LOGIT

    def init_state(
        self, batch: int, device: torch.device | str | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Zero states (CPU unless ``device``: ``forward_sequence`` passes its input's)."""
        per = STATNFCell.state_size if self.neuron == "statnf" else 1
        zeros = partial(torch.zeros, device=device)
        maps = tuple(zeros(batch, *shape) for shape in self.shapes for _ in range(per))
        grid = self.size // 4
        return (*maps, zeros(batch, self.classes), zeros(batch, DET_CHANNELS, grid, grid))

    def state_names(self) -> tuple[str, ...]:
        parts = ("v", "s", "h") if self.neuron == "statnf" else ("v",)
        return (*(f"{p}_{layer}" for layer in NECK_LAYERS for p in parts), "v_cls", "v_det")

    def _fire(
        self, k: int, current: torch.Tensor, state: list[torch.Tensor], out: list[torch.Tensor]
    ) -> torch.Tensor:
        per = STATNFCell.state_size if self.neuron == "statnf" else 1
        z, *new = self.cells[k](current, *state[k * per : (k + 1) * per])
        out.extend(new)
        return z

    def forward(self, x: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        maps, v_cls, v_det = list(state[:-2]), state[-2], state[-1]
        new: list[torch.Tensor] = []
        s1 = self._fire(0, self.conv1(x), maps, new)
        s2 = self._fire(1, self.conv2(s1), maps, new)
        s3 = self._fire(2, self.conv3(s2), maps, new)
        p3 = self._fire(3, self.lat3(s3), maps, new)
        p2 = self._fire(4, self.lat2(s2) + _up(self.up3(p3)), maps, new)
        p1 = self._fire(5, self.lat1(s1) + _up(self.up2(p2)), maps, new)
        q2 = self._fire(6, self.down2(p1) + self.mix2(p2), maps, new)
        q3 = self._fire(7, self.down3(q2) + self.mix3(p3), maps, new)
        logits, v_cls = self.cls_readout(self.cls_map(q3).amax((2, 3)), v_cls)
        detection, v_det = self.det_readout(self.det(q2), v_det)
        return (logits, detection, *new, v_cls, v_det)

    def forward_sequence(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Time-mean class logits and the last step's detection maps of a (T, B, 2, H, W)
        input. Detection reads the last step because boxes are stamped where the window ends
        (Gen1 boxes are instants; objects move ~20 pixels over 100 ms, so a time mean would
        smear them along their path); its leaky readout still integrates the earlier steps."""
        state = self.init_state(xs.shape[1], xs.device)
        logits = 0.0
        for x in xs:
            y, detection, *state = self(x, *state)
            logits = logits + y
        return logits / xs.shape[0], detection


def _up(x: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, scale_factor=2.0, mode="nearest")
