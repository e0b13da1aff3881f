"""Leave the caller's loggers as they were: third-party code that neuroedge calls adds
handlers (ONNX Runtime's quantizers through ``logging.basicConfig()``, Lava one per process
it makes) and never removes them, so a caller's later records would print once per handler
and the caller's own ``basicConfig`` would do nothing. Only what the calling thread does
inside a block is undone: an application's other threads keep their handlers and records."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

_local = threading.local()  # .added: [(logger, handler)] this thread added in a block
_lock = threading.Lock()
_blocks = 0  # blocks open in any thread; the recording addHandler is installed while > 0
_saved: Any = None


def _recording_add(self: logging.Logger, handler: logging.Handler) -> None:
    new = handler not in self.handlers  # re-adding the caller's own handler adds nothing
    _saved(self, handler)
    added = getattr(_local, "added", None)
    if added is not None and new:
        added.append((self, handler))


@contextlib.contextmanager
def handlers_kept(*names: str) -> Iterator[None]:
    """On exit, remove (and close) every handler that the calling thread added to the loggers
    ``names`` ("" is the root logger) inside the block; they stay in place while it runs, and
    handlers other threads add meanwhile are theirs (``Logger.addHandler`` records the
    calling thread's while any block is open)."""
    global _blocks, _saved
    outer = getattr(_local, "added", None)
    _local.added = added = []
    with _lock:
        if _blocks == 0 and logging.Logger.addHandler is not _recording_add:
            _saved = logging.Logger.addHandler  # (someone's patch may have put ours back)
            logging.Logger.addHandler = _recording_add  # type: ignore[method-assign]
        _blocks += 1
    try:
        yield
    finally:
        with _lock:
            _blocks -= 1
            if _blocks == 0 and logging.Logger.addHandler is _recording_add:
                logging.Logger.addHandler = _saved  # type: ignore[method-assign]
        _local.added = outer
        wanted = [logging.getLogger(name or None) for name in names]
        for log, handler in added:
            if any(log is w for w in wanted) and handler in log.handlers:
                log.removeHandler(handler)
                handler.close()
            elif outer is not None:  # an enclosing block decides about its own loggers
                outer.append((log, handler))


class _QuietThread(logging.Filter):
    """Drops records below ERROR that one thread logs on the logger it is attached to."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        # logger filters run in the logging thread (record.thread is None without logThreads)
        return threading.get_ident() != self.thread or record.levelno >= logging.ERROR


@contextlib.contextmanager
def quiet_root_logger() -> Iterator[None]:
    """ONNX Runtime's quantizers log their pre-processing advice on every call with the
    module-level ``logging.warning``: on the root logger at WARNING, and, where root has no
    handler yet, through ``logging.basicConfig()``, which adds a stderr handler for good (the
    caller's own ``basicConfig`` later does nothing). For the call only: the calling thread's
    root records below ERROR dropped (not the root level: other threads' records pass), and
    on exit any handler it added gone."""
    root, quiet = logging.getLogger(), _QuietThread()
    root.addFilter(quiet)
    try:
        with handlers_kept(""):
            yield
    finally:
        root.removeFilter(quiet)
