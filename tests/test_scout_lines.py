"""ltu.scout's line numbers are those of grep -n and editors: lines end at \\n, \\r\\n or \\r
only (not at form feeds, U+2028 and the other breaks str.splitlines knows), and a UTF-8 BOM
is not part of line 1."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from neuroedge.models.scout.document import Document

FACT = "The radio channel of ZETA-17 is 80."


@pytest.mark.parametrize(
    "brk", ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
)
def test_only_cr_and_lf_end_a_line(brk: str) -> None:
    doc = Document.from_text(f"one{brk}still one\ntwo\r\nthree\rfour\n")
    assert doc.lines == (f"one{brk}still one", "two", "three", "four")


def test_form_feed_and_bom_keep_grep_line_numbers(tmp_path: Path, capsys) -> None:
    from neuroedge.models.scout.__main__ import main

    path = tmp_path / "paged.txt"
    text = f"Page one intro.\n\x0cPage two.\nfiller\n{FACT}\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    doc = Document.from_path(path)
    assert doc.n_lines == 4 and doc.lines[0] == "Page one intro."  # no BOM in line 1
    assert doc.lines[3] == FACT
    grep = subprocess.run(["grep", "-n", "radio", str(path)], capture_output=True, text=True)
    assert grep.stdout.startswith("4:")
    assert main([str(path), "What is the radio channel of ZETA-17?", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["answer"] == "80"
    assert any(entry.startswith("[L4-L4]") for entry in got["entries"]), got["entries"]


def test_a_bom_only_file_is_empty(tmp_path: Path) -> None:
    from neuroedge.models.scout.protocol import ScoutError

    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf\n")
    with pytest.raises(ScoutError, match="the document is empty"):
        Document.from_path(path)


def test_no_line_after_a_final_line_break_but_blank_lines_count() -> None:
    assert Document.from_text("a\n\nb\n").lines == ("a", "", "b")
    assert Document.from_text("a\r\nb").lines == ("a", "b")
