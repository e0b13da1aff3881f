"""Runs over several processes or machines started by ``torchrun`` (torch.distributed): the
launch as the environment describes it, and data-parallel training.

``world()`` reads ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``, which torchrun sets in every
process. Two uses build on it: seed sweeps (``neuroedge.bench.distributed``: each rank runs
its share of the seeds) and data-parallel training (``DataParallel`` here: each rank runs its
share of every batch of one training).

**Data-parallel training** (``with data_parallel(world(), device):``; the CIFAR-10 recipe of
snn.unisparse enters it when started by torchrun). Inside, every ``unisparse`` training phase
(``loop.fit_phase``):

* starts from rank 0's parameters and buffers (broadcast);
* gives each rank every ``size``-th sample of each global batch (the same shuffled order and
  augmentation draws on every rank, so the global batch is the one-process batch; a last batch
  with fewer samples than ranks is skipped on all of them);
* averages the gradients over the ranks after the backward pass *and* after the threshold
  gradients of the energy constraint are added (those come from a second ``autograd.grad``,
  outside ``backward``: this is why the loop averages gradients itself rather than wrapping
  the net in ``DistributedDataParallel``, whose hooks fire only inside ``backward``, and only
  around ``forward``, while the net runs ``forward_sequence``);
* takes the batch energy that drives the dual step as the mean over the ranks, so the
  multiplier is the same number on every rank;
* averages the BN running statistics at the end of each epoch (each rank normalised its own
  share, as DDP without SyncBatchNorm does; SyncBatchNorm needs CUDA);
* checks at the end of each phase that every rank holds the same parameters, up to rounding
  (per-tensor sums within 1e-5; ``DistributedError`` naming the ranks if not).

NCCL on CUDA devices (``cuda:LOCAL_RANK``), gloo on CPU. The averaged gradient equals the
one-process gradient of the global batch up to batch-norm statistics, which are per rank.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuroedge.errors import NeuroedgeError

TIMEOUT_ENV = "NEUROEDGE_DIST_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 24 * 3600
_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


class DistributedError(NeuroedgeError):
    """A distributed run that cannot go on: bad launch variables, ranks that disagree on their
    seeds or their parameters, or a seed that failed on some rank."""


@dataclass(frozen=True)
class World:
    """This process's place in the launch: ``rank`` of ``size`` (``local_rank`` on its node)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def active(self) -> bool:
        """True when more than one process shares the work."""
        return self.size > 1

    @property
    def lead(self) -> bool:
        """True on rank 0, the one that writes reports and shows progress."""
        return self.rank == 0


def _env_int(env: Mapping[str, str], name: str) -> int:
    raw = env[name]
    try:
        value = int(raw)
    except ValueError:
        raise DistributedError(f"{name}={raw!r} is not an integer (set by torchrun)") from None
    if value < 0:
        raise DistributedError(f"{name}={value} is negative")
    return value


def world(env: Mapping[str, str] | None = None) -> World:
    """The launch as ``torchrun`` describes it in the environment; ``World()`` (one process)
    when none of ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` is set. Some but not all of them, or
    a rank outside ``[0, WORLD_SIZE)``, is a ``DistributedError`` naming the variable."""
    env = os.environ if env is None else env
    present = [k for k in _ENV if k in env]
    if not present:
        return World()
    if len(present) != len(_ENV):
        missing = [k for k in _ENV if k not in env]
        raise DistributedError(
            f"{', '.join(present)} set but {', '.join(missing)} not: start distributed "
            "runs with torchrun, which sets all three"
        )
    rank, size, local = (_env_int(env, k) for k in _ENV)
    if size < 1:
        raise DistributedError(f"WORLD_SIZE={size}: needs at least one process")
    if rank >= size:
        raise DistributedError(f"RANK={rank} is outside [0, WORLD_SIZE={size})")
    return World(rank, size, local)


def timeout_s(env: Mapping[str, str] | None = None) -> float:
    """The gather timeout in seconds (``NEUROEDGE_DIST_TIMEOUT_S``, a positive number)."""
    env = os.environ if env is None else env
    raw = env.get(TIMEOUT_ENV)
    if raw is None:
        return float(DEFAULT_TIMEOUT_S)
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise DistributedError(f"{TIMEOUT_ENV}={raw!r}: expected a positive number of seconds")
    return value


def local_device(device: str, w: World) -> str:
    """``device`` for this process: plain ``cuda`` becomes ``cuda:LOCAL_RANK`` in a launch of
    several processes (one GPU each, as torchrun's ``--nproc-per-node`` counts them)."""
    return f"cuda:{w.local_rank}" if w.active and device == "cuda" else device


def join_group(w: World, backend: str) -> None:
    """Join the launch's process group (``backend`` gloo or nccl) once per process."""
    import torch.distributed as dist

    if dist.is_initialized():
        if dist.get_backend() != backend:
            raise DistributedError(
                f"this process already joined a {dist.get_backend()} group; {backend} asked"
            )
        return
    dist.init_process_group(
        backend,
        rank=w.rank,
        world_size=w.size,
        timeout=datetime.timedelta(seconds=timeout_s()),
    )


class DataParallel:
    """One training shared by every rank of the launch (see the module docstring)."""

    def __init__(self, w: World, device: str) -> None:
        self.world, self.device = w, str(device)
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.set_device(self.device)  # NCCL's buffers on this process's GPU
        join_group(w, "nccl" if self.device.startswith("cuda") else "gloo")

    def shard(self, idx: np.ndarray) -> np.ndarray:
        """This rank's samples of the global batch ``idx``."""
        return idx[self.world.rank :: self.world.size]

    def skips(self, idx: np.ndarray) -> bool:
        """True for a global batch too small to give every rank a sample."""
        return len(idx) < self.world.size

    def mean(self, value: float) -> float:
        """``value`` averaged over the ranks (float64)."""
        import torch
        import torch.distributed as dist

        t = torch.tensor([float(value)], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return float(t.item()) / self.world.size

    def _all_reduce_mean(self, tensors: list[Any]) -> None:
        import torch
        import torch.distributed as dist

        if not tensors:
            return
        flat = torch.cat([t.reshape(-1).double() for t in tensors])
        dist.all_reduce(flat)
        flat /= self.world.size
        offset = 0
        for t in tensors:
            t.copy_(flat[offset : offset + t.numel()].view_as(t))
            offset += t.numel()

    def average_gradients(self, params: Iterable[Any]) -> None:
        """Every gradient replaced by its mean over the ranks (one flat all-reduce)."""
        self._all_reduce_mean([p.grad for p in params if p.grad is not None])

    def average_buffers(self, module: Any) -> None:
        """Floating-point buffers (BN running statistics) replaced by their mean."""
        self._all_reduce_mean([b for b in module.buffers() if b.is_floating_point()])

    def broadcast(self, module: Any) -> None:
        """Rank 0's parameters and buffers on every rank."""
        import torch
        import torch.distributed as dist

        with torch.no_grad():
            for t in (*module.parameters(), *module.buffers()):
                dist.broadcast(t.data, src=0)

    def check_agreement(self, module: Any, label: str) -> None:
        """``DistributedError`` naming the ranks whose parameters differ from rank 0's."""
        import torch
        import torch.distributed as dist

        with torch.no_grad():
            sums = torch.stack([p.double().sum() for p in module.parameters()])
            gathered = [torch.zeros_like(sums) for _ in range(self.world.size)]
            dist.all_gather(gathered, sums)
        # a tolerance for ranks on different hardware; a step that ran differently moves
        # the sums by far more than rounding does
        off = [
            r
            for r, g in enumerate(gathered)
            if not torch.allclose(g, gathered[0], rtol=1e-5, atol=1e-6)
        ]
        if off:
            raise DistributedError(
                f"after {label}, ranks {off} hold other parameters than rank 0 "
                "(a data-parallel step ran differently on them)"
            )


_CURRENT: contextvars.ContextVar[DataParallel | None] = contextvars.ContextVar(
    "neuroedge_data_parallel", default=None
)


def current() -> DataParallel | None:
    """The data-parallel training this code runs in, if any (``data_parallel``)."""
    return _CURRENT.get()


@contextlib.contextmanager
def data_parallel(w: World, device: str) -> Iterator[DataParallel | None]:
    """Inside, training loops that look at ``current()`` share their batches over the launch's
    ranks; one process (``w.size == 1``): nothing changes, and None is yielded."""
    if not w.active:
        yield None
        return
    import torch.distributed as dist

    joined = not dist.is_initialized()
    dp = DataParallel(w, device)
    token = _CURRENT.set(dp)
    try:
        yield dp
    finally:
        _CURRENT.reset(token)
        if joined:  # leave the group this training joined
            dist.destroy_process_group()


def lead_value(value: float) -> float:
    """Inside ``data_parallel``, rank 0's ``value`` on every rank; else ``value``."""
    dp = current()
    if dp is None:
        return value
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(value)], dtype=torch.float64, device=dp.device)
    dist.broadcast(t, src=0)
    return float(t.item())
