"""A chat LLM as the repair model: each stage answered with the number of one option.

``ChatRepairer`` takes any client with scout's chat interface (``chat(messages, *,
temperature, max_tokens, seed) -> str`` and ``usage()``):

* ``scout.chat.OpenAIChat``: an OpenAI-compatible ``/chat/completions`` endpoint (llama.cpp
  server, vLLM, Ollama, a hosted API; the key from ``NEUROEDGE_LLM_API_KEY``). This is the
  route to the paper's setting, a large instruction model at every stage: it needs no
  log-probabilities, which many servers do not return.
* ``scout.local.LocalChat``: the bundled SmolLM2-135M generating its reply offline (config
  ``decode=generate``), against ``lm.LMRepairer``'s likelihood scoring of the same options.

One request per stage: ``lm.prompt_text`` with numbered options, then ``ASK``. The reply's
leading number (``"2"``, ``"Option 2: ..."``, ``"**2**"``) in 1..n is the choice; failing
that, the one option whose whole text the reply quotes. A reply that names no option goes
back with what was wrong, at most ``MAX_REASKS`` times, then ``NoAnswer`` naming the stage
and the reply (the pass ends there without a patch, counted as ``unanswered``); a failed
request (the client's ``ChatError``, naming the URL) is a ``ConradError`` that stops the run. The
temperature and a per-request seed go to the server (forward exploration samples); token
counts are the server's own.
"""

from __future__ import annotations

import re
from typing import Any

from neuroedge.models.conrad.lm import SYSTEM, prompt_text
from neuroedge.models.conrad.protocol import ConradError, NoAnswer
from neuroedge.models.conrad.repair import StageQuery

ASK = "Reply with the number of one option only."
MAX_REASKS = 2  # a reply that names no option is sent back at most this often
MAX_TOKENS = 16  # a number needs a few; a chatty model's preamble is cut, then re-asked
_DEF = re.compile(r"\s*(?:async\s+)?def\s+(\w+)")
_LEADING = re.compile(r"^[\s*_`#>(\[]*(?:option|answer|choice)?[\s:#*_`(\[]*(\d+)(?!\d)", re.I)


def _squash(text: str) -> str:
    return " ".join(text.split())


def parse_choice(reply: str, q: StageQuery) -> int | None:
    """The option index a reply names, or None: its leading number if in range, else the
    single option whose whole text (whitespace ignored) the reply contains, else the single
    one whose function name or file base name it contains as a word."""
    m = _LEADING.match(reply)
    if m:
        k = int(m.group(1))
        return k - 1 if 1 <= k <= len(q.options) else None
    flat = _squash(reply)
    hits = [i for i, o in enumerate(q.options) if _squash(o.text) and _squash(o.text) in flat]
    if not hits:  # a file's base name or a function's name, as a whole word
        hits = [i for i, o in enumerate(q.options) if _named(_short(o.text), flat)]
    return hits[0] if len(hits) == 1 else None


def _short(text: str) -> str:
    m = _DEF.match(text)
    return m.group(1) if m else text.rsplit("/", 1)[-1] if "/" in text else ""


def _named(name: str, reply: str) -> bool:
    return bool(name) and re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", reply) is not None


class ChatRepairer:
    """The stage model on a chat client; ``calls`` counts stage decisions, ``requests`` the
    requests sent (re-asks included)."""

    def __init__(self, client: Any, temperature: float = 0.0, seed: int = 0) -> None:
        if temperature < 0:
            raise ConradError(f"temperature must be >= 0, got {temperature}")
        self.client, self.temperature, self.seed = client, float(temperature), int(seed)
        self.name = str(getattr(client, "url", "chat"))
        self.calls = self.requests = 0

    def _ask(self, messages: list[dict[str, str]]) -> str:
        from neuroedge.models.scout.chat import ChatError

        self.requests += 1
        try:
            return self.client.chat(
                messages,
                temperature=self.temperature,
                max_tokens=MAX_TOKENS,
                seed=self.seed + self.requests,
            )
        except ChatError as err:
            said = str(err)  # OpenAIChat's errors name the URL already
            raise ConradError(said if self.name in said else f"{self.name}: {said}") from err

    def pick(self, q: StageQuery) -> int:
        self.calls += 1
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": prompt_text(q, numbered=True) + "\n\n" + ASK},
        ]
        for attempt in range(MAX_REASKS + 1):
            reply = self._ask(messages)
            k = parse_choice(reply, q)
            if k is not None:
                return k
            if attempt == MAX_REASKS:
                break
            messages += [
                {"role": "assistant", "content": reply},
                {
                    "role": "user",
                    "content": f"That names none of the options 1-{len(q.options)}. {ASK}",
                },
            ]
        raise NoAnswer(
            q.stage,
            f"repair model {self.name}: stage {q.stage} got no option number in "
            f"{MAX_REASKS + 1} replies; last reply {_squash(reply)[:120]!r}",
        )

    def usage(self) -> dict[str, int]:
        """The client's token counts (prompt, completion, calls)."""
        return dict(self.client.usage())
