"""Stop signals as exceptions, so ``with`` and ``finally`` blocks unwind on the way out.

SIGTERM (what ``timeout``, ``kill`` and batch schedulers send) kills a process on the spot by
default: an ``atomic_path`` temp file (``.NAME.*.part``) stays behind and a seed pool's workers
go on computing on their own. Inside ``sigterm_exits`` it raises ``Terminated`` instead, as
Ctrl-C raises KeyboardInterrupt, and the process exits with 143 (128 + SIGTERM) as a shell
reports a tool stopped by it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

EXIT_TERMINATED = 128 + signal.SIGTERM  # 143


class Terminated(SystemExit):
    """SIGTERM received inside ``sigterm_exits``: a SystemExit with status 143."""


_received = False  # a SIGTERM was turned into Terminated (stays set: the process is ending)


_interrupted = False  # a Ctrl-C (SIGINT) raised KeyboardInterrupt inside ``sigterm_exits``
_depth = 0  # sigterm_exits blocks open in the main thread


def _raise_terminated(signum: int, frame: Any) -> None:
    global _received
    _received = True
    raise Terminated(128 + signum)


def _raise_interrupted(signum: int, frame: Any) -> None:
    global _received, _interrupted
    _received = _interrupted = True
    raise KeyboardInterrupt


def stop_status() -> int | None:
    """143 after a SIGTERM, 130 after a Ctrl-C inside ``sigterm_exits``, else None: the
    signal's exception can be lost (raised in a callback of native code: numba's compiler,
    torch's exporter, an extension's import, which print it as ignored or turn it into
    another error), so a command asks this before reporting success or an error."""
    if threading.current_thread() is not threading.main_thread():
        return None  # signals reach the main thread only (and no block here clears them)
    if _interrupted:
        return 128 + signal.SIGINT
    return 128 + signal.SIGTERM if _received else None


def mark_terminating() -> None:
    """Say the process is on its way out (a KeyboardInterrupt the command caught): clean-up
    at exit ends helper processes instead of waiting on them, as after SIGTERM."""
    global _received
    _received = True


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT held off in this thread inside; processes started here inherit the mask, so a
    terminal's Ctrl-C (SIGINT to the whole process group) reaches this process only and its
    workers print no KeyboardInterrupt of their own. A Ctrl-C meanwhile arrives on exit.

    multiprocessing's resource tracker is started first: starting it unblocks SIGINT in the
    calling thread (resource_tracker.ensure_running), which undid the block for every process
    forked after a shared memory block was first made. A no-op where there are no signal
    masks (Windows: no pthread_sigmask, nor a resource tracker to start)."""
    if hasattr(signal, "pthread_sigmask"):
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    with signals_blocked(signal.SIGINT):
        yield


@contextlib.contextmanager
def signals_blocked(*signums: int) -> Iterator[None]:
    """``signums`` held off in this thread inside, arriving on exit; a no-op where there are
    no signal masks (Windows has no pthread_sigmask)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, set(signums))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def terminating() -> bool:
    """Whether this process got SIGTERM inside ``sigterm_exits``: it is on its way out, and
    helper processes may be gone too (SIGTERM to the process group), so a clean-up must not
    wait on their answers (the Lava backend then ends its runtime instead of stopping it)."""
    return _received


@contextlib.contextmanager
def sigterm_exits() -> Iterator[None]:
    """Inside, SIGTERM raises ``Terminated`` instead of killing the process on the spot;
    outside the main thread (where no handler can be set), a no-op."""
    global _received, _interrupted, _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth == 0:  # a new command: an earlier one's stop is not this one's (a nested block,
        _received = _interrupted = False  # e.g. a seed pool's, keeps what this one saw)
    _depth += 1
    before = signal.signal(signal.SIGTERM, _raise_terminated)
    # Ctrl-C as Python's own handler (KeyboardInterrupt), remembered; a handler of the
    # caller's own is kept
    own_int = signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    before_int = None if own_int else signal.signal(signal.SIGINT, _raise_interrupted)
    try:
        yield
    finally:
        _depth -= 1
        signal.signal(signal.SIGTERM, before)
        if before_int is not None:
            signal.signal(signal.SIGINT, before_int)


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed (``neuroedge list | head -1``), as
    against a BrokenPipeError from elsewhere (a socket to a model's LLM endpoint). False where
    that cannot be told (a stdout without a descriptor; no ``select.poll``: Windows): the error
    is then reported, never hidden."""
    import select

    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # a stdout with no descriptor (replaced by a caller)
        return False
    if not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))
