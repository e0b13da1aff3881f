"""Random mini-ResNets that fire, shared by the unisparse tests (not a test module).

``setup.cfg`` puts ``tests/`` on the path (``pythonpath``): pytest runs in importlib mode, so
the test modules import this one by name.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from neuroedge.models.unisparse.module import MINI, SpikingResNet


def random_net(
    seed: int = 0,
    beta: tuple[float, float] = (0.3, 1.2),
    keep: float | Callable[[int], float] | None = 0.5,
) -> SpikingResNet:
    """A mini-ResNet in eval mode with nontrivial BN statistics and affine parameters on every
    BN feeding a threshold (the projection shortcuts' too), beta drawn from ``beta`` so that it
    fires; with ``keep`` (a keep probability, or one per masked layer's index) random fixed
    masks, else none."""
    gen = torch.Generator().manual_seed(seed)
    net = SpikingResNet(MINI)
    with torch.no_grad():
        for bn in net.threshold_bns():
            bn.running_mean.uniform_(-0.2, 0.2, generator=gen)
            bn.running_var.uniform_(0.5, 2.0, generator=gen)
            bn.gamma_raw.normal_(0.5, 0.3, generator=gen)
            bn.beta.uniform_(*beta, generator=gen)
        if keep is not None:
            for i, layer in enumerate(net.masked_layers().values()):
                p = keep(i) if callable(keep) else keep
                layer.mask_fixed.copy_(
                    (torch.rand(layer.mask_fixed.shape, generator=gen) < p).float()
                )
                layer.set_mode("fixed")
    return net.eval()
