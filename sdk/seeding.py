"""Seeded weight initialisation that leaves the caller's random state alone, and torch on one
thread for tiny nets (repeatable rounding, no contention on a shared 2-core machine).

Both change process-wide torch state (the CPU generator, the intra-op thread count), so each
holds one lock for its whole body: two threads building models at once would otherwise draw
from one generator in turn and get each other's weights, or restore each other's count. The
lock binds neuroedge's threads only: an application thread drawing from torch's default
generator during a build shares it (both streams change); such threads should draw from their
own ``torch.Generator`` (README, "Using it").
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

# one re-entrant lock for both: a build nests them (one_thread around seeded, or the reverse)
# and two locks taken in different orders by two threads would deadlock
_TORCH_GLOBALS = threading.RLock()


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Inside, torch's CPU generator (and every CUDA device's) starts from ``seed``; on exit
    the CPU generator, and each CUDA device's where CUDA was already in use, is back where the
    caller had it, so building a model twice gives the same weights and never reseeds user
    code. (Where CUDA is not yet initialised, torch queues the CUDA seed for its start, as
    ``torch.manual_seed`` does.) Another thread's ``seeded`` or ``one_thread`` waits until
    this one exits."""
    import torch

    with _TORCH_GLOBALS, torch.random.fork_rng(devices=_cuda_in_use(torch)):
        torch.manual_seed(int(seed))
        yield


def _cuda_in_use(torch: Any) -> list[int]:
    """The CUDA devices whose generators to save and restore: all of them once CUDA is
    initialised (reading their state before would start CUDA on a machine that never uses it)."""
    if not torch.cuda.is_initialized():
        return []
    return list(range(torch.cuda.device_count()))


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch on ``count`` intra-op threads inside (a training's or a bench's ``threads``), the
    caller's count restored on exit. Another thread's ``seeded``, ``one_thread`` or
    ``torch_threads`` waits until this one exits."""
    import torch

    with _TORCH_GLOBALS:
        before = torch.get_num_threads()
        torch.set_num_threads(int(count))
        try:
            yield
        finally:
            torch.set_num_threads(before)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread inside, the caller's count restored on exit: for tiny nets
    extra threads only contend on a shared 2-core machine, and one thread rounds the same way
    every run. Another thread's ``seeded`` or ``one_thread`` waits until this one exits."""
    with torch_threads(1):
        yield
