"""``KeywordPolicy``: a deterministic SCOUT policy with no language model.

It stands in for the LLM where none is available (offline runs, CI, the bench's cost curves);
its accuracy says that the loop, the tools and the state work, not what an LLM would reach.
It handles questions of the form "What/Who/Which is the X of Y?", where Y names an entity
("agent ZETA-17") or describes one by a relation ("the agent stationed in Lisbon", "the agent
who reports to Maria Okafor"):

* plan: X's content words are the attribute; in Y, tokens like ``ZETA-17`` are entity ids,
  capitalised words are names and the other content words are the relation;
* forage, coarse to fine: grep for sentences holding every term (a conjunction of
  look-aheads), then with the terms widened to their stems, then for lines holding every term,
  then for the rarest-looking term alone (an id, else a name, else the longest); Read two
  lines either side of each of the first five hits; Update with every sentence of those
  windows that holds all the terms (anchored to its line). A descriptive Y is resolved first
  (the bridge hop: the ids in the sentences found), then X of each id found;
* evaluate (from the rendered state only): sufficient when the answer rule below finds a value,
  else the missing part is named (the bridge entity, or X of a named id);
* answer (from the evidence text only): the sentences that hold X's words and one target id,
  minus those marked invalid (``INVALID`` words: revoked, former, no longer valid, ...), give
  the value after their last " is "; the first such value is the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from neuroedge.models.scout.protocol import Action, Observation, Verdict

ID = re.compile(r"\b[A-Z][A-Z0-9]*-\d+\b")
QUESTION = re.compile(
    r"^\s*(?:what|who|which)\s+(?:is|was|are|were)\s+the\s+(.+?)\s+of\s+(.+?)\s*\??\s*$", re.I
)
STOP = set(
    "a an the of in on at to for by with from and or is was are were be been who whom whose "
    "which what that this these those it its as into onto about agent person one".split()
)
INVALID = (
    "revoked",
    "no longer valid",
    "former",
    "expired",
    "obsolete",
    "superseded",
    "cancelled",
    "outdated",
    "retired",
    "previous",
)
HITS_READ, WINDOW = 5, 2
_SENT = re.compile(r"(?<=[.!?])\s+")
_PREFIX = re.compile(r"^\s*(?:\[L\d+-L\d+\]|\d+:)\s*")


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[A-Za-z][A-Za-z'-]*", text) if w.lower() not in STOP]


@dataclass(frozen=True)
class Parsed:
    attribute: tuple[str, ...]
    ids: tuple[str, ...]
    names: tuple[str, ...]
    relation: tuple[str, ...]


def parse(question: str) -> Parsed:
    m = QUESTION.match(question)
    x, y = (m.group(1), m.group(2)) if m else (question, "")
    ids = tuple(ID.findall(y))
    rest = ID.sub(" ", y)
    names = tuple(w for w in _words(rest) if w[0].isupper())
    relation = () if ids else tuple(w.lower() for w in _words(rest) if not w[0].isupper())
    return Parsed(tuple(w.lower() for w in _words(x)), ids, names, relation)


def _term(word: str, stem: bool) -> str:
    if stem and len(word) > 5:
        return rf"\b{re.escape(word[: len(word) - 2])}\w*"
    return rf"\b{re.escape(word)}\b"


def conjunction(terms: tuple[str, ...], stem: bool = False, sentence: bool = False) -> str:
    """A regex matching lines that hold every term in any order (look-aheads), within one
    sentence (``sentence``: no ``.!?`` between a sentence start and each term) or the line."""
    if sentence:
        return r"(?:^|(?<=[.!?]\s))" + "".join(f"(?=[^.!?]*{_term(t, stem)})" for t in terms)
    return "^" + "".join(f"(?=.*{_term(t, stem)})" for t in terms)


def holds(sentence: str, terms: tuple[str, ...], stem: bool = True) -> bool:
    return all(re.search(_term(t, stem), sentence, re.I) for t in terms)


def sentences(text: str) -> Iterator[str]:
    for line in text.splitlines():
        if line.startswith("Question:"):  # the question itself is not evidence
            continue
        for s in _SENT.split(_PREFIX.sub("", line)):
            if s.strip():
                yield s.strip()


def _value(sentence: str) -> str:
    parts = re.split(r"\s+(?:is|was|are)\s+", sentence)
    return parts[-1].strip().rstrip(".").strip() if len(parts) > 1 else ""


def resolve(p: Parsed, evidence: str) -> tuple[tuple[str, ...], str]:
    """(target ids, value) read from ``evidence``; value "" when none is stated validly."""
    sents = list(sentences(evidence))
    ids = p.ids
    bridge = (*p.names, *p.relation)
    for stem in (False, True):  # exact words first; stems only when those find no id
        if not ids and bridge:
            found = [i for s in sents if holds(s, bridge, stem) for i in ID.findall(s)]
            ids = tuple(dict.fromkeys(found))
    for s in sents:
        if set(ID.findall(s)) & set(ids) and holds(s, p.attribute, stem=False):
            if not any(bad in s.lower() for bad in INVALID) and _value(s):
                return ids, _value(s)
    return ids, ""


class KeywordPolicy:
    """See the module docstring."""

    name = "keyword"

    def __init__(self) -> None:
        self._plan: Iterator[Action] | None = None
        self._last: Observation | None = None

    def start(self, question: str, info: Observation) -> None:
        self.parsed = parse(question)
        self._plan = self._script()

    def next_action(self, state: object, last: Observation) -> Action:
        self._last, self._state = last, state
        assert self._plan is not None, "start() first"
        return next(self._plan, Action("answer"))

    def _locate(self, terms: tuple[str, ...], tag: str) -> Iterator[Action]:
        """Grep coarse to fine; read around the hits; update with the sentences holding all
        ``terms``. Leaves ``self._found`` True when something was recorded."""
        self._found = False
        rare = max(terms, key=lambda t: (bool(ID.fullmatch(t)), t[0].isupper(), len(t)))
        for pattern in dict.fromkeys(
            (
                conjunction(terms, sentence=True),
                conjunction(terms, stem=True, sentence=True),
                conjunction(terms),
                _term(rare, False),
            )
        ):
            yield Action("grep", {"pattern": pattern})
            hits = [no for no, _ in self._last.lines][:HITS_READ]
            for no in hits:
                yield Action("read", {"offset": max(1, no - WINDOW), "limit": 2 * WINDOW + 1})
                for line_no, text in self._last.lines:
                    for s in sentences(text):
                        if holds(s, terms):
                            self._found = True
                            if any(
                                e.content == s and e.start == line_no for e in self._state.entries
                            ):
                                continue  # already recorded from an overlapping window
                            yield Action(
                                "update",
                                {"content": s, "start": line_no, "end": line_no, "tags": [tag]},
                            )
            if self._found:
                return

    def _script(self) -> Iterator[Action]:
        p = self.parsed
        ids = p.ids
        if not ids and (p.names or p.relation):
            yield from self._locate((*p.names, *p.relation), "bridge")
            ids, _ = resolve(p, self._state.render())
        for i in ids[:3]:
            yield from self._locate((i, *p.attribute), f"attribute:{i}")
        yield Action("evaluate")
        for i in ids[:3]:  # widened: the id with each attribute word alone
            for word in p.attribute:
                yield from self._locate((i, word), f"attribute:{i}")
        yield Action("evaluate")

    def evaluate(self, question: str, state_text: str) -> Verdict:
        p = parse(question)
        ids, value = resolve(p, state_text)
        if value:
            return Verdict(True, 1.0, (), value, "a valid statement of the attribute was found")
        if not ids:
            what = " ".join((*p.names, *p.relation)) or question
            return Verdict(False, 0.0, (f"which entity matches: {what}",))
        attr = " ".join(p.attribute)
        return Verdict(False, 0.0, tuple(f"the {attr} of {i}" for i in ids))

    def answer(self, question: str, evidence: str) -> str:
        return resolve(parse(question), evidence)[1]

    def usage(self) -> Mapping[str, int]:
        return {"prompt": 0, "completion": 0, "calls": 0}
