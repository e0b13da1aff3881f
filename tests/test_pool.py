"""The seed pool (``bench.pool``): a result or error that cannot be pickled is named, not a dead
worker; a worker that ignores SIGTERM is killed; Ctrl-C to the terminal's process group is one
KeyboardInterrupt in the parent, with no traceback from the workers, however far they are."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pool_jobs import raise_bad_reduce, raise_custom, return_pointer, return_unrebuildable
from test_bench_seeds import LINUX, alive, children_of, gone, sigint_default

HERE = os.path.dirname(__file__)


@pytest.mark.parametrize(
    "fn, error, message",
    [
        (raise_custom, RuntimeError, r"Custom: 1/2"),
        (raise_bad_reduce, RuntimeError, r"BadReduce: boom with details"),
        (
            return_pointer,
            TypeError,
            r"the result of <function return_pointer at \w+> cannot be sent to the parent: "
            r"ValueError: ctypes objects containing pointers cannot be pickled",
        ),
    ],
)
def test_a_result_or_error_that_cannot_be_pickled_is_named_not_a_dead_worker(fn, error, message):
    """A ValueError from pickling (a ctypes pointer, a ``__reduce__`` that raises) killed the
    worker: 'WorkerDied: ... exited with code 1 without sending a result'."""
    from neuroedge.bench.seeds import map_seeds

    with pytest.raises(error) as caught:
        map_seeds(fn, {0: 1, 1: 1}, workers=2, progress=False)
    assert re.fullmatch(message, str(caught.value)), caught.value


def test_a_result_that_cannot_be_rebuilt_in_the_parent_names_the_seed() -> None:
    """It came out of the pipe as a bare ValueError('cannot rebuild'), naming no seed."""
    from neuroedge.bench.seeds import map_seeds

    with pytest.raises(TypeError, match=r"d: the result of seed [01] cannot be rebuilt here: "):
        map_seeds(return_unrebuildable, {0: 1, 1: 1}, workers=2, desc="d", progress=False)


def stubborn(cfg: tuple[str, str]) -> None:
    """As a worker stuck in C code, or whose ``fn`` swallows SIGTERM: ignores it, then runs a
    minute; the other config fails once it does."""
    folder, role = cfg
    if role == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        Path(folder, "stubborn").write_text(str(os.getpid()))
        time.sleep(60)
    while not Path(folder, "stubborn").exists():
        time.sleep(0.05)
    raise RuntimeError("the other seed failed")


STUBBORN = """
import sys
import neuroedge.bench.pool as pool
import test_pool
from neuroedge.bench.seeds import map_seeds
pool.STOP_GRACE_S = 0.5
cfgs = {0: (FOLDER, "stubborn"), 1: (FOLDER, "fail")}
try:
    map_seeds(test_pool.stubborn, cfgs, workers=2, progress=False)
except RuntimeError as err:
    sys.exit(str(err))
"""


@LINUX
def test_a_worker_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path) -> None:
    start = time.monotonic()
    run = subprocess.Popen(
        [sys.executable, "-c", STUBBORN.replace("FOLDER", repr(str(tmp_path)))],
        cwd=HERE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = run.communicate(timeout=20)  # no SIGKILL: waiting on it for a minute
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    pid = int((tmp_path / "stubborn").read_text())
    try:
        assert (run.returncode, err.strip()) == (1, "the other seed failed")
        assert time.monotonic() - start < 15
        assert gone({pid}, within=2), "the worker that ignores SIGTERM outlived the run"
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


class SlowToStart:
    """``abs``, which takes 3 s to unpickle: a worker's start-up, before ``_work`` runs. It
    marks ``folder`` when its unpickling starts: the parent has then sent the worker its data
    (it is past starting that worker, so a Ctrl-C reaches it waiting, as in a real start-up)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __reduce__(self):
        mark = f"__import__('pathlib').Path({self.folder!r}, str(__import__('os').getpid()))"
        return eval, (f"{mark}.touch() or __import__('time').sleep(3) or abs",)


def mark_then_sleep(folder: str) -> None:
    Path(folder, str(os.getpid())).touch()
    time.sleep(60)


CTRL_C = """
import test_pool
from neuroedge.bench.seeds import map_seeds
if WORKING:
    map_seeds(test_pool.mark_then_sleep, {0: FOLDER, 1: FOLDER}, workers=2, progress=False)
else:
    map_seeds(test_pool.SlowToStart(FOLDER), {0: -1, 1: -2}, workers=2, progress=False)
"""


def sigint_held(pid: int) -> bool:
    """Whether process ``pid`` has Ctrl-C (SIGINT) blocked or ignored (Linux /proc)."""
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return bool((int(status["SigBlk"], 16) | int(status["SigIgn"], 16)) >> (signal.SIGINT - 1) & 1)


def pool_ready(pid: int, folder: Path) -> set[int]:
    """The children of ``pid`` once a resource tracker and two workers run Python (past their
    exec) and both workers marked ``folder`` (loading their job, or at work); empty before."""
    kids = children_of(pid)
    try:
        execed = all(b"multiprocessing" in Path(f"/proc/{k}/cmdline").read_bytes() for k in kids)
    except OSError:  # one gone meanwhile
        return set()
    ready = len(kids) >= 3 and execed and len(list(folder.iterdir())) == 2
    return kids if ready else set()


@LINUX
@pytest.mark.parametrize("working", [False, True], ids=["starting", "working"])
def test_ctrl_c_to_the_group_is_one_keyboard_interrupt_and_no_worker_traceback(tmp_path, working):
    """Ctrl-C goes to the terminal's whole process group: a worker not yet in ``_work`` (where
    it ignores it) raised KeyboardInterrupt too, and printed its traceback unless the parent's
    SIGTERM came first; the first worker of a run was born without the mask (starting the
    resource tracker unblocked it)."""
    code = CTRL_C.replace("WORKING", str(working)).replace("FOLDER", repr(str(tmp_path)))
    run = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=HERE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_default,
    )
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 30
        while not (workers := pool_ready(run.pid, tmp_path)):
            assert time.monotonic() < deadline, "the pool never started"
            time.sleep(0.05)
        deaf = {pid: sigint_held(pid) for pid in workers}  # the tracker ignores it too
        os.killpg(run.pid, signal.SIGINT)
        _, err = run.communicate(timeout=20)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert all(deaf.values()), f"Ctrl-C reaches a worker in its start-up: {deaf}"
    assert run.returncode == -signal.SIGINT, err
    assert err.count("Traceback") == 1 and err.rstrip().endswith("KeyboardInterrupt"), err
    assert gone(workers), "workers outlived the run"
