"""The forager's tools over one document (``Tools``), each result counted in a ``Ledger``.

* ``file_info``: size, estimated tokens, long-line flag and strategy (``document``);
* ``grep(pattern, max_hits)``: case-insensitive Python regex, the first ``max_hits`` matching
  lines with their numbers and the total match count (a lexical skip over the file);
* ``read(offset, limit)``: ``limit`` <= 100 consecutive lines from ``offset`` (dense,
  verbatim);
* ``scan(offset, limit, stride)``: every ``stride``-th line of ``limit`` <= 2000 lines
  (coarse).

The ledger counts the tokens of every observation the forager is shown (``observed``: tool
results, and through ``note`` the loop's Update confirmations, Evaluate feedback and error
messages) and of every state render given to the evaluator or the answer model (``state``):
together the tokens a language model would have had to read, counted the same way for every
method.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from neuroedge.models.scout.document import Document, estimate_tokens
from neuroedge.models.scout.protocol import Observation, ScoutError

MAX_READ, MAX_SCAN, MAX_HITS = 100, 2000, 50
DEFAULT_HITS, SCAN_STRIDE = 20, 20


@dataclass
class Ledger:
    observed: int = 0  # tokens of tool observations shown to the forager
    state: int = 0  # tokens of state renders read by the evaluator and the answer model
    calls: Counter = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return self.observed + self.state


def _int_arg(args: dict[str, Any], key: str, default: int | None, least: int, most: int) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScoutError(f"{key}={value!r}: expected an integer in [{least}, {most}]")
    if not least <= value <= most:
        raise ScoutError(f"{key}={value}: expected an integer in [{least}, {most}]")
    return value


def _numbered(lines: list[tuple[int, str]]) -> str:
    return "\n".join(f"{no}: {text}" for no, text in lines)


class Tools:
    def __init__(self, doc: Document, ledger: Ledger | None = None) -> None:
        self.doc, self.ledger = doc, ledger or Ledger()

    def _observe(self, tool: str, args: dict[str, Any], lines: list, text: str) -> Observation:
        self.ledger.calls[tool] += 1
        return self.note(tool, args, text, lines)

    def note(
        self, kind: str, args: Mapping[str, Any], text: str, lines: Sequence = ()
    ) -> Observation:
        """An observation shown to the forager, its tokens counted in ``observed``: a tool's
        result, or one the loop writes (an Update's confirmation, an Evaluate's feedback, an
        error), which is not counted as a tool call."""
        tokens = estimate_tokens(text)
        self.ledger.observed += tokens
        return Observation(kind, dict(args), tuple(lines), text, tokens)

    def file_info(self) -> Observation:
        d = self.doc
        text = (
            f"file {d.source}: {d.size_bytes} bytes, {d.n_lines} lines, about "
            f"{d.estimated_tokens()} tokens, lines over 2000 chars: {d.long_lines}, "
            f"strategy: {d.strategy()}"
        )
        return self._observe("file_info", {}, [], text)

    def grep(self, pattern: str, max_hits: int = DEFAULT_HITS) -> Observation:
        args = {"pattern": pattern, "max_hits": max_hits}
        if not isinstance(pattern, str) or not pattern:
            raise ScoutError(f"grep: pattern {pattern!r} must be a non-empty string")
        _int_arg(args, "max_hits", DEFAULT_HITS, 1, MAX_HITS)
        try:
            rx = re.compile(pattern, re.IGNORECASE)
        except re.error as err:
            raise ScoutError(f"grep: pattern {pattern!r} is not a valid regex: {err}") from err
        hits = [(i + 1, line) for i, line in enumerate(self.doc.lines) if rx.search(line)]
        shown = hits[:max_hits]
        head = f"grep {pattern!r}: {len(hits)} matching lines" + (
            f", first {len(shown)} shown" if len(hits) > len(shown) else ""
        )
        return self._observe("grep", args, shown, head + "\n" + _numbered(shown))

    def read(self, offset: int, limit: int = MAX_READ) -> Observation:
        args = {"offset": offset, "limit": limit}
        _int_arg(args, "offset", None, 1, self.doc.n_lines)
        _int_arg(args, "limit", MAX_READ, 1, MAX_READ)
        end = min(offset + limit - 1, self.doc.n_lines)
        lines = [(no, self.doc.lines[no - 1]) for no in range(offset, end + 1)]
        return self._observe("read", args, lines, _numbered(lines))

    def scan(self, offset: int, limit: int = MAX_SCAN, stride: int = SCAN_STRIDE) -> Observation:
        args = {"offset": offset, "limit": limit, "stride": stride}
        _int_arg(args, "offset", None, 1, self.doc.n_lines)
        _int_arg(args, "limit", MAX_SCAN, 1, MAX_SCAN)
        _int_arg(args, "stride", SCAN_STRIDE, 1, MAX_SCAN)
        end = min(offset + limit - 1, self.doc.n_lines)
        lines = [(no, self.doc.lines[no - 1]) for no in range(offset, end + 1, stride)]
        return self._observe("scan", args, lines, _numbered(lines))

    def charge_state(self, text: str) -> None:
        """Count a state render read by the evaluator or the answer model."""
        self.ledger.state += estimate_tokens(text)
