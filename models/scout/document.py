"""A long text as numbered lines, with the reconnaissance SCOUT does before its first read.

* Lines longer than ``MAX_LINE_CHARS`` are split (scout-open's normaliser): at the last
  sentence end (``. ! ?`` and the CJK full stops, then white space) inside the window's last
  20 %, else at the last space or comma there, else hard at the limit. Line numbers are those
  of the normalised text, which is what every anchor refers to.
* Lines end at ``\n``, ``\r\n`` or a lone ``\r`` only, as in ``grep -n`` and editors
  (``str.splitlines`` also splits at form feeds, ``\x0b``, ``\x1c``-``\x1e``, U+0085, U+2028 and
  U+2029, which would shift every anchor after them); a leading UTF-8 BOM is dropped.
* Tokens are estimated as ceil(characters / 4) (the usual rule of thumb for BPE tokenisers on
  English text). No tokenizer file is downloaded; every method in the bench is counted the
  same way, so their ratios do not depend on the constant.
* ``file_info`` samples the first ``SAMPLE_BYTES`` bytes to estimate the file's tokens, as
  scout-open's ``get_file_info``, and names a strategy: ``full_read`` under 30,000 estimated
  tokens, ``grep_then_read`` under 100,000, else ``grep_only``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from neuroedge.models.scout.protocol import ScoutError

MAX_LINE_CHARS = 2000
SAMPLE_BYTES = 10_000
FULL_READ_TOKENS, GREP_READ_TOKENS = 30_000, 100_000
_LINE_END = re.compile(r"\r\n|\r|\n")
_SENTENCE_END = re.compile(r"[.!?\u3002\uff1f\uff01](\s|$)")


def estimate_tokens(text: str) -> int:
    """ceil(len(text) / 4): the offline token estimate every count in ltu.scout uses."""
    return math.ceil(len(text) / 4)


def split_long_line(line: str, limit: int = MAX_LINE_CHARS) -> list[str]:
    """``line`` in pieces of at most ``limit`` characters, broken as the module docstring says.

    Linear in ``len(line)``: the window is a position in ``line`` (re-slicing the rest of the
    line per piece made a 16 MB one-line file take seconds, quadratic in its length)."""
    pieces, pos, end = [], 0, len(line)
    while end - pos > limit:
        window_end, tail_from = pos + limit, pos + int(limit * 0.8)
        cut = 0
        # one character past the window: "$" is the end of the line, never the cut's end
        for match in _SENTENCE_END.finditer(line, tail_from, window_end + 1):
            if match.start() < window_end:
                cut = match.start() + 1
        if not cut:
            space = line.rfind(" ", tail_from, window_end)
            cut = max(space, line.rfind(",", tail_from, window_end)) + 1
        if cut <= 0:
            cut = window_end
        pieces.append(line[pos:cut].rstrip())
        pos = cut
        while pos < end and line[pos].isspace():  # as str.lstrip
            pos += 1
    pieces.append(line[pos:])
    return pieces


@dataclass(frozen=True)
class Document:
    """Normalised lines (index 0 is line 1), where they came from, and the raw byte size."""

    lines: tuple[str, ...]
    source: str
    size_bytes: int
    long_lines: bool  # the raw text had a line over MAX_LINE_CHARS

    @classmethod
    def from_text(cls, text: str, source: str = "<text>") -> Document:
        text = text.removeprefix("\ufeff")
        if not text.strip():
            raise ScoutError(f"{source}: the document is empty")
        raw = _LINE_END.split(text)
        if raw[-1] == "":  # the text ends with a line break: no line after it
            raw.pop()
        lines = [piece for line in raw for piece in split_long_line(line)]
        long_lines = any(len(line) > MAX_LINE_CHARS for line in raw)
        return cls(tuple(lines), source, len(text.encode("utf-8")), long_lines)

    @classmethod
    def from_path(cls, path: str | Path) -> Document:
        """A UTF-8 text file; ScoutError naming the file (and the byte offset of a bad byte)."""
        p = Path(path)
        if p.is_dir():
            raise ScoutError(f"{p}: is a directory (expected a UTF-8 text file)")
        if not p.is_file():
            raise ScoutError(f"{p}: no such file (expected a UTF-8 text file)")
        data = p.read_bytes()
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise ScoutError(f"{p}: not UTF-8 text at byte offset {err.start}") from err
        if "\0" in text:
            raise ScoutError(f"{p}: NUL byte at offset {data.index(0)}: not a text file")
        return cls.from_text(text, str(p))

    @property
    def n_lines(self) -> int:
        return len(self.lines)

    def text(self, start: int = 1, end: int | None = None) -> str:
        """Lines ``start..end`` (1-based, inclusive), joined."""
        self.check_range(start, end or self.n_lines)
        return "\n".join(self.lines[start - 1 : end or self.n_lines])

    def check_range(self, start: int, end: int) -> None:
        if not (isinstance(start, int) and isinstance(end, int)):
            raise ScoutError(f"{self.source}: line range {start!r}..{end!r} is not two integers")
        if not 1 <= start <= end <= self.n_lines:
            raise ScoutError(
                f"{self.source}: line range {start}..{end} is outside 1..{self.n_lines}"
            )

    def estimated_tokens(self) -> int:
        """scout-open's estimate: the token rate of the first SAMPLE_BYTES bytes, scaled."""
        sample = "\n".join(self.lines).encode("utf-8")[:SAMPLE_BYTES].decode("utf-8", "ignore")
        per_byte = estimate_tokens(sample) / max(len(sample.encode("utf-8")), 1)
        return round(self.size_bytes * per_byte)

    def strategy(self) -> str:
        tokens = self.estimated_tokens()
        if tokens < FULL_READ_TOKENS:
            return "full_read"
        return "grep_then_read" if tokens < GREP_READ_TOKENS else "grep_only"
