"""Seed sweeps that outgrow one machine: torch.distributed under ``torchrun``.

A bench repeated over seeds (``--config 'seeds=[...]'``) runs its seeds through
``bench.seeds.map_seeds``. Started by ``torchrun``, which sets ``RANK``, ``WORLD_SIZE`` and
``LOCAL_RANK`` in every process (read by ``neuroedge.distributed.world``), each process (a
*rank*) runs every ``WORLD_SIZE``-th seed of the list (round robin, in list order), with its
own ``workers`` local processes; the results are gathered over a gloo process group
(``all_gather_object``: pickled Python objects, so CPU-only, no tensors on a device) and every
rank ends with all of them. Only rank 0 writes the report and the history row (``neuroedge
bench`` sends the other ranks' copies to a temporary folder), so the report is the one a
single-process run of the same seeds writes.

    torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d \\
        --rdzv-endpoint HOST:29400 -m neuroedge.cli bench snn.unisparse --out DIR \\
        --config 'seeds=[0,1,2,3,4,5,6,7,8,9]'

Choices the torch documentation leaves to the caller:

* gloo, not NCCL: the sweep exchanges only finished results, once, and gloo runs on every
  machine; training inside a seed is the bench's own.
* The process group's timeout is the longest one rank may wait for the slowest at the
  gather (``NEUROEDGE_DIST_TIMEOUT_S``, default 24 h; torch's own default of 30 min would end
  a sweep whose seeds take longer than that).
* Every rank checks that all ranks were given the same seed list before any work, so a rank
  started with another config cannot silently add or drop seeds.
* A seed that fails on one rank is reported on every rank, naming the seed, the rank and the
  error, instead of leaving the other ranks waiting at the gather until the timeout.
* Rows a bench measures once, outside its seed loop (a throughput or deployment row), are
  measured on every rank; rank 0's are reported. Ranks sharing a machine share its cores, so
  time such rows with one process per machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from neuroedge.distributed import DistributedError, World


def ensure_group(w: World) -> None:
    """Join the gloo process group of the launch (once per process; nothing for one process)."""
    from neuroedge.distributed import join_group

    if w.active:
        join_group(w, "gloo")


def shard(keys: Sequence[Any], w: World) -> list[Any]:
    """The keys rank ``w.rank`` runs: every ``w.size``-th, starting at its rank."""
    return list(keys[w.rank :: w.size])


def all_gather(obj: Any, w: World) -> list[Any]:
    """``obj`` of every rank, in rank order (a picklable object)."""
    import torch.distributed as dist

    ensure_group(w)
    out: list[Any] = [None] * w.size
    dist.all_gather_object(out, obj)
    return out


def map_sharded(
    run_local: Callable[[dict[Any, Any]], Mapping[Any, Any]],
    jobs: Mapping[Any, Any],
    w: World,
) -> dict[Any, Any]:
    """``run_local`` over this rank's share of ``jobs`` (``shard`` of its keys), the results of
    every rank merged, in the order of ``jobs``; the same dict on every rank. A process group
    this call joined is left on return (one left to the end of the interpreter can abort the
    process as it exits: gloo's "terminate called without an active exception")."""
    import torch.distributed as dist

    joined = not dist.is_initialized()
    try:
        return _map_sharded(run_local, jobs, w)
    finally:
        if joined and dist.is_initialized():
            dist.destroy_process_group()


def _map_sharded(
    run_local: Callable[[dict[Any, Any]], Mapping[Any, Any]],
    jobs: Mapping[Any, Any],
    w: World,
) -> dict[Any, Any]:
    keys = list(jobs)
    lists = all_gather([repr(k) for k in keys], w)
    if any(other != lists[0] for other in lists):
        raise DistributedError(
            "the ranks were given different seeds: "
            + "; ".join(f"rank {r}: [{', '.join(ks)}]" for r, ks in enumerate(lists))
        )
    mine = {k: jobs[k] for k in shard(keys, w)}
    error, local = None, {}
    try:
        local = dict(run_local(mine))
    except Exception as err:  # reported on every rank below, then raised here from it
        error = (f"{type(err).__name__}: {err}", list(mine))  # its traceback: on that rank
        failure: Exception | None = err
    else:
        failure = None
    parts = all_gather((local, error), w)
    failed = [(r, e) for r, (_, e) in enumerate(parts) if e is not None]
    if failed:
        text = "; ".join(
            f"rank {r} (seeds {', '.join(map(repr, ks))}) failed: {msg}" for r, (msg, ks) in failed
        )
        raise DistributedError(text) from failure
    merged: dict[Any, Any] = {}
    for part, _ in parts:
        merged.update(part)
    missing = [k for k in keys if k not in merged]
    if missing:
        raise DistributedError(f"no rank returned a result for {missing!r}")
    return {k: merged[k] for k in keys}
