"""The command stopped by a signal: SIGTERM (what `timeout`, `kill` and batch schedulers send)
unwinds as Ctrl-C does, so no atomic temp file (.part) and no pool worker is left behind; it
exits 143 with one line, Ctrl-C 130 with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from test_bench_seeds import sigint_default

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# a command (``doctor`` replaced) that holds an atomic_path temp file while it works
HOLD = """
import sys, time
import neuroedge.cli as cli
from neuroedge.atomic import atomic_path
from neuroedge.bench.seeds import map_seeds

def hold(args):
    with atomic_path("out.json") as tmp:
        tmp.write_text("{}")
        print("ready", flush=True)
        WORK
    return 0

cli.cmd_doctor = hold
sys.exit(cli.main(["doctor"]))
"""
SLEEP = "time.sleep(60)"
POOL = "map_seeds(time.sleep, {0: 60, 1: 60}, workers=2, progress=False)"


def spawn(code: str, cwd, env: dict | None = None, **popen) -> subprocess.Popen:
    """``python -c code`` in its own session (so a signal can go to its group), pipes open."""
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "NEUROEDGE_DEBUG": "0", **(env or {})},
        **popen,
    )


def descendants(pid: int) -> set[int]:
    """Live processes below ``pid`` (Linux /proc)."""
    from pathlib import Path

    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, grew = {pid}, True
    while grew:
        more = {p for p, pp in parents.items() if pp in found} - found
        found, grew = found | more, bool(more)
    return found - {pid}


@pytest.mark.parametrize(
    "work, sig, group, code, line",
    [
        (SLEEP, "SIGTERM", False, 143, "neuroedge: terminated (SIGTERM)"),
        (POOL, "SIGTERM", False, 143, "neuroedge: terminated (SIGTERM)"),
        (SLEEP, "SIGINT", True, 130, "neuroedge: interrupted"),
        (POOL, "SIGINT", True, 130, "neuroedge: interrupted"),  # Ctrl-C: the terminal's group
    ],
)
def test_a_stopped_command_leaves_no_temp_file_nor_worker(tmp_path, work, sig, group, code, line):
    """SIGTERM killed the command on the spot: .out.json.*.part left, exit -15."""
    run = spawn(HOLD.replace("WORK", work), tmp_path, preexec_fn=sigint_default)
    try:
        assert run.stdout.readline().strip() == "ready"
        assert list(tmp_path.glob(".out.json.*.part"))
        deadline, want = time.monotonic() + 60, 3 if work == POOL else 0  # tracker, 2 workers
        while len(below := descendants(run.pid)) < want and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # the workers inside their loop
        (os.killpg if group else os.kill)(run.pid, getattr(signal, sig))
        _, err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == code, err
    assert err.strip() == line  # one line: no traceback, none from a worker
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no .part; no out.json either
    deadline = time.monotonic() + 10
    while (left := descendants_alive(below)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, "workers outlived the command"


def descendants_alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (not zombies)."""
    from pathlib import Path

    alive = set()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                alive.add(pid)
        except OSError:
            continue
    return alive


def test_sigterm_exits_puts_the_callers_handler_back() -> None:
    """A library call that runs a pool must leave the caller's SIGTERM handler in place."""
    import signal

    from neuroedge.signals import Terminated, sigterm_exits

    def mine(signum, frame) -> None:  # the caller's own handler
        raise AssertionError("not called")

    before = signal.signal(signal.SIGTERM, mine)
    try:
        with sigterm_exits():
            inside = signal.getsignal(signal.SIGTERM)
        assert inside is not mine  # SIGTERM raised Terminated inside
        assert signal.getsignal(signal.SIGTERM) is mine
        try:
            with sigterm_exits():
                raise Terminated(143)
        except Terminated:
            pass
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)
