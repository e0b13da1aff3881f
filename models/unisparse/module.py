"""Spiking ResNets for UniSparse: the trainable form and the folded (deployed) form.

``SpikingResNet`` (training): conv (weights gated by a mask) -> BN with ``gamma = softplus(.)``
-> LIF, membrane-shortcut residual blocks, a masked linear readout on the flattened spikes.
``FoldedResNet`` (deployment): BN folded into the conv weights and bias, masks applied as
zeros, LIF threshold 1: plain ``nn.Conv2d``/``nn.Linear`` so ONNX, NIR and the SOP counter see
ordinary layers. Both step through ``functional.resnet_step`` with explicit membranes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from neuroedge.models.neurons.functional import LIFParams
from neuroedge.models.neurons.module import LIFCell
from neuroedge.models.unisparse.functional import (
    SOFTPLUS_ONE,
    bn_affine,
    effective_threshold,
    firing_probability,
    mask_gate,
    positive_gamma,
    resnet_step,
)
from torch import nn

MASK_MODES = ("dense", "soft", "ste", "fixed")
MASK_INIT = 0.25  # initial mask logit: gate sigmoid(4 * 0.25) = 0.73, near the 0 decision
THETA = 1.0  # LIF threshold in the BN frame
LIF = LIFParams(tau_mem=2e-3, v_th=THETA, dt=1e-3, reset="zero", alpha=10.0)  # tau = 2 steps


@dataclass(frozen=True)
class ArchConfig:
    """Topology of a spiking ResNet for square images."""

    name: str
    in_channels: int  # image channels
    image: int  # input height = width, pixels
    classes: int
    stem_channels: int
    stages: tuple[tuple[int, int, int], ...]  # (channels, blocks, stride) per stage

    def __post_init__(self) -> None:
        if self.image < 1 or self.in_channels < 1 or self.classes < 2:
            raise ValueError(f"arch {self.name!r}: bad image/channels/classes {self}")
        for channels, blocks, stride in self.stages:
            if channels < 1 or blocks < 1 or stride not in (1, 2):
                raise ValueError(f"arch {self.name!r}: bad stage {(channels, blocks, stride)}")

    def block_plan(self) -> list[tuple[int, int, int]]:
        """``(in_channels, out_channels, stride)`` of every residual block in order."""
        plan, c_in = [], self.stem_channels
        for channels, blocks, stride in self.stages:
            for i in range(blocks):
                plan.append((c_in, channels, stride if i == 0 else 1))
                c_in = channels
        return plan

    def neuron_shapes(self) -> list[tuple[int, int, int]]:
        """``(C, H, W)`` of every LIF layer: stem, then (lif1, lif2) per block."""
        size = self.image
        shapes = [(self.stem_channels, size, size)]
        for _, c_out, stride in self.block_plan():
            size = (size - 1) // stride + 1
            shapes += [(c_out, size, size), (c_out, size, size)]
        return shapes

    def features(self) -> int:
        c, h, w = self.neuron_shapes()[-1]
        return c * h * w


MINI = ArchConfig("mini", 1, 8, 10, 16, ((16, 1, 1), (32, 1, 2), (64, 1, 2)))
RESNET18 = ArchConfig(
    "resnet18", 3, 32, 10, 64, ((64, 2, 1), (128, 2, 2), (256, 2, 2), (512, 2, 2))
)
ARCHS = {"mini": MINI, "resnet18": RESNET18}


class PositiveBatchNorm2d(nn.Module):
    """BatchNorm2d whose scale is ``gamma = softplus(gamma_raw) > 0``."""

    def __init__(self, channels: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.gamma_raw = nn.Parameter(torch.full((channels,), SOFTPLUS_ONE))
        self.beta = nn.Parameter(torch.zeros(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    @property
    def gamma(self) -> torch.Tensor:
        return positive_gamma(self.gamma_raw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(
            x,
            self.running_mean,
            self.running_var,
            self.gamma,
            self.beta,
            self.training,
            self.momentum,
            self.eps,
        )

    def firing_probability(self) -> torch.Tensor:
        return firing_probability(self.gamma, self.beta, THETA)

    def effective_threshold(self) -> torch.Tensor:
        return effective_threshold(THETA, self.gamma, self.running_var, self.eps)


class _Masked(nn.Module):
    """Shared mask state: learnable logits, a fixed binary mask, a mode and a temperature."""

    mask_logits: nn.Parameter
    mask_fixed: torch.Tensor

    def _init_mask(self, shape: torch.Size) -> None:
        # a uniform gate sigmoid(T m0) < 1 at the start is absorbed by the following BN
        self.mask_logits = nn.Parameter(torch.full(shape, MASK_INIT))
        self.register_buffer("mask_fixed", torch.ones(shape))
        self.mode, self.temperature = "dense", 1.0

    def gate(self) -> torch.Tensor:
        if self.mode == "dense":
            return torch.ones_like(self.mask_fixed)
        if self.mode in ("soft", "ste"):
            return mask_gate(
                self.mask_logits, self.temperature, hard=False, straight_through=self.mode == "ste"
            )
        return self.mask_fixed

    def set_mode(self, mode: str, temperature: float = 1.0) -> None:
        if mode not in MASK_MODES:
            raise ValueError(f"mask mode {mode!r} is not one of {MASK_MODES}")
        self.mode, self.temperature = mode, float(temperature)

    def freeze_learned(self) -> None:
        """Binarise the learned logits into the fixed mask (``1[m > 0]``)."""
        self.mask_fixed.copy_(mask_gate(self.mask_logits.detach(), 1.0, hard=True))
        self.mode = "fixed"


class SparseConvBN(_Masked):
    """Masked conv (no bias) followed by ``PositiveBatchNorm2d``."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False)
        self.bn = PositiveBatchNorm2d(c_out)
        self._init_mask(self.conv.weight.shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.conv.weight * self.gate()
        return self.bn(F.conv2d(x, w, None, self.conv.stride, self.conv.padding))


class SparseLinear(_Masked):
    """Masked linear readout (with bias)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.linear = nn.Linear(n_in, n_out)
        self._init_mask(self.linear.weight.shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.linear.weight * self.gate(), self.linear.bias)


class _Block(nn.Module):
    def __init__(self, conv1: nn.Module, conv2: nn.Module, shortcut: nn.Module) -> None:
        super().__init__()
        self.conv1, self.lif1 = conv1, LIFCell(LIF)
        self.conv2, self.lif2 = conv2, LIFCell(LIF)
        self.shortcut = shortcut


class _Stepping(nn.Module):
    """Explicit-state step shared by both forms: ``(x, v...) -> (logits, spikes, v'...)``."""

    arch: ArchConfig

    def forward(self, x: torch.Tensor, *states: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits, spikes, membranes = resnet_step(self, x, states)
        return (logits, torch.cat([z.flatten(1) for z in spikes], 1), *membranes)

    def init_state(
        self, batch: int, device: torch.device | str | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Zero membranes of every LIF layer, on ``device`` (default: the CPU)."""
        return tuple(
            torch.zeros(batch, *shape, device=device) for shape in self.arch.neuron_shapes()
        )

    def forward_sequence(self, xs: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Time-averaged logits for ``(T, batch, C, H, W)`` and each LIF layer's spikes summed
        over time and batch (``(C, H, W)`` maps, for the energy estimate)."""
        states = self.init_state(xs.shape[1], xs.device)  # where the net and input live
        total, maps = 0.0, None
        for x in xs:
            logits, spikes, states = resnet_step(self, x, states)
            total = total + logits
            sums = [z.sum(0) for z in spikes]
            maps = sums if maps is None else [m + s for m, s in zip(maps, sums)]
        return total / xs.shape[0], maps


class SpikingResNet(_Stepping):
    """The trainable spiking ResNet (conv -> BN -> LIF, membrane shortcuts, masks)."""

    def __init__(self, arch: ArchConfig = MINI) -> None:
        super().__init__()
        self.arch = arch
        self.stem = SparseConvBN(arch.in_channels, arch.stem_channels, 3)
        self.stem_lif = LIFCell(LIF)
        blocks = []
        for c_in, c_out, stride in arch.block_plan():
            shortcut = (
                nn.Identity()
                if c_in == c_out and stride == 1
                else SparseConvBN(c_in, c_out, 1, stride)
            )
            blocks.append(
                _Block(
                    SparseConvBN(c_in, c_out, 3, stride), SparseConvBN(c_out, c_out, 3), shortcut
                )
            )
        self.blocks = nn.ModuleList(blocks)
        self.fc = SparseLinear(arch.features(), arch.classes)

    def masked_layers(self) -> dict[str, _Masked]:
        """Every budgeted synaptic layer (all but the analog stem), by name."""
        return {n: m for n, m in self.named_modules() if isinstance(m, _Masked) and n != "stem"}

    def spike_bns(self) -> list[PositiveBatchNorm2d]:
        """The BN whose affine parameters set each LIF layer's threshold, in LIF order."""
        bns = [self.stem.bn]
        for block in self.blocks:
            bns += [block.conv1.bn, block.conv2.bn]
        return bns

    def threshold_bns(self) -> list[PositiveBatchNorm2d]:
        """Every BN whose affine parameters set a LIF layer's threshold or bias current: the
        ``spike_bns`` and each projection shortcut's BN, whose output is summed into the
        block's output neuron with conv2's (its beta adds to that neuron's bias current, its
        gamma scales its share of the input). Left out of the energy route, the task loss
        raised the shortcut's beta as the constraint lowered conv2's (seed 0: +0.128 against
        -0.026 in block 1), undoing part of the threshold constraint."""
        return self.spike_bns() + [
            block.shortcut.bn for block in self.blocks if isinstance(block.shortcut, SparseConvBN)
        ]

    def consumers(self) -> list[tuple[int, _Masked]]:
        """``(index of the LIF layer feeding it, layer)`` for every budgeted synaptic layer."""
        out: list[tuple[int, _Masked]] = []
        for i, block in enumerate(self.blocks):
            out.append((2 * i, block.conv1))
            if isinstance(block.shortcut, SparseConvBN):
                out.append((2 * i, block.shortcut))
            out.append((2 * i + 1, block.conv2))
        out.append((2 * len(self.blocks), self.fc))
        return out


class FoldedResNet(_Stepping):
    """BN folded into conv weight and bias, masks applied: the deployed network."""

    def __init__(self, arch: ArchConfig) -> None:
        super().__init__()
        self.arch = arch
        self.stem = nn.Conv2d(arch.in_channels, arch.stem_channels, 3, 1, 1)
        self.stem_lif = LIFCell(LIF)
        blocks = []
        for c_in, c_out, stride in arch.block_plan():
            shortcut = (
                nn.Identity()
                if c_in == c_out and stride == 1
                else nn.Conv2d(c_in, c_out, 1, stride, 0)
            )
            blocks.append(
                _Block(
                    nn.Conv2d(c_in, c_out, 3, stride, 1), nn.Conv2d(c_out, c_out, 3, 1, 1), shortcut
                )
            )
        self.blocks = nn.ModuleList(blocks)
        self.fc = nn.Linear(arch.features(), arch.classes)


def _fold_conv(src: SparseConvBN, dst: nn.Conv2d) -> None:
    bn = src.bn
    a, b = bn_affine(bn.gamma, bn.beta, bn.running_mean, bn.running_var, bn.eps)
    dst.weight.copy_(src.conv.weight * src.gate() * a.view(-1, 1, 1, 1))
    dst.bias.copy_(b)


@torch.no_grad()
def fold(net: SpikingResNet) -> FoldedResNet:
    """The deployed network: ``W' = a * (W * mask)``, ``bias = beta - a * mu`` (exact in eval)."""
    folded = FoldedResNet(net.arch)
    _fold_conv(net.stem, folded.stem)
    for src, dst in zip(net.blocks, folded.blocks):
        _fold_conv(src.conv1, dst.conv1)
        _fold_conv(src.conv2, dst.conv2)
        if isinstance(src.shortcut, SparseConvBN):
            _fold_conv(src.shortcut, dst.shortcut)
    folded.fc.weight.copy_(net.fc.linear.weight * net.fc.gate())
    folded.fc.bias.copy_(net.fc.linear.bias)
    return folded.requires_grad_(False).eval()
