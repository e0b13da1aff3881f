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


def _split_by_slicing(line: str, limit: int) -> list[str]:
    """The splitter as first written (re-slices the rest of the line per piece: quadratic),
    kept as the reference the linear one must match piece for piece."""
    from neuroedge.models.scout.document import _SENTENCE_END

    pieces = []
    while len(line) > limit:
        window, tail_from = line[:limit], int(limit * 0.8)
        cut = 0
        for match in _SENTENCE_END.finditer(line[: limit + 1], tail_from):
            if match.start() < limit:
                cut = match.start() + 1
        if not cut:
            cut = max(window.rfind(" ", tail_from), window.rfind(",", tail_from)) + 1
        if cut <= 0:
            cut = limit
        pieces.append(line[:cut].rstrip())
        line = line[cut:].lstrip()
    pieces.append(line)
    return pieces


def test_long_line_pieces_match_the_slicing_splitter_on_random_lines() -> None:
    import random

    from neuroedge.models.scout.document import split_long_line

    rng = random.Random(0)
    words = ["alpha", "beta,", "gamma.", "delta!", "x" * 250, "  ", "eps?", "\u3002", "\t"]
    words += ["\uff01", "zeta", "\x0b", "\u2028", "end.\n", ".", ",", " " * 30, "\u3000"]
    for trial in range(300):
        n = rng.randint(0, 600)
        line = "".join(rng.choice(words) + rng.choice([" ", "", "  ", "\xa0"]) for _ in range(n))
        limit = rng.choice([200, 201, 333, 2000])
        assert split_long_line(line, limit) == _split_by_slicing(line, limit), trial


def test_splitting_a_long_line_is_linear_in_its_length() -> None:
    """A one-line file of L characters: the pieces cost O(L) (slicing the rest of the line
    per piece was O(L^2): 16 MB took 11.5 s, 0.12 s in short lines)."""
    import time

    from neuroedge.models.scout.document import split_long_line

    unit = "The quick brown fox jumps over the lazy dog. "

    def best(chars: int) -> float:
        line = (unit * (chars // len(unit) + 1))[:chars]
        times = []
        for _ in range(3):
            start = time.perf_counter()
            split_long_line(line)
            times.append(time.perf_counter() - start)
        return min(times)

    small, big = best(1_000_000), best(4_000_000)
    assert big < 0.3 or big / small < 8, (small, big)  # linear: ~4x; quadratic: ~16x
