"""One process, several threads (a robot's control app): ONNX exports take turns, a Lava
artifact runs one call at a time, and neuroedge's logging clean-up touches only what the
calling thread did. Every join has a timeout: a hang fails, it does not stall the suite."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import neuroedge as ne
from neuroedge.log_handlers import handlers_kept, quiet_root_logger

LIF = "snn.lif_convnet"


def _in_threads(jobs: list[Callable[[], Any]], timeout: float = 120.0) -> list[Any]:
    """Run ``jobs`` at once (a barrier starts them together); their results or exceptions."""
    results: list[Any] = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def work(i: int) -> None:
        barrier.wait()
        try:
            results[i] = jobs[i]()
        except Exception as err:  # noqa: BLE001 (reported by the test)
            results[i] = err

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(jobs))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout  # one deadline for all: a hang fails in ``timeout``
    for t in threads:
        t.join(max(deadline - time.monotonic(), 0.0))
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return results


def test_onnx_exports_from_several_threads_take_turns(tmp_path) -> None:
    """torch keeps an export's state process-wide: 10 of 15 concurrent exports failed."""
    jobs = [
        (lambda i=i, r=r: ne.export(LIF, "onnx", tmp_path / f"m{i}_{r}.onnx", {"untrained": True}))
        for r in range(3)
        for i in range(3)
    ]
    for batch in (jobs[:3], jobs[3:6], jobs[6:]):
        results = _in_threads(batch)
        assert not [r for r in results if isinstance(r, Exception)], results


@pytest.mark.loihi
def test_two_threads_running_one_lava_artifact_get_their_own_outputs(require) -> None:
    """Two threads on one Lava network hung in Lava's channel send; now they take turns."""
    require("lava")
    from neuroedge.registry import get_backend

    art, _ = ne.deploy(LIF, "lava", config={"untrained": True}, repeats=1)
    lava = get_backend("lava")
    rng = np.random.default_rng(0)
    xs = [rng.random((8, 1, 1, 8, 8)).astype(np.float32) * 3 for _ in range(4)]
    alone = [lava.run(art, {"x": x}) for x in xs]
    jobs = [(lambda x=x: [lava.run(art, {"x": x}) for _ in range(2)]) for x in xs]
    for i, runs in enumerate(_in_threads(jobs)):
        assert not isinstance(runs, Exception), runs
        for out in runs:
            for name, value in alone[i].items():
                assert np.array_equal(out[name], value), (i, name)


def test_handlers_another_thread_adds_during_a_block_stay() -> None:
    root = logging.getLogger()
    inside, added = threading.Event(), threading.Event()
    mine, theirs = logging.NullHandler(), logging.NullHandler()

    def block() -> None:
        with handlers_kept(""):
            root.addHandler(mine)  # as third-party code in this thread would
            inside.set()
            assert added.wait(10)

    worker = threading.Thread(target=block, daemon=True)
    worker.start()
    assert inside.wait(10)
    root.addHandler(theirs)  # the application's own, from its thread, meanwhile
    added.set()
    worker.join(10)
    try:
        assert not worker.is_alive()
        assert theirs in root.handlers and mine not in root.handlers
    finally:
        root.removeHandler(theirs)
        root.removeHandler(mine)


def test_quieting_the_quantizer_drops_only_the_calling_threads_records() -> None:
    """The root level was raised for the process: 43 of 260 warnings of another thread lost."""
    root = logging.getLogger()
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    root.addHandler(handler)
    inside, logged = threading.Event(), threading.Event()

    def block() -> None:
        with quiet_root_logger():
            logging.warning("quantizer advice")  # dropped: this thread, below ERROR
            logging.error("quantizer error")  # kept
            inside.set()
            assert logged.wait(10)

    worker = threading.Thread(target=block, daemon=True)
    try:
        worker.start()
        assert inside.wait(10)
        logging.warning("application warning")  # another thread: passes
        logged.set()
        worker.join(10)
        assert not worker.is_alive()
        assert seen == ["quantizer error", "application warning"]
        assert not root.filters
    finally:
        root.removeHandler(handler)


def test_a_handler_the_caller_had_stays_when_readded_in_a_block() -> None:
    root, handler = logging.getLogger(), logging.NullHandler()
    root.addHandler(handler)
    try:
        with handlers_kept(""):
            root.addHandler(handler)  # a no-op: it is there already
        assert handler in root.handlers
    finally:
        root.removeHandler(handler)


def test_quieting_holds_without_thread_ids_on_records(monkeypatch) -> None:
    """With ``logging.logThreads = False`` records carry no thread id: still quieted."""
    monkeypatch.setattr(logging, "logThreads", False)
    root, seen = logging.getLogger(), []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    root.addHandler(handler)
    try:
        with quiet_root_logger():
            logging.warning("quantizer advice")
        logging.warning("after")
        assert seen == ["after"]
    finally:
        root.removeHandler(handler)
