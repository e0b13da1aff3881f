"""What report.json records of how it was produced: ``provenance`` (versions, git commit,
thread counts) in every report; the generic bench's settled ``config`` and ``weights`` (the
checkpoint's sha256 and what it saved of its training); numpy values in a config; and the
history row is report.json itself.

The checkpoints are saved as ``train.train`` saves them, with untrained weights; the one
training run is one epoch of a 1-channel net on 1 time step (well under a second)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from neuroedge.bench import provenance as prov
from neuroedge.bench.history import runs
from neuroedge.bench.report import build_document, write_report
from neuroedge.checkpoints import save_checkpoint
from neuroedge.cli import main
from neuroedge.models.lif_convnet import train
from neuroedge.registry import get_model
from neuroedge.types import Measurement, Report

SMALL = {"steps": 2, "channels1": 2, "channels2": 2, "epochs": 1}


def _rows() -> list[Report]:
    return [Report("m", "host", metrics={"accuracy": Measurement(0.5, "fraction")})]


def _save(path: Path, seed: int, **extra: object) -> Path:
    cfg = train.check_config({**SMALL, "seed": seed})
    payload = {"state_dict": train.make_net(cfg).state_dict(), "config": cfg, **extra}
    return save_checkpoint(path, {**payload, "metrics": {"accuracy": 0.5}})


def test_every_report_records_versions_commit_and_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    write_report(build_document("m", _rows()), tmp_path / "r", history=tmp_path / "h.sqlite")
    got = json.loads((tmp_path / "r" / "report.json").read_text())["provenance"]
    assert {"neuroedge", "torch", "numpy"} <= set(got["versions"])
    assert got["versions"]["numpy"] == np.__version__
    assert got["threads"] == {"torch_intra_op": torch.get_num_threads(), "OMP_NUM_THREADS": "3"}
    root = prov.source_root()
    if root is None:
        assert got["git"] == {"commit": None, "dirty": None}
    else:  # the commit read from the files is git's own
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        if head.returncode == 0:
            assert got["git"]["commit"] == head.stdout.strip()
            assert got["git"]["dirty"] in (True, False)


def test_the_commit_is_read_from_head_loose_or_packed_refs_and_never_fails(tmp_path: Path) -> None:
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "packed-refs").write_text("# pack-refs\n" + "a" * 40 + " refs/heads/main\n^" + "c" * 40)
    assert prov.git_commit(tmp_path) == "a" * 40  # packed
    (git / "refs" / "heads" / "main").write_text("b" * 40 + "\n")
    assert prov.git_commit(tmp_path) == "b" * 40  # a loose ref wins over the packed one
    (git / "HEAD").write_text("d" * 40 + "\n")
    assert prov.git_commit(tmp_path) == "d" * 40  # detached
    (git / "HEAD").write_text("ref: refs/heads/gone\n")
    (git / "packed-refs").unlink()
    assert prov.git_commit(tmp_path) is None
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {git}\n")
    (git / "HEAD").write_text("d" * 40)
    assert prov.git_commit(worktree) == "d" * 40
    assert prov.git_commit(tmp_path / "nothing") is None


def test_numpy_values_in_a_config_are_written_as_json_numbers(tmp_path: Path) -> None:
    """A numpy seed passed the config checks: the report must not fail after the run."""
    config = {
        "seed": np.int64(1),
        "rate": np.float32(0.5),
        "on": np.bool_(True),
        "sizes": np.arange(2),
        "bad": np.float64("nan"),
    }
    write_report(build_document("m", _rows(), config=config), tmp_path, history=tmp_path / "h")
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["config"] == {"seed": 1, "rate": 0.5, "on": True, "sizes": [0, 1], "bad": None}
    assert doc["non_finite"] == ["config.bad (nan)"]


def test_the_history_row_is_report_json(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    write_report(build_document("m", _rows(), config={"seed": 2}), tmp_path, history=db)
    assert runs(db)[-1] == json.loads((tmp_path / "report.json").read_text())


def _bench(out: Path, checkpoint: Path) -> dict:
    args = ["bench", "snn.lif_convnet", "--backend", "host", "--repeats", "2", "--out", str(out)]
    args += ["--history", str(out.parent / "h.sqlite"), "--config", f"checkpoint={checkpoint}"]
    assert main([*args, "eval_batch=400"]) == 0
    return json.loads((out / "report.json").read_text())


def test_the_generic_bench_records_the_settled_config_and_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two checkpoints at one path: each report says which weights and settings it ran."""
    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path / "home"))
    ckpt = tmp_path / "lif.pt"
    docs = {}
    for seed in (3, 0):
        threads = {"torch_intra_op": 7, "OMP_NUM_THREADS": None} if seed else None
        _save(ckpt, seed, **({"threads": threads} if threads else {}))
        docs[seed] = _bench(tmp_path / f"r{seed}", ckpt)
        trained = train.check_config({**SMALL, "seed": seed})
        settled = {k: trained[k] for k in ("steps", "seed", "channels1", "channels2")}
        spec = get_model("snn.lif_convnet")
        user = {"checkpoint": str(ckpt), "eval_batch": 400}
        assert docs[seed]["config"] == {
            **spec.default_config,
            **user,
            **settled,
            "built_net": trained,
        }
        weights = docs[seed]["weights"]
        assert weights["sha256"] == hashlib.sha256(ckpt.read_bytes()).hexdigest()
        assert weights["bytes"] == ckpt.stat().st_size and weights["path"] == str(ckpt)
        assert weights["trained_with"] == trained
        assert weights["train_threads"] == (threads or prov.UNKNOWN_THREADS)
    assert docs[3]["weights"]["sha256"] != docs[0]["weights"]["sha256"]


def test_an_untrained_bench_says_so(tmp_path: Path) -> None:
    args = ["bench", "snn.lif_convnet", "--backend", "host", "--repeats", "2"]
    args += ["--out", str(tmp_path / "r"), "--history", str(tmp_path / "h.sqlite")]
    assert main([*args, "--config", "untrained=true", "steps=2", "eval_batch=400"]) == 0
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["weights"]["trained"] is False
    assert doc["config"]["steps"] == 2 and doc["config"]["built_net"]["steps"] == 2


def test_training_saves_its_thread_counts(tmp_path: Path) -> None:
    import torch

    from neuroedge.checkpoints import load_checkpoint

    cfg = {"steps": 1, "channels1": 1, "channels2": 1, "epochs": 1, "batch": 512}
    done = train.train(cfg, out=tmp_path / "t.pt", progress=False)
    saved = load_checkpoint(done["path"])["threads"]
    want = os.environ.get("OMP_NUM_THREADS")
    assert saved == {"torch_intra_op": torch.get_num_threads(), "OMP_NUM_THREADS": want}


def test_the_hash_is_of_the_file_loaded_when_it_is_replaced_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neuroedge import checkpoints

    path = _save(tmp_path / "c.pt", 3)
    load = checkpoints.load_checkpoint
    calls = []

    def load_then_replace(p: Path, required: tuple[str, ...] = ()) -> dict:
        payload = load(p, required)
        if not calls:  # another process saves a new checkpoint right after the read
            _save(path, 0)
        calls.append(p)
        return payload

    monkeypatch.setattr(checkpoints, "load_checkpoint", load_then_replace)
    payload, identity = checkpoints.read_checkpoint(path)
    assert len(calls) == 2 and payload["config"]["seed"] == 0
    assert identity["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_dirty_is_gits_answer_and_reading_it_leaves_the_index_alone(tmp_path: Path) -> None:
    """A clean checkout reads False, an edited tracked file True; and git status, which
    refreshes (rewrites) the index of an edited tree, must not touch the user's index."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env = {**os.environ, **env, "GIT_COMMITTER_EMAIL": "t@t"}

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-C", str(tmp_path), *args], check=True, env=env, capture_output=True
        )

    try:
        git("init", "-q")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no git here")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("commit", "-qm", "one")
    assert prov.git_dirty(tmp_path) is False
    (tmp_path / "a.txt").write_text("two\n")
    index = tmp_path / ".git" / "index"
    before = index.stat().st_mtime_ns
    time.sleep(0.02)
    assert prov.git_dirty(tmp_path) is True
    assert index.stat().st_mtime_ns == before
