"""SIGTERM during a Lava run (to the command, or to its process group as ``timeout`` sends it)
ends the command at once with 143 and one line: no Lava worker process nor shared memory
block is left behind. It hung: the clean-up at exit called Lava's ``Runtime.stop``, which
waits for answers that workers stopped mid-step, or killed by the same signal, never send."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from test_bench_seeds import sigint_default
from test_signals import descendants, descendants_alive, spawn

pytestmark = [
    pytest.mark.loihi,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

# a command (``doctor`` replaced) that runs a small network on Lava; prints the names of the
# run's shared memory blocks once built, then runs it again and again (LOOP) or idles (IDLE)
LAVA = """
import sys, time
import numpy as np
import nir
import neuroedge.cli as cli
from neuroedge.registry import get_backend
from neuroedge.types import IOSpec, ModelSpec, NIRProgram

def work(args):
    lif = nir.LIF(tau=np.full(4, 2e-3), r=np.ones(4), v_leak=np.zeros(4),
                  v_threshold=np.ones(4))
    nodes = {"x": nir.Input({"input": np.array([4])}), "f": nir.Affine(np.eye(4), np.zeros(4)),
             "a": lif, "y": nir.Output({"output": np.array([4])})}
    graph = nir.NIRGraph(nodes, [("x", "f"), ("f", "a"), ("a", "y")], metadata={"dt": 1e-3})
    io = lambda name: (IOSpec(name, ("T", "batch", 4)),)
    spec = ModelSpec("snn.t", "snn", "t", io("x"), io("y"),
                     build=lambda cfg: NIRProgram(graph, 1e-3), example=lambda s: {})
    lava = get_backend("lava")
    art = lava.compile(NIRProgram(graph, 1e-3), spec, {"variant": "floating_pt"})
    xs = {"x": np.ones((200, 1, 4), dtype=np.float32)}
    lava.run(art, xs)
    (net,) = art.handle._built.values()
    blocks = net["source"].runtime._messaging_infrastructure.smm._shared_memory_handles
    print(" ".join(b.name for b in blocks), flush=True)
    WORK
    return 0

cli.cmd_doctor = work
sys.exit(cli.main(["doctor"]))
"""
LOOP = "while True: lava.run(art, xs)"  # SIGTERM lands mid-step, or between steps
IDLE = "time.sleep(120)"  # the network built and idle: only the clean-up at exit is left


@pytest.mark.parametrize(
    "work, group, sig, code, line",
    [
        (LOOP, False, "SIGTERM", 143, "neuroedge: terminated (SIGTERM)"),
        (LOOP, True, "SIGTERM", 143, "neuroedge: terminated (SIGTERM)"),
        (IDLE, True, "SIGTERM", 143, "neuroedge: terminated (SIGTERM)"),
        (LOOP, True, "SIGINT", 130, "neuroedge: interrupted"),  # a terminal's Ctrl-C
        (IDLE, True, "SIGINT", 130, "neuroedge: interrupted"),
    ],
    ids=["running", "running-group", "idle-group", "ctrl-c-running", "ctrl-c-idle"],
)
def test_sigterm_during_a_lava_run_exits_143_and_leaves_nothing(
    tmp_path, work, group, sig, code, line
) -> None:
    """Before: the command printed its line, then hung for good (group, or a run mid-step);
    a Ctrl-C also printed each worker's KeyboardInterrupt and waited out the orderly stop."""
    run = spawn(
        LAVA.replace("WORK", work),
        tmp_path,
        env={"OMP_NUM_THREADS": "1"},
        preexec_fn=sigint_default,
    )
    try:
        blocks = run.stdout.readline().split()
        assert blocks, run.communicate(timeout=60)[1]
        time.sleep(1.0)  # LOOP: well inside Lava's runs
        below = descendants(run.pid)
        assert below  # Lava's workers
        (os.killpg if group else os.kill)(run.pid, getattr(signal, sig))
        sent = time.monotonic()
        _, err = run.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
    assert run.returncode == code, err
    assert err.strip() == line  # one line, none from a worker
    # under the orderly stop's bound (5 s): the workers were ended, not waited on
    assert took < 3, f"the command took {took:.1f} s to end after {sig}"
    deadline = time.monotonic() + 10
    while (left := descendants_alive(below)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, "Lava's workers outlived the command"
    assert not [b for b in blocks if Path("/dev/shm", b.lstrip("/")).exists()]


def test_a_run_that_fails_ends_its_network_and_leaves_no_worker(monkeypatch) -> None:
    """A run that raises (here: reading its records) drops its network and ends the runtime
    at once: Lava's own stop would wait for a worker's answer that may never come."""
    import multiprocessing as mp

    import nir
    import numpy as np
    from neuroedge.backends import lava as lava_mod
    from neuroedge.backends import lava_processes
    from neuroedge.registry import get_backend
    from neuroedge.types import IOSpec, ModelSpec, NIRProgram

    lif = nir.LIF(tau=np.full(4, 2e-3), r=np.ones(4), v_leak=np.zeros(4), v_threshold=np.ones(4))
    nodes = {
        "x": nir.Input({"input": np.array([4])}),
        "f": nir.Affine(np.eye(4), np.zeros(4)),
        "a": lif,
        "y": nir.Output({"output": np.array([4])}),
    }
    graph = nir.NIRGraph(nodes, [("x", "f"), ("f", "a"), ("a", "y")], metadata={"dt": 1e-3})
    io = (IOSpec("x", ("T", "batch", 4)),), (IOSpec("y", ("T", "batch", 4)),)
    spec = ModelSpec("snn.t", "snn", "t", *io, build=lambda c: None, example=lambda s: {})
    backend = get_backend("lava")
    art = backend.compile(NIRProgram(graph, 1e-3), spec, {"variant": "floating_pt"})
    before = {p.pid for p in mp.active_children()}

    def broken(*args):
        raise RuntimeError("records unreadable")

    monkeypatch.setattr(lava_mod.LavaNetwork, "_collect", broken)
    handles: list[int] = []  # the shared memory handles each failed run released
    release = lava_processes._release_memory

    def counted(smm):
        handles.append(len(smm._shared_memory_handles))
        release(smm)

    monkeypatch.setattr(lava_processes, "_release_memory", counted)
    pipes, shm = [], []
    gc.disable()  # what is released must be, without waiting for the collector
    try:
        for _ in range(2):
            with pytest.raises(RuntimeError, match="records unreadable"):
                backend.run(art, {"x": np.ones((20, 1, 4), dtype=np.float32)})
            pipes.append(_open("pipe:", "socket:"))
            shm.append(_open("/dev/shm/"))
    finally:
        gc.enable()
    assert art.handle._built == {}
    assert {p.pid for p in mp.active_children()} <= before  # its workers reaped
    # each worker's error pipe and sentinel closed: they stayed open until a garbage
    # collection (24 more descriptors per run of this network)
    assert pipes[1] == pipes[0]
    # each handle's own descriptor closed; its mapping keeps one until a collection (was 2)
    assert handles[1] > 0 and shm[1] - shm[0] <= handles[1]


def _open(*kinds: str) -> int:
    """The descriptors this process holds open whose link starts with one of ``kinds``."""
    links = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed meanwhile
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
    return sum(link.startswith(kinds) for link in links)
