"""The epistemic state E_t: anchored statements, changed only by Update (``update``).

Anchors are checked against the document when an entry is written (a range outside the file
is refused, naming it), and ``grounded`` tells whether a string is stated by an entry and
shown, as a whole token, inside that entry's anchored span: the provenance check of an answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from neuroedge.models.scout.document import Document
from neuroedge.models.scout.protocol import Entry, ScoutError, Verdict


def whole_token(value: str) -> re.Pattern[str]:
    """``value`` as a whole token: not joined to a letter, digit or hyphen; case-insensitive."""
    return re.compile(rf"(?<![\w-]){re.escape(value)}(?![\w-])", re.I)


@dataclass
class EpistemicState:
    question: str
    doc: Document
    entries: list[Entry] = field(default_factory=list)
    evaluations: list[Verdict] = field(default_factory=list)

    def update(
        self,
        content: str,
        start: int,
        end: int,
        tags: Sequence[str] = (),
        action: str = "append",
    ) -> Entry:
        """Append an entry (or, ``action="replace"``, first drop the entries sharing a tag)."""
        if not isinstance(content, str) or not content.strip():
            raise ScoutError("update: content must be a non-empty statement")
        if action not in ("append", "replace"):
            raise ScoutError(f"update: action {action!r}; expected 'append' or 'replace'")
        self.doc.check_range(start, end)
        entry = Entry(content.strip(), start, end, tuple(str(t) for t in tags))
        if action == "replace" and entry.tags:
            self.entries = [e for e in self.entries if not set(e.tags) & set(entry.tags)]
        if entry not in self.entries:
            self.entries.append(entry)
        return entry

    def render(self) -> str:
        """What the evaluator and the answer model read: the question and the entries."""
        body = "\n".join(e.render() for e in self.entries) or "(no entries)"
        return f"Question: {self.question}\nEvidence:\n{body}"

    def grounded(self, text: str) -> bool:
        """True when ``text`` occurs as a whole token (not joined to a letter, digit or
        hyphen; case-insensitive) both in an entry's content and in that entry's anchored
        span: the entry states it and its anchor shows it."""
        needle = text.strip()
        if not needle:
            return False
        token = whole_token(needle)
        return any(
            token.search(e.content) and token.search(self.doc.text(e.start, e.end))
            for e in self.entries
        )
