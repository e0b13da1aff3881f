"""apr.conrad's command line on a user's repository: a repair, and every bad flag, history
line and test id refused before the repository is copied, naming what is wrong; a key the
stage model never reads refused there and by ``neuroedge run`` / ``bench`` alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def write_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    """A user's repository of ``files`` (relative path: text) under ``tmp_path / "repo"``."""
    repo = tmp_path / "repo"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    return repo


def _user_repo(tmp_path: Path) -> Path:
    shop = (
        "def take_items(items, count):\n"
        '    """The first count items."""\n'
        "    return list(items)[:count - 1]\n\n\n"
        "def price_cents(euros):\n    return euros * 100\n"
    )
    tests = (
        "from shop import take_items, price_cents\n\n"
        "def test_take():\n    got, want = take_items([4, 5, 6], 2), [4, 5]\n"
        "    assert got == want, (got, want)\n\n"
        "def test_price():\n    assert price_cents(2) == 200\n"
    )
    return write_repo(tmp_path, {"shop.py": shop, "tests/test_shop.py": tests})


# a fixed past issue whose exemplar fits the user repository's bug (one item short)
HISTORY_ROW = {
    "issue": "listing returns one item too few",
    "path": "lib.py",
    "buggy": "def head(xs, k):\n    return xs[:k - 1]",
    "fixed": "def head(xs, k):\n    return xs[:k]",
    "symptom": "one_item_short",
}


def test_command_line_repairs_a_users_repository(tmp_path: Path, capsys) -> None:
    from neuroedge.models.conrad.__main__ import main

    repo = _user_repo(tmp_path)
    hist = tmp_path / "history.jsonl"
    hist.write_text(json.dumps(HISTORY_ROW) + "\n")
    out = tmp_path / "fix.diff"
    args = [str(repo), "tests/test_shop.py::test_take", "take_items returns one item too few"]
    assert main([*args, "--history", str(hist), "--out", str(out), "--samples", "1"]) == 0
    assert "+    return list(items)[:count]" in out.read_text()
    ref = tmp_path / "ref.diff"
    ref.write_text("")  # the patch file gets the usual mode, not mkstemp's 0600
    assert out.stat().st_mode & 0o777 == ref.stat().st_mode & 0o777
    assert "[:count - 1]" in (repo / "shop.py").read_text()  # the user's files are untouched
    assert main([*args, "--json"]) in (0, 1)
    assert "symptom" in json.loads(capsys.readouterr().out)


def test_command_line_names_bad_input(tmp_path: Path, capsys) -> None:
    from neuroedge.models.conrad.__main__ import main

    repo = _user_repo(tmp_path)
    assert main([str(repo), "tests/test_shop.py::test_price", "x"]) == 2
    assert "passes already" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"issue": "x", "path": "a.py", "buggy": "def f(): pass"}\n')
    assert main([str(repo), "tests/test_shop.py::test_take", "x", "--history", str(bad)]) == 2
    assert "bad.jsonl:1: missing ['fixed']" in capsys.readouterr().err
    bad.write_text('\n{"issue": "x"\n')
    assert main([str(repo), "tests/test_shop.py::test_take", "x", "--history", str(bad)]) == 2
    assert "bad.jsonl:2: not JSON" in capsys.readouterr().err
    assert main([str(tmp_path / "none"), "t.py::t", "x"]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main([str(repo), "test_shop", "x"]) == 2
    row = {"issue": 5, "path": "a.py", "buggy": "def f(): pass", "fixed": "def f(): return 1"}
    bad.write_text(json.dumps({**row, "symptom": ["a"]}) + "\n")
    assert main([str(repo), "tests/test_shop.py::test_take", "x", "--history", str(bad)]) == 2
    assert (
        "bad.jsonl:1: fields {'issue': 'int', 'symptom': 'list'} must be" in capsys.readouterr().err
    )
    take = [str(repo), "tests/test_shop.py::test_take", "x"]
    for flags, said in [
        (["--timeout", "nan"], "--timeout=nan: expected a finite number > 0"),
        (["--timeout", "0"], "--timeout=0.0: expected a finite number > 0"),
        (["--temperature", "nan"], "--temperature=nan"),
        (["--top-k", "0"], "--top-k=0: expected an integer >= 1"),
        (["--samples", "0"], "--samples=0"),
        (["--out", str(repo)], f"--out {repo}: {repo}: is a directory"),
    ]:
        assert main([*take, *flags]) == 2 and said in capsys.readouterr().err, flags
    assert main([str(repo), "tests/nope.py::test_x", "x"]) == 2
    assert "no file tests/nope.py in the repository" in capsys.readouterr().err
    assert main([str(repo), "tests/test_shop.py::test_nope", "x"]) == 2
    err = capsys.readouterr().err
    assert "defines no top-level function 'test_nope'" in err and "'test_take'" in err


def test_a_method_of_a_class_is_repaired_in_place(tmp_path: Path) -> None:
    from neuroedge.models.conrad.__main__ import main

    jobs = (
        "class Queue:\n\n    def __init__(self, items):\n        self.items = items\n\n"
        "    def peek(self, n):\n        # the first n items\n        return self.items[:n - 1]\n"
    )
    tests = (
        "from jobs import Queue\n\ndef test_peek():\n"
        "    got, want = Queue([1, 2, 3]).peek(2), [1, 2]\n    assert got == want, (got, want)\n"
    )
    repo = write_repo(tmp_path, {"jobs.py": jobs, "tests/test_queue.py": tests})
    out = tmp_path / "fix.diff"
    args = [str(repo), "tests/test_queue.py::test_peek", "Queue.peek returns one item too few"]
    assert main([*args, "--out", str(out)]) == 0
    diff = out.read_text()
    assert "-        return self.items[:n - 1]" in diff and "+        return self.items[:n]" in diff
    assert not any(x.startswith("-") and "# the first" in x for x in diff.splitlines())


def test_a_stopped_repair_exits_143_and_leaves_no_copy_nor_test_run(tmp_path: Path) -> None:
    """SIGTERM while the user's tests run in the sandbox: it died with -15, its copy of the
    repository left in TMPDIR and the test runner orphaned, still running."""
    import os
    import signal
    import time

    from test_signals import descendants, descendants_alive, spawn

    repo = _user_repo(tmp_path)
    slow = "import time\n\ndef test_slow():\n    time.sleep(60)\n"
    (repo / "tests" / "test_slow.py").write_text(slow)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    argv = ["conrad", str(repo), "tests/test_slow.py::test_slow", "the slow test hangs"]
    code = (  # python -m neuroedge.models.conrad ARGS
        f"import runpy, sys; sys.argv = {argv + ['--samples', '1']!r}; "
        "runpy.run_module('neuroedge.models.conrad', run_name='__main__')"
    )
    run = spawn(code, tmp_path, env={"TMPDIR": str(scratch)})
    try:
        deadline = time.monotonic() + 60
        while not list(scratch.glob("conrad-*")) and time.monotonic() < deadline:
            time.sleep(0.1)  # the repository copied into its sandbox
        time.sleep(1.0)  # its tests under way
        assert run.poll() is None and list(scratch.glob("conrad-*"))
        below = descendants(run.pid) - {run.pid}
        os.kill(run.pid, signal.SIGTERM)
        _, err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
    assert run.returncode == 143, err
    assert err.strip() == "neuroedge: terminated (SIGTERM)"
    assert not list(scratch.glob("conrad-*"))
    deadline = time.monotonic() + 10
    while (left := descendants_alive(below)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, "the sandbox's test run outlived the command"


def test_a_sandbox_that_fails_while_copying_leaves_no_folder(tmp_path: Path, monkeypatch) -> None:
    import tempfile

    import pytest
    from neuroedge.models.conrad.protocol import ConradError
    from neuroedge.models.conrad.sandbox import Sandbox

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(ConradError, match="not a folder"):
        Sandbox(tmp_path / "missing")
    assert not list(tmp_path.glob("conrad-*"))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (["decode=generate"], "decode='generate' with model='scripted': decode is how a local"),
        (["decode=score"], "decode='score' with model='scripted'"),
        (['lm_stages=["edit_think"]'], r"lm_stages=\['edit_think'\] with model='scripted'"),
        (
            ["model=endpoint", "endpoint=http://127.0.0.1:9/v1", "llm_model=m", "decode=score"],
            "decode='score' with model='endpoint': .* always writes its reply",
        ),
    ],
)
@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_key_the_stage_model_never_reads_is_refused(command, config, message, tmp_path, capsys):
    """decode=generate with the scripted model ran the scripted model, the key never read."""
    import re

    from neuroedge.cli import main

    out = tmp_path / "r"
    extra = ["--out", str(out)] if command == "bench" else ["--repeats", "1"]
    assert main([command, "apr.conrad", *extra, "--config", "targets=7", *config]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "leave" in err and "Traceback" not in err
    assert not out.exists()


def test_the_repair_command_refuses_decode_with_the_scripted_model(tmp_path, capsys):
    from neuroedge.models.conrad.__main__ import main

    args = [str(tmp_path), "tests/test_x.py::test_y", "issue"]
    assert main([*args, "--decode", "generate"]) == 2
    assert "error: decode='generate' with model='scripted'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "config", "message"),
    [
        (
            "run",
            ["method=baseline", "samples=3"],
            r"samples=3 \(forward .*\) with method='baseline'",
        ),
        ("run", ["method=conrad", "temperature=0.3"], "temperature=0.3 .* method='conrad': only"),
        ("run", ["method=forward", "top_k=2"], "top_k=2 .* only the conrad or no_guardian arm"),
        ("bench", ['arms=["baseline","conrad"]', "samples=4"], r"arms=\['baseline', 'conrad'\]"),
        ("bench", ['arms=["forward"]', "top_k=2"], r"top_k=2 .* with arms=\['forward'\]"),
    ],
)
def test_a_key_no_arm_run_reads_is_refused(command, config, message, tmp_path, capsys):
    """method=baseline samples=3 temperature=0.3 top_k=2 reached the repair, all three unread
    (samples and temperature are forward exploration's, top_k the exemplar retrieval's)."""
    import re

    from neuroedge.cli import main

    out = tmp_path / "r"
    extra = ["--out", str(out)] if command == "bench" else ["--repeats", "1"]
    assert main([command, "apr.conrad", *extra, "--config", "targets=7", *config]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "and it is not run; leave" in err, err
    assert "Traceback" not in err and not out.exists()


def test_keys_an_arm_run_reads_are_accepted():
    from neuroedge.models.conrad.experiment import check_config

    assert check_config({"samples": 4, "top_k": 2})["samples"] == 4  # the default arms: all
    assert check_config({"arms": ["no_guardian"], "top_k": 2})["arms"] == ["no_guardian"]
    assert check_config({"samples": 2, "temperature": 0.5}, "forward")["arms"] == ["forward"]
    assert check_config({"top_k": 3}, "conrad")["top_k"] == 3


@pytest.mark.parametrize(("config", "targets"), [({"targets": 3}, 3), ({}, 7)])
def test_smoke_keeps_the_users_targets(config, targets, monkeypatch):
    """smoke=true targets=3 built a repository of 7 open issues (smoke overwrote targets)."""
    import neuroedge.models.conrad.corpus as corpus
    from neuroedge.models.conrad.spec import SPEC

    asked = []

    def generate(seed, n):
        asked.append(n)
        raise RuntimeError("stop before the repository is written")

    monkeypatch.setattr(corpus, "generate", generate)
    with pytest.raises(RuntimeError, match="stop before"):
        SPEC.build({"smoke": True, **config})
    assert asked == [targets]
