"""A repository sandbox: a temporary copy, SEARCH/REPLACE edits, tests in a child process.

``Sandbox(files)`` writes the repository into a temporary folder (removed on exit). ``edit``
applies one SEARCH/REPLACE block, which must match exactly once (``ConradError`` names the
file and the number of matches otherwise), writing the file atomically with
``neuroedge.atomic``; ``patched`` does the same and restores the file afterwards. ``run``
executes tests with ``runner.py`` in ``python -I -B`` (no user site, no bytecode: a file
restored within the same second must not be served from a stale ``.pyc``) under a timeout.
``diagnose`` reads a failing test's symptom.
"""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from neuroedge.atomic import write_text
from neuroedge.models.conrad.protocol import ConradError
from neuroedge.models.conrad.runner import MARK

RUNNER = Path(__file__).with_name("runner.py")
# the labels ``symptom`` gives (besides "exception:<ErrorName>")
SYMPTOMS = (
    "passed",
    "none_input",
    "unknown",
    "stale_result",
    "predicate_flipped",
    "one_item_short",
    "one_item_extra",
    "wrong_items",
    "wrong_mapping_values",
    "wrong_mapping_keys",
    "power_of_ten_scale",
    "wrong_value",
)


@dataclass(frozen=True)
class Outcome:
    """One test's result."""

    test: str  # "path::name"
    ok: bool
    exc: str = ""  # the exception's type name, "" when it passed
    message: str = ""


class Sandbox:
    """A temporary copy of a repository (``files``: relative path -> text, or a folder)."""

    def __init__(self, files: Mapping[str, str] | str | os.PathLike[str], timeout: float = 30.0):
        self.timeout = timeout
        self.root = Path(tempfile.mkdtemp(prefix="conrad-"))
        try:  # __exit__ does not run for a failure (or a stop signal) in here
            if isinstance(files, Mapping):
                for rel, text in files.items():
                    write_text(self.root / rel, text)
            else:
                src = Path(files)
                if not src.is_dir():
                    raise ConradError(f"repository {src}: not a folder")
                shutil.copytree(
                    src,
                    self.root,
                    dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".git", "__pycache__", ".venv"),
                )
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def read(self, rel: str) -> str:
        path = self.root / rel
        if not path.is_file():
            raise ConradError(f"{rel}: no such file in the repository")
        return path.read_text(encoding="utf-8")

    def edit(self, rel: str, search: str, replace: str) -> str:
        """Apply one SEARCH/REPLACE block to ``rel``; returns the file's previous text."""
        old = self.read(rel)
        count = old.count(search) if search else 0
        if count != 1:
            raise ConradError(
                f"{rel}: the SEARCH block must match exactly once, it matches {count} times"
            )
        write_text(self.root / rel, old.replace(search, replace))
        return old

    @contextmanager
    def patched(self, rel: str, search: str, replace: str) -> Iterator[None]:
        old = self.edit(rel, search, replace)
        try:
            yield
        finally:
            write_text(self.root / rel, old)

    def run(self, tests: Sequence[str] = ()) -> list[Outcome]:
        """Run ``tests`` (``path::name`` ids); all of ``tests/test_*.py`` and ``test_*.py``
        when empty."""
        cmd = [sys.executable, "-I", "-B", str(RUNNER), str(self.root), *tests]
        try:
            proc = subprocess.run(  # the child (-I, a C locale: UTF-8 mode) writes UTF-8
                cmd,
                capture_output=True,
                encoding="utf-8",
                errors="replace",
                timeout=self.timeout,
            )
        except subprocess.TimeoutExpired:
            return [
                Outcome(t, False, "Timeout", f"over {self.timeout:g} s") for t in tests or ["*"]
            ]
        out = [
            Outcome(**json.loads(line[len(MARK) :]))
            for line in proc.stdout.splitlines()
            if line.startswith(MARK)
        ]
        if proc.returncode != 0 or (tests and len(out) < len(tests)):
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            missing = [t for t in tests if t not in {o.test for o in out}]
            out += [Outcome(t, False, "RunnerError", tail[0]) for t in missing or ["*"]]
        return out


def all_pass(outcomes: Sequence[Outcome]) -> bool:
    return bool(outcomes) and all(o.ok for o in outcomes)


def _literal(message: str) -> tuple | None:
    try:
        value = ast.literal_eval(message)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, tuple) and len(value) in (2, 3) else None


def _compare(got: object, want: object) -> str:
    if isinstance(got, bool) and isinstance(want, bool):
        return "predicate_flipped"
    if isinstance(got, list) and isinstance(want, list):
        if len(got) == len(want) - 1:
            return "one_item_short"
        return "one_item_extra" if len(got) == len(want) + 1 else "wrong_items"
    if isinstance(got, dict) and isinstance(want, dict):
        return "wrong_mapping_values" if got.keys() == want.keys() else "wrong_mapping_keys"
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (got, want))
    if numbers and got and want:
        k = math.log10(abs(got / want))
        if abs(k - round(k)) < 1e-9 and round(k) != 0:
            return "power_of_ten_scale"
    return "wrong_value"


def diagnose(outcome: Outcome) -> str:
    """The failing test's symptom: ``none_input`` (an AttributeError / TypeError on None),
    for ``assert got == want, (got, want[, earlier])``: ``stale_result`` (got equals the
    earlier call's result), ``one_item_short`` / ``one_item_extra``, ``predicate_flipped``,
    ``power_of_ten_scale``, ``wrong_mapping_values``, ``wrong_value``; ``exception:<Type>``
    for other errors; ``passed``; ``unknown`` when the message carries no comparison."""
    if outcome.ok:
        return "passed"
    if outcome.exc in ("AttributeError", "TypeError") and "NoneType" in outcome.message:
        return "none_input"
    if outcome.exc != "AssertionError":
        return f"exception:{outcome.exc}"
    parsed = _literal(outcome.message)
    if parsed is None:
        return "unknown"
    if len(parsed) == 3 and parsed[0] == parsed[2] and parsed[0] != parsed[1]:
        return "stale_result"
    return _compare(parsed[0], parsed[1])
