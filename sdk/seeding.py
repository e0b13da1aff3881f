"""Seeded weight initialisation that leaves the caller's random state alone."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Inside, torch's CPU generator starts from ``seed``; on exit it is back where the caller
    had it, so building a model twice gives the same weights and never reseeds user code."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield
