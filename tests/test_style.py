"""STYLE.md, enforced: ruff lint and format clean, files under 400 lines, functions under 60."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("sdk", "backends", "models", "export", "bench", "tests")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60

needs_ruff = pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None, reason="ruff (the dev extra) is not installed"
)


def sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (REPO / folder).rglob("*.py"))


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *FOLDERS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@needs_ruff
def test_ruff_lint_is_clean() -> None:
    result = ruff("check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_ruff
def test_ruff_format_leaves_every_file_unchanged() -> None:
    result = ruff("format", "--check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_file_is_under_the_line_budget() -> None:
    over = {
        str(p.relative_to(REPO)): n
        for p in sources()
        if (n := p.read_text().count("\n")) > MAX_FILE_LINES
    }
    assert not over, f"files over {MAX_FILE_LINES} lines: {over}"


def test_every_function_is_under_the_line_budget() -> None:
    over = {}
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    over[f"{path.relative_to(REPO)}:{node.lineno} {node.name}"] = length
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: {over}"
