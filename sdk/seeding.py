"""Seeded weight initialisation that leaves the caller's random state alone, and torch on one
thread for tiny nets (repeatable rounding, no contention on a shared 2-core machine)."""

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


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread inside, the caller's count restored on exit: for tiny nets
    extra threads only contend on a shared 2-core machine, and one thread rounds the same way
    every run."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
