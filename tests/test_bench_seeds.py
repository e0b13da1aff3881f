"""neuroedge.bench.seeds: seed lists, rows averaged over seeds, paired differences."""

from __future__ import annotations

import re

import numpy as np
import pytest
from neuroedge.bench.seeds import mean_report, paired_difference, seed_label, seed_list
from neuroedge.types import Measurement, Report


def test_seed_list_takes_seeds_or_the_single_seed_and_refuses_bad_lists() -> None:
    assert seed_list({"seed": 3}) == [3]
    assert seed_list({"seed": 0, "seeds": [4, 2]}) == [4, 2]
    assert seed_list({}, (0, 1)) == [0, 1]  # a bench's own default list
    assert seed_list({"seed": 5}, (0, 1)) == [5]  # seed=S alone runs that seed
    assert seed_list({"seeds": [3]}, (0, 1)) == [3]
    for bad in ([0, 0], "0,1", [0.5], [True]):
        with pytest.raises(ValueError, match="seeds must"):
            seed_list({"seed": 0, "seeds": bad})
    for empty in ([], ()):  # was silently the default list
        with pytest.raises(ValueError, match="non-empty"):
            seed_list({"seeds": empty}, (0, 1))
    with pytest.raises(ValueError, match="seeds must be a list of integers, got ''"):
        seed_list({"seeds": ""}, (0, 1))  # --config seeds= ran the default list


def test_seed_list_takes_numpy_integers_as_ints_and_still_refuses_bools() -> None:
    """seed=np.int64(1) from Python passed every config check, then seed_list refused it:
    "seeds must be a list of integers, got [1]"."""
    for got in (seed_list({"seed": np.int64(1)}), seed_list({"seeds": [np.int64(4), np.uint8(2)]})):
        assert got in ([1], [4, 2]) and all(type(s) is int for s in got)
    assert seed_list({"seeds": (np.int32(3),)}, (0, 1)) == [3]
    for bad in ([True], [np.bool_(True)], [np.float64(1.0)]):
        with pytest.raises(ValueError, match="seeds must be a list of integers"):
            seed_list({"seeds": bad})
    with pytest.raises(ValueError, match=r"seeds must be a list of integers, got \[True\]"):
        seed_list({"seed": True})
    with pytest.raises(ValueError, match="seeds must be distinct"):
        seed_list({"seeds": [np.int64(2), 2]})


def test_seed_with_seeds_is_refused_before_any_check_or_run() -> None:
    from neuroedge.bench.seeds import run_over_seeds
    from neuroedge.errors import ConfigError

    def never(cfg):
        pytest.fail("ran: seed=7 with seeds=[5] ran seed 5 and reported seed 7")

    with pytest.raises(ConfigError, match=r"seed=7 and seeds=\[5\]: give one"):
        run_over_seeds("m", {"seeds": [5], "seed": 7}, {"seed": 0, "workers": 1}, never, never)


def seed_figures(cfg) -> list[Report]:
    """A fake bench's rows of one seed: figures that differ from seed to seed."""
    s = cfg["seed"]
    return [
        Report("m", "host", v, metrics={"acc": Measurement(s / 10 + k, "fraction")})
        for k, v in enumerate(("a", "b"))
    ]


def test_each_seed_row_carries_its_own_seeds_figures_and_the_config_its_seeds(tmp_path) -> None:
    """Rows labelled with each other's seeds (a@seed=3 holding seed 5's figures) passed every
    test: the means and the claims read both seeds alike. The recorded config also carried the
    default seed=0, which no seed of the run used."""
    import json

    from neuroedge.bench.seeds import run_over_seeds, write_seed_report

    defaults = {"seed": 0, "seeds": [0, 1], "workers": 1}
    cfg, seeds, per_seed = run_over_seeds("m", {"seeds": [3, 5]}, defaults, dict, seed_figures)
    assert seeds == [3, 5] and "seed" not in cfg and cfg["seeds"] == [3, 5]
    doc = write_seed_report(str(tmp_path), "m", per_seed, cfg, {"seeds": seeds}, ["acc"], [])
    assert json.loads((tmp_path / "report.json").read_text())["config"] == cfg
    rows = {r["variant"]: r["metrics"]["acc"]["value"] for r in doc["rows"]}
    for s in (3, 5):
        own = {r["variant"]: r["metrics"]["acc"]["value"] for r in doc["per_seed"][str(s)]}
        assert own == {"a": pytest.approx(s / 10), "b": pytest.approx(s / 10 + 1)}
        assert {v: rows[seed_label(v, s)] for v in own} == own
    assert rows["a"] == pytest.approx(0.4) and rows["b"] == pytest.approx(1.4)
    cfg, seeds, _ = run_over_seeds("m", {"seed": 4}, defaults, dict, seed_figures)
    assert seeds == [4] and cfg["seed"] == 4 and cfg["seeds"] == [4]  # seed=S ran seed S
    cfg, seeds, _ = run_over_seeds("m", {}, defaults, dict, seed_figures)
    assert seeds == [0, 1] and "seed" not in cfg  # the bench's own list, not seed 0 alone
    cfg, seeds, _ = run_over_seeds("m", {"seed": np.int64(1)}, defaults, dict, seed_figures)
    assert seeds == [1] and type(seeds[0]) is int


def test_mean_report_averages_each_metric_and_adds_the_named_spreads() -> None:
    reps = [
        Report(
            "m",
            "host",
            seed_label("v", s),
            metrics={"accuracy": Measurement(a, "fraction"), "sops": Measurement(10.0 * s, "SOPs")},
        )
        for s, a in ((1, 0.9), (2, 0.8))
    ]
    row = mean_report(reps, "v", ("accuracy",), "per seed in rows v@seed=S")
    assert row.variant == "v" and row.backend == "host"
    assert row.metrics["accuracy"].value == pytest.approx(0.85)
    assert row.metrics["accuracy_sd"].value == pytest.approx(np.std([0.9, 0.8], ddof=1))
    assert row.metrics["sops"].value == pytest.approx(15.0) and "sops_sd" not in row.metrics
    assert row.notes == ("mean of 2 seeds; per seed in rows v@seed=S",)
    with pytest.raises(ValueError, match="no per-seed rows"):
        mean_report([], "v")


def test_paired_difference_is_the_mean_and_standard_error_of_the_differences() -> None:
    mean, sem = paired_difference([3.0, 5.0, 10.0], [1.0, 2.0, 4.0])
    assert mean == pytest.approx(11 / 3)
    assert sem == pytest.approx(np.std([2.0, 3.0, 6.0], ddof=1) / np.sqrt(3))
    assert np.isnan(paired_difference([1.0], [0.0])[1])
    with pytest.raises(ValueError, match="equal-length"):
        paired_difference([1.0, 2.0], [1.0])


def sigint_default() -> None:
    """``preexec_fn`` for a child that a test stops with SIGINT: Ctrl-C back to its default.
    A process started in the background by a non-interactive shell (``make test &``) has
    SIGINT ignored, and Python then installs no KeyboardInterrupt handler in its children."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def children_of(pid: int) -> set[int]:
    """Live child pids of ``pid`` (Linux /proc)."""
    from pathlib import Path

    kids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            kids.add(int(stat.parent.name))
    return kids


def alive(pid: int) -> bool:
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_when_started(code: str, sig: int) -> tuple[int, set[int]]:
    """Run ``code`` (a pool of two workers, or more), send ``sig`` to it once they run; its exit
    status and its children then (a resource tracker, the workers)."""
    import os
    import subprocess
    import sys
    import time

    run = subprocess.Popen(
        [sys.executable, "-c", code], cwd=os.path.dirname(__file__), preexec_fn=sigint_default
    )
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(workers := children_of(run.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)  # spawn start-up: a resource tracker and the two workers
        assert len(workers) >= 3, "the pool never started"
        time.sleep(1.0)
        run.send_signal(sig)
        return run.wait(timeout=30), workers
    finally:
        run.kill()
        for pid in workers:
            if alive(pid):
                os.kill(pid, 9)


def gone(pids: set[int], within: float = 15.0) -> bool:
    """Whether every process of ``pids`` has ended ``within`` seconds."""
    import time

    deadline = time.monotonic() + within
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not any(alive(p) for p in pids)


LINUX = pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="/proc")


@LINUX
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])  # what `timeout` and `kill` send; Ctrl-C
def test_stopping_a_run_with_sigterm_ends_its_worker_processes(sig) -> None:
    code = (
        "import time; from neuroedge.bench.seeds import map_seeds; "
        "map_seeds(time.sleep, {0: 120, 1: 120}, workers=2, progress=False)"
    )
    rc, workers = stop_when_started(code, getattr(__import__("signal"), sig))
    assert rc != 0
    assert gone(workers), "workers outlived the run"


def slow_cell(job: tuple) -> dict:
    """A closed-loop cell of vla.specprune that takes a minute (spawned workers import it)."""
    __import__("time").sleep(60)
    return {}


@LINUX
def test_sigterm_to_a_specprune_cell_pool_ends_its_workers() -> None:
    """Its ProcessPoolExecutor had no SIGTERM handler: the parent died on the spot and its
    workers went on running their cells, orphaned."""
    code = (
        "from neuroedge.models.specprune import bench\n"
        "from neuroedge.models.specprune.functional import PruneConfig\n"
        "import test_bench_seeds\n"
        "bench.evaluate_job = test_bench_seeds.slow_cell\n"
        "bench.evaluate_all({'a': 'x'}, 'host', {'a': PruneConfig()}, ('t1', 't2'), 1, 2)\n"
    )
    rc, workers = stop_when_started(code, __import__("signal").SIGTERM)
    assert rc == 143  # was -15: killed on the spot
    assert gone(workers), "workers outlived the run"


def test_a_pool_gives_each_seeds_result_in_the_order_of_the_seeds_and_raises_a_seeds_error():
    from neuroedge.bench.seeds import map_seeds

    got = map_seeds(abs, {3: -3, 1: -1, 2: -2, 0: 5}, workers=2, progress=False)
    assert list(got.items()) == [(3, 3), (1, 1), (2, 2), (0, 5)]
    with pytest.raises(ZeroDivisionError):
        map_seeds(eval, {0: "1", 1: "1/0", 2: "2"}, workers=2, progress=False)


KILL_SELF = "__import__('os').kill(__import__('os').getpid(), 9)"  # as the OOM killer does


def test_a_worker_that_dies_is_an_error_naming_it_at_once_not_a_hang() -> None:
    """A worker killed (SIGKILL, what the out-of-memory killer sends) left multiprocessing.Pool
    waiting for its result forever; the error names the seed, the signal and what is left, and
    the other worker (a minute's work) is ended with the run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import sys; from neuroedge.bench.seeds import map_seeds\n"
        f"cfgs = {{0: {KILL_SELF!r}, 1: '__import__(\"time\").sleep(60)'}}\n"
        "try:\n"
        "    map_seeds(eval, cfgs, workers=2, desc='b seeds', progress=False)\n"
        "except ChildProcessError as err:\n"
        "    sys.exit(str(err))\n"
    )
    start = time.monotonic()
    run = subprocess.Popen(
        [sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _, err = run.communicate(timeout=30)  # the old pool: still waiting after 40 s
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 1 and time.monotonic() - start < 20  # the sleeping worker ended
    assert re.fullmatch(
        r"b seeds: a worker process \(pid \d+\) running seed 0 was killed by signal SIGKILL "
        r"\(as the kernel's out-of-memory killer does: fewer workers use less memory\); "
        r"seeds not finished: \[0, 1\]",
        err.strip(),
    ), err


@pytest.mark.parametrize("name", ["event.bivision", "snn.unisparse", "uq.last_layer"])
def test_the_python_bench_hooks_refuse_seed_with_seeds_too(tmp_path, name) -> None:
    """These merge their config before reading the seeds: called from Python (not the CLI,
    which checks first) they ran the seeds and recorded the seed."""
    import neuroedge as ne
    from neuroedge.errors import ConfigError

    bench = ne.model(name).hook("bench")
    out = tmp_path / "r"
    with pytest.raises(ConfigError, match=r"seed=7 and seeds=\[5\]: give one"):
        bench(out_dir=str(out), backends=["host"], config={"seeds": [5], "seed": 7})
    assert not out.exists()


def test_workers_takes_numpy_integers_as_an_int() -> None:
    import numpy as np
    from neuroedge.bench.seeds import check_workers

    assert check_workers(np.int64(2)) == 2 and type(check_workers(np.int64(2))) is int
    for bad in (True, np.float64(2.0), 0):
        with pytest.raises(ValueError, match="workers must be a positive integer"):
            check_workers(bad)


def _stop(cfg):
    raise KeyboardInterrupt


def test_the_progress_bar_is_closed_however_the_seeds_end(monkeypatch) -> None:
    """A bar left open was redrawn at exit, after the command's stop line."""
    import tqdm as tqdm_module
    from neuroedge.bench.seeds import map_seeds

    closed = []

    class Bar(tqdm_module.tqdm):
        def close(self):
            closed.append(True)
            super().close()

    monkeypatch.setattr(tqdm_module, "tqdm", Bar)
    with pytest.raises(KeyboardInterrupt) as stopped:
        map_seeds(_stop, {0: {}, 1: {}}, workers=1, desc="seeds", progress=True)
    assert closed, "the bar was left open"
    del stopped
