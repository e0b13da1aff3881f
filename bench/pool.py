"""The worker processes of ``bench.seeds.map_local``: spawned, each handed the next config
when idle, watched so that one that dies (SIGKILL from the out-of-memory killer, a crash)
raises WorkerDied at once instead of leaving the run waiting for its result, and all ended
with the run (SIGTERM, then SIGKILL ``STOP_GRACE_S`` later), however it ends.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from neuroedge.signals import sigint_blocked, signals_blocked, sigterm_exits

STOP_GRACE_S = 5.0  # how long a worker has to unwind after SIGTERM before it gets SIGKILL


class WorkerDied(ChildProcessError):
    """A worker process of ``map_pool`` that ended without sending its result (killed, as the
    kernel's out-of-memory killer does with SIGKILL, or crashed): the message names the
    process, how it ended, what it ran and what is not finished."""


class _Worker:
    """A spawned worker process running ``_work`` and the parent's end of its pipe."""

    def __init__(self, ctx: Any, fn: Callable[[Any], Any]) -> None:
        self.conn, self._theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_work, args=(self._theirs, fn))

    def start(self) -> None:
        """Start it with Ctrl-C blocked (the mask carries over: it is the parent's to handle,
        which ends the workers); a Ctrl-C meanwhile is raised here once it has started. The
        resource tracker is started first: starting it unblocks Ctrl-C, so a worker started
        with it was born without the mask (``sigint_blocked``: a no-op without signal masks,
        on Windows)."""
        try:
            with sigint_blocked():
                self.proc.start()
        finally:
            self._theirs.close()

    def send(self, cfg: Any) -> bool:
        """Hand it ``cfg``; False when it is gone."""
        try:
            self.conn.send(cfg)
        except ConnectionError:  # broken pipe, reset: it is gone
            return False
        return True

    def died(self, desc: str, doing: str, left: str) -> WorkerDied:
        """The error naming this dead worker (in ``desc``, ``doing`` what) and what is ``left``."""
        self.proc.join(5)  # the pipe can close a moment before the exit status is there
        code = self.proc.exitcode
        if code is None:
            how = "closed its pipe without sending a result"
        elif code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else -code
            how = f"was killed by signal {name}"
            if -code == getattr(signal, "SIGKILL", None):  # none on Windows
                how += " (as the kernel's out-of-memory killer does: fewer workers use less memory)"
        else:
            how = f"exited with code {code} without sending a result"
        return WorkerDied(f"{desc}: a worker process (pid {self.proc.pid}) {doing} {how}; {left}")


def map_pool(
    fn: Callable[[Any], Any],
    cfgs: Mapping[Any, Any],
    n: int,
    bar: Any,
    desc: str,
    noun: str = "seed",
) -> dict[Any, Any]:
    """``seeds.map_local`` over ``n`` spawned workers (``desc`` and ``noun``: how an error names
    the run and a key, e.g. ``"safety.hair_trigger seeds"`` and ``"seed"``). Every worker is
    ended on the way out, however the call ends (all done, an error, a dead worker, Ctrl-C,
    SIGTERM): SIGTERM, then SIGKILL ``STOP_GRACE_S`` later."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    pool: list[_Worker] = []
    with sigterm_exits():  # SIGTERM unwinds to the ``finally``, so the workers are ended
        try:
            for _ in range(n):
                pool.append(_Worker(ctx, fn))
                pool[-1].start()
            return _run(pool, cfgs, bar, desc, noun)
        finally:
            _stop(pool)


def _run(
    pool: list[_Worker], cfgs: Mapping[Any, Any], bar: Any, desc: str, noun: str
) -> dict[Any, Any]:
    """Each idle worker handed the next config in order, until every key has its result; the
    error of a failed ``fn`` raised here, and WorkerDied as soon as a worker dies."""
    from multiprocessing.connection import wait

    todo, done = list(cfgs), {}
    idle = list(pool)
    busy: dict[_Worker, Any] = {}  # worker: the key it runs

    def died(worker: _Worker) -> WorkerDied:
        doing = f"running {noun} {busy[worker]!r}" if worker in busy else "waiting for work"
        left = f"{noun}s not finished: {[k for k in cfgs if k not in done]}"
        return worker.died(desc, doing, left)

    while len(done) < len(cfgs):
        while todo and idle:
            worker, key = idle.pop(0), todo.pop(0)
            busy[worker] = key
            if not worker.send(cfgs[key]):
                raise died(worker)
        wait([w.conn for w in busy] + [w.proc.sentinel for w in pool])
        for worker in pool:
            if worker in busy and worker.conn.poll():
                try:
                    result = worker.conn.recv()
                except (EOFError, ConnectionError):  # it died without a result
                    raise died(worker) from None
                except Exception as err:  # the bytes came; rebuilding them ran their code
                    raise TypeError(
                        f"{desc}: the result of {noun} {busy[worker]!r} cannot be rebuilt "
                        f"here: {type(err).__name__}: {err}"
                    ) from err
                done[busy.pop(worker)] = _result(result)
                idle.append(worker)
                bar.update()
            elif not worker.proc.is_alive():
                raise died(worker)
    return {key: done[key] for key in cfgs}


def _result(message: tuple[bool, Any, str]) -> Any:
    """A worker's result, or its ``fn``'s error raised with the worker's traceback as cause."""
    from multiprocessing.pool import RemoteTraceback

    ok, value, trace = message
    if not ok:
        raise value from RemoteTraceback(trace)
    return value


def _stop(pool: Sequence[_Worker]) -> None:
    """End the workers: SIGTERM (a busy one unwinds, removing its temp files), then SIGKILL
    whatever still runs ``STOP_GRACE_S`` later; Ctrl-C and SIGTERM wait until they are gone."""
    import time

    with signals_blocked(signal.SIGINT, signal.SIGTERM):
        started = [w for w in pool if w.proc.pid is not None]
        for worker in started:
            worker.proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for worker in started:
            worker.proc.join(max(0.0, deadline - time.monotonic()))
            if worker.proc.exitcode is None:
                worker.proc.kill()
                worker.proc.join()
        for worker in pool:
            worker.conn.close()


def _work(conn: Any, fn: Callable[[Any], Any]) -> None:
    """A worker's loop: ``fn`` on each config received, sending back ``(True, result, "")`` or
    ``(False, error, traceback)``, or ``(False, TypeError, "")`` naming why a result cannot be
    pickled. Ctrl-C is the parent's (it ends the workers: no traceback from each); SIGTERM
    unwinds as in the parent; a parent gone (its pipe closed) ends it."""
    import traceback
    from multiprocessing.reduction import ForkingPickler

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # born with it blocked (``_Worker.start``)
    with sigterm_exits():
        while True:
            try:
                cfg = conn.recv()
            except EOFError:
                return
            try:
                message = (True, fn(cfg), "")
            except Exception as err:  # not swallowed: the parent raises it
                message = (False, _sendable(err), traceback.format_exc())
            try:  # pickled here (as ``conn.send`` does), so only pickling errors are caught
                data = ForkingPickler.dumps(message)
            except Exception as err:  # any, as the result's own ``__reduce__`` raises
                why = f"{type(err).__name__}: {err}"
                cant = TypeError(f"the result of {fn!r} cannot be sent to the parent: {why}")
                data = ForkingPickler.dumps((False, cant, ""))
            conn.send_bytes(data)


def _sendable(err: Exception) -> Exception:
    """``err`` if it survives pickling both ways, else a RuntimeError with its type and text
    (an exception whose ``__init__`` takes other arguments than its message does not, nor one
    holding an unpicklable value or whose ``__reduce__`` raises)."""
    import pickle

    try:
        pickle.loads(pickle.dumps(err))
    except Exception:  # any: pickling runs the exception's own code
        return RuntimeError(f"{type(err).__name__}: {err}")
    return err
