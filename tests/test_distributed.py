"""Seed sweeps under torchrun (neuroedge.bench.distributed): the launch variables, the sharding,
real two-process runs over gloo (results, a failing seed, ranks that disagree) and the CLI."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from neuroedge import distributed as W
from neuroedge.bench import distributed as D
from neuroedge.registry import get_model, model_names

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from neuroedge.bench.seeds import map_seeds

    def fn(cfg):
        if cfg["fail"]:
            raise ValueError(f"seed {cfg['seed']} is bad")
        return {"rank": int(os.environ["RANK"]), "square": cfg["seed"] ** 2}

    mode, out, rank = sys.argv[1], sys.argv[2], os.environ["RANK"]
    seeds = [3, 1, 4, 5, 9] if not (mode == "mismatch" and rank == "1") else [3, 1, 4]
    jobs = {s: {"seed": s, "fail": mode == "fail" and s == 4} for s in seeds}
    try:
        got = map_seeds(fn, jobs, workers=1, progress=False)
    except Exception as err:
        got = {"error": type(err).__name__, "message": str(err)}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(got, f)
    """
)


def launch(mode: str, tmp_path: pathlib.Path, torchrun) -> list[dict]:
    script = tmp_path / "sweep.py"
    script.write_text(SCRIPT)
    torchrun([str(script), mode, str(tmp_path)], tmp_path)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_world_from_torchrun_variables() -> None:
    assert W.world({}) == W.World(0, 1, 0) and not W.world({}).active
    w = W.world({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
    assert (w.rank, w.size, w.local_rank, w.active, w.lead) == (3, 4, 1, True, False)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RANK": "0", "WORLD_SIZE": "2"}, "LOCAL_RANK"),
        ({"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "RANK=2"),
        ({"RANK": "x", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "RANK='x'"),
        ({"RANK": "0", "WORLD_SIZE": "0", "LOCAL_RANK": "0"}, "WORLD_SIZE=0"),
        ({"RANK": "-1", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "RANK=-1"),
    ],
)
def test_bad_launch_variables_are_named(env: dict, named: str) -> None:
    with pytest.raises(W.DistributedError, match=named):
        W.world(env)


def test_timeout_from_environment() -> None:
    assert W.timeout_s({}) == W.DEFAULT_TIMEOUT_S
    assert W.timeout_s({W.TIMEOUT_ENV: "90"}) == 90.0
    for bad in ("0", "-5", "soon", "nan", "inf"):
        with pytest.raises(W.DistributedError, match=W.TIMEOUT_ENV):
            W.timeout_s({W.TIMEOUT_ENV: bad})


def test_shard_is_round_robin_and_covers_every_key() -> None:
    keys = [3, 1, 4, 5, 9]
    parts = [D.shard(keys, W.World(r, 2, r)) for r in (0, 1)]
    assert parts == [[3, 4, 9], [1, 5]]
    assert D.shard(keys, W.World(4, 6, 0)) == [9] and D.shard(keys, W.World(5, 6, 0)) == []


def test_two_ranks_share_the_seeds_and_both_get_all_results(tmp_path, torchrun) -> None:
    rank0, rank1 = launch("ok", tmp_path, torchrun)
    assert rank0 == rank1  # every rank ends with every result, in the order of the jobs
    assert list(rank0) == ["3", "1", "4", "5", "9"]
    assert {k: v["rank"] for k, v in rank0.items()} == {"3": 0, "1": 1, "4": 0, "5": 1, "9": 0}
    assert all(v["square"] == int(k) ** 2 for k, v in rank0.items())


def test_a_failing_seed_is_reported_on_every_rank(tmp_path: pathlib.Path, torchrun) -> None:
    for got in launch("fail", tmp_path, torchrun):  # rank 1 did not fail, yet knows, no hang
        assert got["error"] == "DistributedError"
        assert "rank 0 (seeds 3, 4, 9) failed: ValueError: seed 4 is bad" in got["message"]


def test_ranks_given_different_seeds_are_refused(tmp_path: pathlib.Path, torchrun) -> None:
    for got in launch("mismatch", tmp_path, torchrun):
        assert got["error"] == "DistributedError"
        assert "rank 0: [3, 1, 4, 5, 9]; rank 1: [3, 1, 4]" in got["message"]


def test_seed_sweep_flag_matches_the_bench_code() -> None:
    """A spec says ``seed_sweep`` exactly where its bench runs seeds through map_seeds (the
    flag lets torchrun in; a bench without it would run whole on every rank)."""
    models = pathlib.Path(D.__file__).resolve().parents[1] / "models"
    for name in model_names():
        spec = get_model(name)
        if not isinstance(spec.bench, str):
            assert not spec.seed_sweep, name
            continue
        folder = models / spec.bench.split(":")[0].split(".")[2]
        code = "".join(p.read_text() for p in folder.glob("*.py"))
        uses = "map_seeds(" in code or "run_over_seeds(" in code or "run_seeds(" in code
        assert spec.seed_sweep == uses, name


def test_info_says_which_benches_share_seeds(capsys: pytest.CaptureFixture) -> None:
    from neuroedge.cli import main

    for name, shares in (("uq.last_layer", True), ("alloc.envy_free", False)):
        assert main(["info", name]) == 0
        assert ("shares out over torchrun" in capsys.readouterr().out) == shares


@pytest.mark.parametrize(
    ("argv", "rank", "expected"),
    [
        (["bench", "alloc.envy_free"], "0", "no seed sweep to share over torchrun's 2 processes"),
        (["train", "snn.lif_convnet"], "1", "snn.lif_convnet does not train data-parallel"),
    ],
)
def test_cli_refuses_a_torchrun_launch_it_cannot_share_out(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    argv: list[str],
    rank: str,
    expected: str,
) -> None:
    """A bench without a seed sweep, or a model that does not train data-parallel, would run
    whole on every process: refused before any work."""
    from neuroedge.cli import main

    for key, value in {"RANK": rank, "WORLD_SIZE": "2", "LOCAL_RANK": rank}.items():
        monkeypatch.setenv(key, value)
    assert main([*argv, "--out", str(tmp_path / "r")]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    assert [n for n in model_names() if get_model(n).data_parallel] == ["snn.unisparse"]


def test_cli_sweep_over_two_ranks_equals_one_process(tmp_path: pathlib.Path, torchrun) -> None:
    """The report rank 0 writes equals a one-process run's, timings aside."""
    args = ["bench", "safety.hair_trigger", "--config", "seeds=[0,1]", "workers=1"]
    args += ["steps=60", "audit_batches=1", "secrets=64", "rescale_c=[1,100]"]
    hist = ["--history", str(tmp_path / "h.sqlite")]
    torchrun(["-m", "neuroedge.cli", *args, "--out", str(tmp_path / "two"), *hist], tmp_path)
    one = subprocess.run(
        [sys.executable, "-m", "neuroedge.cli", *args, "--out", str(tmp_path / "one"), *hist],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )
    assert one.returncode == 0, one.stderr[-3000:]
    docs = [json.loads((tmp_path / d / "report.json").read_text()) for d in ("two", "one")]

    def values(doc: dict) -> dict:
        return {
            (r["variant"], k): m["value"]
            for r in doc["rows"]
            for k, m in r["metrics"].items()
            if not k.endswith("_s")  # wall times
        }

    assert values(docs[0]) == values(docs[1]) and len(values(docs[0])) > 20
    assert docs[0]["claim"] == docs[1]["claim"] and docs[0]["config"] == docs[1]["config"]
    assert not list(tmp_path.glob("two/rank*"))  # one report, rank 0's
