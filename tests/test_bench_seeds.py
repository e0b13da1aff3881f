"""neuroedge.bench.seeds: seed lists, rows averaged over seeds, paired differences."""

from __future__ import annotations

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


def test_seed_with_seeds_is_refused_before_any_check_or_run() -> None:
    from neuroedge.bench.seeds import run_over_seeds
    from neuroedge.errors import ConfigError

    def never(cfg):
        pytest.fail("ran: seed=7 with seeds=[5] ran seed 5 and reported seed 7")

    with pytest.raises(ConfigError, match=r"seed=7 and seeds=\[5\]: give one"):
        run_over_seeds("m", {"seeds": [5], "seed": 7}, {"seed": 0, "workers": 1}, never, never)


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


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc")
def test_stopping_a_run_with_sigterm_ends_its_worker_processes() -> None:
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import time; from neuroedge.bench.seeds import map_seeds; "
        "map_seeds(time.sleep, {0: 120, 1: 120}, workers=2, progress=False)"
    )
    run = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while len(workers := children_of(run.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # spawn start-up: a resource tracker and the two workers
        assert len(workers) >= 2, "the pool never started"
        time.sleep(1.0)
        run.send_signal(signal.SIGTERM)  # what `timeout` and `kill` send
        assert run.wait(timeout=30) != 0
        deadline = time.monotonic() + 15
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(alive(w) for w in workers), "workers outlived the run"
    finally:
        run.kill()
        for w in children_of(run.pid):
            __import__("os").kill(w, signal.SIGKILL)


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
