"""The interfaces of the SCOUT loop: actions, tool observations, state entries, the
evaluator's verdict and the ``Policy`` protocol that ``agent.forage`` drives.

A policy decides; the loop executes. Two implementations:

* ``keyword.KeywordPolicy``: deterministic, no language model (offline runs and the bench);
* ``chat.ChatPolicy``: a chat LLM behind an OpenAI-compatible endpoint (llama.cpp server,
  vLLM, Ollama, a hosted API), speaking a JSON action protocol in plain text.

What the answer model sees is the paper's "decoupled answering": ``Policy.answer`` receives the
question and the rendered epistemic state E_T only, never the foraging history H_T.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

FORAGE = ("grep", "read", "scan")  # A_forage: lexical skip, dense verbatim, coarse
STATE = ("update", "evaluate")  # A_state
ACTIONS = (*FORAGE, *STATE, "answer")


class ScoutError(ValueError):
    """Bad input to the SCOUT loop: a document, tool argument, anchor or action that cannot
    be used; the message names the file, line, offset or value."""


@dataclass(frozen=True)
class Action:
    """One step the policy asks for. ``args`` by kind:

    * grep: ``pattern`` (Python regex, case-insensitive), optional ``max_hits`` (<= 50);
    * read: ``offset`` (1-based first line), ``limit`` (lines, <= 100);
    * scan: ``offset``, ``limit`` (lines, <= 2000; every ``stride``-th line is shown);
    * update: ``content`` (an atomic statement), ``start``, ``end`` (1-based inclusive line
      anchor), optional ``tags`` (list of str), ``action`` ("append" or "replace": replace drops
      the entries sharing a tag with this one);
    * evaluate: none; answer: none (the loop asks ``Policy.answer`` with the state only).
    """

    kind: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ACTIONS:
            raise ScoutError(f"unknown action {self.kind!r}; expected one of {', '.join(ACTIONS)}")


@dataclass(frozen=True)
class Observation:
    """What an action returned: the lines it showed (1-based numbers) and the text the
    forager reads, with that text's token count (``document.estimate_tokens``)."""

    tool: str
    args: Mapping[str, Any]
    lines: tuple[tuple[int, str], ...]
    text: str
    tokens: int


@dataclass(frozen=True)
class Entry:
    """e_j = <c_j, alpha_j>: an atomic statement and its anchor, lines ``start..end``."""

    content: str
    start: int
    end: int
    tags: tuple[str, ...] = ()

    def render(self) -> str:
        return f"[L{self.start}-L{self.end}] {self.content}"


@dataclass(frozen=True)
class Verdict:
    """DiagnoseGap(q, E_t): sufficient or not, and the categories of information missing."""

    sufficient: bool
    confidence: float = 0.0
    missing: tuple[str, ...] = ()
    draft_answer: str = ""
    reasoning: str = ""


class Policy(Protocol):
    """The decisions of the loop. ``start`` sees the question and the file reconnaissance
    (``get_file_info``); ``next_action`` sees the last observation and the current state;
    ``evaluate`` and ``answer`` see the question and the rendered state only."""

    name: str

    def start(self, question: str, info: Observation) -> None: ...

    def next_action(self, state: Any, last: Observation) -> Action: ...

    def evaluate(self, question: str, state_text: str) -> Verdict: ...

    def answer(self, question: str, evidence: str) -> str: ...

    def usage(self) -> Mapping[str, int]:
        """Tokens the policy's own model calls used, as its server reported them
        (``prompt``, ``completion``, ``calls``); all 0 for a policy without a model."""
        ...
