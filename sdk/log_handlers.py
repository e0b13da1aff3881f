"""Leave the caller's loggers as they were: third-party code that neuroedge calls adds
handlers (ONNX Runtime's quantizers through ``logging.basicConfig()``, Lava one per process
it makes) and never removes them, so a caller's later records would print once per handler
and the caller's own ``basicConfig`` would do nothing."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def handlers_kept(*names: str) -> Iterator[None]:
    """On exit, remove (and close) every handler that the loggers ``names`` ("" is the root
    logger) gained inside the block; those added stay in place while it runs."""
    loggers = [logging.getLogger(name or None) for name in names]
    before = [list(log.handlers) for log in loggers]
    try:
        yield
    finally:
        for log, kept in zip(loggers, before, strict=True):
            for handler in [h for h in log.handlers if h not in kept]:
                log.removeHandler(handler)
                handler.close()
