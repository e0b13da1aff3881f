"""Test runner executed in a child process: ``python -I runner.py REPO [TEST_ID ...]``.

Imports each ``tests/test_*.py`` and ``test_*.py`` of REPO (or the files of the given
``path::name`` ids) and calls every ``test_*`` function; prints one JSON object per test on
stdout, after ``MARK``: ``{"test": id, "ok": bool, "exc": type name or "", "message":
str(exception)}``; what the tests print goes to stderr.
Plain-assert test files need no pytest; the parent process enforces the timeout. Kept free
of neuroedge imports so the child starts in tens of milliseconds.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

MARK = "@@conrad-outcome@@ "  # marks the runner's lines among whatever else reaches stdout


def _load(path: Path, repo: Path) -> object:
    rel = path.relative_to(repo).with_suffix("").as_posix()
    name = "_conrad_" + rel.replace("/", "__")  # tests/test_a.py and test_a.py stay apart
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    repo = Path(argv[0]).resolve()
    sys.path.insert(0, str(repo))
    records, sys.stdout = sys.stdout, sys.stderr  # what the tests print must not mix in

    def report(test: str, err: BaseException | None) -> None:
        rec = {"test": test, "ok": err is None, "exc": "", "message": ""}
        if err is not None:
            rec.update(exc=type(err).__name__, message=str(err))
        records.write(MARK + json.dumps(rec) + "\n")
        records.flush()

    wanted = argv[1:]
    found = [*(repo / "tests").glob("test_*.py"), *repo.glob("test_*.py")]
    files = sorted({w.split("::")[0] for w in wanted}) or sorted(
        p.relative_to(repo).as_posix() for p in found
    )
    for rel in files:
        try:
            module = _load(repo / rel, repo)
        except Exception as err:  # a broken patch can break the import: report, go on
            report(rel, err)
            continue
        tests = sorted(n for n, f in vars(module).items() if n.startswith("test_") and callable(f))
        for name in tests:
            tid = f"{rel}::{name}"
            if wanted and tid not in wanted:
                continue
            try:
                getattr(module, name)()
            except Exception as err:  # the outcome of the test is the data we report
                report(tid, err)
            else:
                report(tid, None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
