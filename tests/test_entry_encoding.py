"""The entry points (``neuroedge``, ``python -m neuroedge.models.scout`` and ``.conrad``) on
an ASCII stdout (LC_ALL=C with PYTHONUTF8=0, PYTHONIOENCODING=ascii): a result holding a
user's non-ASCII text is printed with backslash escapes, not lost to a UnicodeEncodeError;
and a reader that leaves ends them quietly with 141, buffered or not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_conrad_cli import HISTORY_ROW

from neuroedge.cli_exit import error_status

QUESTION = "What is the radio channel of agent SIERRA-57?"
DOCUMENT = (
    "Agent DELTA-85 left Zagreb by train.\n"
    "The radio channel of agent SIERRA-57 is Kanal-\u00dcber-7\u00d7.\n"
    "The archive in Tbilisi catalogued 96 reports.\n"
)
ASCII = {  # two ways a user's stdout ends up ASCII
    "C locale": {"LC_ALL": "C", "PYTHONUTF8": "0"},
    "PYTHONIOENCODING": {"PYTHONIOENCODING": "ascii"},
}


def _env(extra: dict[str, str], unbuffered: bool = False) -> dict[str, str]:
    """This process's environment, buffered as a user's stdout is unless ``unbuffered``
    (this machine sets PYTHONUNBUFFERED=1), with ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "PYTHONIOENCODING")}
    env.update(extra, NEUROEDGE_DEBUG="0", OMP_NUM_THREADS="1")
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, env=env, cwd=cwd, timeout=120
    )


def _user_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose source holds non-ASCII text and whose failing test prints some
    (the sandbox's child output), and a history that repairs it."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "shop.py").write_text(
        'def take_items(items, count):\n    """The first count items (Eintr\u00e4ge \u00d7)."""\n'
        "    return list(items)[:count - 1]\n",
        encoding="utf-8",
    )
    (repo / "tests" / "test_shop.py").write_text(
        "from shop import take_items\n\n"
        'def test_take():\n    print("pr\u00fcfe take_items")\n'
        "    got, want = take_items([4, 5, 6], 2), [4, 5]\n"
        "    assert got == want, (got, want)\n",
        encoding="utf-8",
    )
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps(HISTORY_ROW) + "\n")
    return repo, history


def _conrad_args(tmp_path: Path) -> list[str]:
    repo, history = _user_repo(tmp_path)
    return [
        "-m",
        "neuroedge.models.conrad",
        str(repo),
        "tests/test_shop.py::test_take",
        "take_items returns one item too few",
        "--history",
        str(history),
        "--samples",
        "1",
    ]


def _scout_args(tmp_path: Path) -> list[str]:
    doc = tmp_path / "doc.txt"
    doc.write_text(DOCUMENT, encoding="utf-8")
    return ["-m", "neuroedge.models.scout", str(doc), QUESTION]


@pytest.mark.parametrize("kind", sorted(ASCII))
def test_scout_prints_a_non_ascii_answer_on_an_ascii_stdout(tmp_path: Path, kind: str) -> None:
    proc = _run(_scout_args(tmp_path), _env(ASCII[kind]), tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()  # was 1, a UnicodeEncodeError traceback
    assert b"answer: Kanal-\\xdcber-7\\xd7" in proc.stdout
    assert b"grounded: True" in proc.stdout


@pytest.mark.parametrize("kind", sorted(ASCII))
def test_conrad_prints_its_patch_on_an_ascii_stdout(tmp_path: Path, kind: str) -> None:
    """The patch's context holds the user's non-ASCII source; the user's test prints some
    (the sandbox decodes its child's output as UTF-8, not as the locale's ASCII)."""
    proc = _run(_conrad_args(tmp_path), _env(ASCII[kind]), tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err  # was 1 (conrad's "no patch") with a traceback
    assert b"+    return list(items)[:count]" in proc.stdout
    assert b"(Eintr\\xe4ge \\xd7)" in proc.stdout and "Traceback" not in err


def test_run_prints_and_writes_a_non_ascii_output_on_an_ascii_stdout(tmp_path: Path) -> None:
    """``neuroedge run``: the outputs are printed and --output written (was rc 2, read as
    bad input, with the rest of the output and the file lost)."""
    import numpy as np

    from neuroedge.models.scout.spec import example

    doc = np.frombuffer(DOCUMENT.encode("utf-8"), np.uint8)
    np.savez(tmp_path / "in.npz", document=doc, question=example(0)["question"])
    args = ["-m", "neuroedge", "run", "ltu.scout", "--input", "in.npz", "--repeats", "1"]
    proc = _run([*args, "--output", "out.npz"], _env(ASCII["C locale"]), tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"text 'Kanal-\\xdcber-7\\xd7'" in proc.stdout
    assert b"outputs written to out.npz" in proc.stdout and (tmp_path / "out.npz").is_file()


def test_an_encoding_error_is_not_read_as_bad_input() -> None:
    """A UnicodeEncodeError is neuroedge's own failure to print: an internal error (1, a
    traceback), never 2, "bad input", though it is a ValueError."""
    err = UnicodeEncodeError("ascii", "\u00fc", 0, 1, "ordinal not in range(128)")
    with pytest.raises(UnicodeEncodeError):
        error_status(err, False)
    assert error_status(ValueError("a bad value"), False) == 2


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("entry", ["scout", "conrad"])
def test_a_closed_pipe_ends_python_dash_m_quietly(
    tmp_path: Path, entry: str, unbuffered: bool
) -> None:
    """As ``neuroedge``: 141 and nothing on stderr (was 120 and "Exception ignored ...
    BrokenPipeError" buffered, 1 and a traceback unbuffered)."""
    args = _scout_args(tmp_path) if entry == "scout" else _conrad_args(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env({}, unbuffered),
        cwd=tmp_path,
    )
    proc.stdout.close()  # the reader leaves before the first line, as `| head -0` would
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err.decode()
    assert err.decode() == ""


def test_the_callers_streams_get_their_own_error_handlers_back(tmp_path: Path) -> None:
    """``cli.main`` called from Python: stdout and stderr escape only while it runs (they
    kept ``neuroedge.escape`` for good, so the caller's own prints changed)."""
    code = (
        "import sys\nimport neuroedge.cli as cli\n"
        "sys.stderr.reconfigure(errors='strict')\n"  # a caller's own choice, restored too
        "before = (sys.stdout.errors, sys.stderr.errors)\n"
        "assert cli.main(['list']) == 0\n"
        "print('HANDLERS', before == (sys.stdout.errors, sys.stderr.errors), before)\n"
    )
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    run = _run(["-c", code], env, tmp_path)
    assert run.returncode == 0, run.stderr
    assert b"HANDLERS True ('strict', 'strict')" in run.stdout


def test_a_paths_undecodable_bytes_print_as_they_were_on_an_ascii_stdout(tmp_path: Path) -> None:
    """A file name read in the C locale holds its non-ASCII bytes as surrogates: they are
    written back as those bytes (a path the user can copy), other text as backslash escapes."""
    (tmp_path / os.fsdecode(b"x_\xc3\xbc")).write_text("")  # a UTF-8 name: x_ and u-umlaut
    code = (
        "import os, sys\nfrom neuroedge.cli_exit import readable_output\n"
        "with readable_output():\n    print(*os.listdir('.'), 'caf\\u00e9')\n"
    )
    proc = _run(["-c", code], _env(ASCII["C locale"]), tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == b"x_\xc3\xbc caf\\xe9\n"  # not x_\udcc3\udcbc
