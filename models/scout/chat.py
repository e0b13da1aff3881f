"""A chat LLM as a SCOUT policy, over any OpenAI-compatible ``/chat/completions`` endpoint.

* ``OpenAIChat``: a standard-library HTTP client (``urllib.request``, ``json``), so a
  llama.cpp server, vLLM, Ollama or a hosted API works without an SDK. It sums the ``usage``
  the server reports (prompt and completion tokens, calls): a run's cost is the server's own
  count. A connection failure, a timeout or a 429/502/503/504 is tried once more after a
  short pause; any other failure raises ``ChatError`` at once, naming the URL (and the HTTP
  status and the start of the body).
* Tools are a JSON action protocol in plain text (many local servers lack native tool
  calling): one JSON object per forager turn, which ``parse_action_json`` digs out of code
  fences or prose, with scout-open's Python-literal fallback (single quotes, ``True``).
* ``ChatPolicy`` holds three separate conversations, decoupled as in the paper: the forager
  (system prompt with tools, strategy, question and file reconnaissance, then the last
  ``history_turns`` observation -> action exchanges); the evaluator (a strict auditor at
  temperature 0) and the answerer, which both see the question and the rendered epistemic
  state only, never the forager's history H_T. A reply that is not a usable action goes back
  with what was wrong, at most twice, before ``ScoutError``.
"""

from __future__ import annotations

import ast
import http.client
import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from neuroedge.errors import NeuroedgeError
from neuroedge.models.scout.prompts import ANSWER_PROMPT, EVALUATOR_PROMPT, FORAGER_PROMPT, REASK
from neuroedge.models.scout.protocol import Action, Observation, ScoutError, Verdict

API_KEY_ENV = "NEUROEDGE_LLM_API_KEY"
RETRY_STATUS = (429, 502, 503, 504)  # transient: one more try after RETRY_PAUSE_S
RETRY_PAUSE_S = 0.5
INT_ARGS = ("offset", "limit", "max_hits", "start", "end", "stride")


def _tool_args() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """kind: (required, optional) argument names, read from the tools' own signatures (the
    single declaration); other keys of a reply ("thought", ...) are dropped."""
    import inspect

    from neuroedge.models.scout.state import EpistemicState
    from neuroedge.models.scout.tools import Tools

    out = {}
    for kind, fn in (
        ("grep", Tools.grep),
        ("read", Tools.read),
        ("scan", Tools.scan),
        ("update", EpistemicState.update),
    ):
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        required = tuple(p.name for p in params if p.default is p.empty)
        out[kind] = (required, tuple(p.name for p in params if p.name not in required))
    return out


ARGS = _tool_args()
ARGS_OF = {kind: set(req + opt) for kind, (req, opt) in ARGS.items()}
ARGS_OF.update(evaluate=set(), answer=set())
MAX_REASKS = 2  # a reply that is not a usable action is sent back at most this often
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_INT_TEXT = re.compile(r"\s*[Ll]?([+-]?\d+)\s*")


class ChatError(NeuroedgeError):
    """A chat call that gave no usable reply; the message names the URL and what went wrong."""


def _snippet(text: str, n: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "..."


class Metered:
    """The usage a chat client counts: prompt and completion tokens, and calls."""

    def __init__(self) -> None:
        self._usage = {"prompt": 0, "completion": 0, "calls": 0}

    def usage(self) -> dict[str, int]:
        return dict(self._usage)


class OpenAIChat(Metered):
    """``POST {base_url}/chat/completions``; ``chat`` returns the first choice's content."""

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 120.0
    ) -> None:
        if not re.match(r"https?://", str(base_url)):
            raise ChatError(f"base_url {base_url!r}: expected http://host[:port]/path")
        self.url = str(base_url).rstrip("/") + "/chat/completions"
        self.model, self.timeout_s = model, float(timeout_s)
        self.api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        super().__init__()

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> str:
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages]}
        body.update(temperature=temperature, max_tokens=max_tokens)
        if seed is not None:
            body["seed"] = seed
        return self._content(self._post(json.dumps(body).encode("utf-8")))

    def _request(self, data: bytes) -> urllib.request.Request:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return urllib.request.Request(self.url, data=data, headers=headers, method="POST")

    def _post(self, data: bytes) -> Any:
        """The decoded JSON reply; one more try (after a pause) on a transient failure only."""
        for attempt in (1, 2):
            try:
                with urllib.request.urlopen(self._request(data), timeout=self.timeout_s) as resp:
                    raw = resp.read().decode("utf-8", "replace")
                break
            except urllib.error.HTTPError as err:
                if err.code in RETRY_STATUS and attempt == 1:
                    time.sleep(RETRY_PAUSE_S)
                    continue
                body = err.read().decode("utf-8", "replace") if err.fp else ""
                raise ChatError(
                    f"{self.url}: HTTP {err.code} {err.reason} (attempt {attempt}); "
                    f"body: {_snippet(body)!r}"
                ) from err
            except (OSError, http.client.HTTPException) as err:  # URLError, timeouts, resets
                if attempt == 1:
                    time.sleep(RETRY_PAUSE_S)
                    continue
                raise ChatError(
                    f"{self.url}: no reply after {attempt} attempts (connection failed or "
                    f"timed out after {self.timeout_s:g} s): {getattr(err, 'reason', err)}"
                ) from err
        try:
            return json.loads(raw)
        except json.JSONDecodeError as err:
            raise ChatError(f"{self.url}: reply is not JSON: {_snippet(raw)!r}") from err

    def _content(self, reply: Any) -> str:
        self._usage["calls"] += 1
        usage = reply.get("usage") if isinstance(reply, dict) else None
        for key, name in (("prompt", "prompt_tokens"), ("completion", "completion_tokens")):
            value = usage.get(name) if isinstance(usage, dict) else None
            if isinstance(value, int) and not isinstance(value, bool):
                self._usage[key] += value
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise ChatError(
                f"{self.url}: reply has no choices[0].message.content: {_snippet(reply)!r}"
            )
        return content


def _first_object(text: str) -> Any:
    """The first JSON object that decodes from some ``{`` (a reply with two objects)."""
    for match in re.finditer(r"\{", text):
        try:
            found, _ = json.JSONDecoder().raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(found, dict):
            return found
    return None


def parse_action_json(text: str) -> dict:
    """The one JSON object in a model reply: ``json.loads`` of the whole text, else of the
    outermost ``{...}`` span, else ``ast.literal_eval`` of that span (single quotes, ``True``),
    else the first object that decodes from a ``{``. ScoutError quoting the start of the text
    when none gives a dict."""
    text = text if isinstance(text, str) else ""
    span = match.group(0) if (match := _OBJECT.search(text)) else ""
    for source, load in ((text, json.loads), (span, json.loads), (span, ast.literal_eval)):
        try:
            found = load(source) if source else None
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue  # json.JSONDecodeError is a ValueError
        if isinstance(found, dict):
            return found
    if isinstance(found := _first_object(text), dict):
        return found
    raise ScoutError(f"no JSON object found in the model's reply: {_snippet(text)!r}")


def _as_int(value: Any) -> Any:
    """``12``, ``"12"``, ``"L12"``, ``12.0`` -> 12; anything else unchanged (the tool says)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and (match := _INT_TEXT.fullmatch(value)):
        return int(match.group(1))
    return value


def to_action(obj: Mapping[str, Any]) -> Action:
    """{"action": kind, **args} -> Action: an update's ``mode`` becomes its ``action`` arg,
    line numbers become ints, keys the tool does not take are dropped (ARGS)."""
    kind = obj.get("action")
    if not isinstance(kind, str) or not kind.strip():
        raise ScoutError(f'the reply has no "action" key naming a tool: {_snippet(obj)!r}')
    kind = kind.strip().lower()
    Action(kind)  # ScoutError naming the valid kinds when unknown
    raw = {("action" if k == "mode" else k): v for k, v in obj.items() if k != "action"}
    required, optional = ARGS.get(kind, ((), ()))
    missing = [key for key in required if key not in raw]
    if missing:
        raise ScoutError(f"{kind} needs {', '.join(missing)}; got {_snippet(obj)!r}")
    args = {k: (_as_int(v) if k in INT_ARGS else v) for k, v in raw.items() if k in ARGS_OF[kind]}
    if isinstance(args.get("tags"), str):
        args["tags"] = [args["tags"]]
    return Action(kind, args)


def _msg(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}


def _pair(system: str, user: str) -> list[dict[str, str]]:
    """A one-question conversation (evaluator, answerer): no forager history in it."""
    return [_msg("system", system), _msg("user", user)]


def _observation_text(last: Observation) -> str:
    if last.tool == "error":  # agent.forage's observation of a bad action
        return f"Your last action failed: {last.text}\nCorrect it and go on."
    return f"Observation ({last.tool}):\n{last.text}"


def _flag(value: Any) -> bool:
    return value.strip().lower() in ("true", "yes") if isinstance(value, str) else bool(value)


def _confidence(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return min(max(number, 0.0), 1.0) if number == number else 0.0  # NaN -> 0


def _missing(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, (list, tuple)) else [] if value is None else [value]
    return tuple(str(item).strip() for item in items if str(item).strip())


def to_verdict(reply: str) -> Verdict:
    """The auditor's JSON as a Verdict; an unparseable reply is an insufficient verdict."""
    try:
        obj = parse_action_json(reply)
    except ScoutError:
        why = f"the evaluator's reply could not be parsed as JSON: {_snippet(reply)!r}"
        return Verdict(False, 0.0, reasoning=why)
    return Verdict(
        sufficient=_flag(obj.get("is_sufficient", False)),
        confidence=_confidence(obj.get("confidence", 0.0)),
        missing=_missing(obj.get("missing_info")),
        draft_answer=str(obj.get("draft_answer") or "").strip(),
        reasoning=str(obj.get("reasoning") or "").strip(),
    )


class ChatPolicy:
    """The SCOUT ``Policy`` of a chat model: forager, evaluator and answerer as separate calls."""

    name = "chat"

    def __init__(
        self,
        client: Any,
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        history_turns: int = 24,
        seed: int | None = None,
    ) -> None:
        if history_turns < 1:
            raise ScoutError(f"history_turns={history_turns}: expected at least 1")
        self.client, self.temperature, self.max_tokens = client, temperature, max_tokens
        self.history_turns, self.seed = history_turns, seed
        self.system = ""
        self.exchanges: list[tuple[str, str]] = []  # (observation, action reply), oldest first

    def start(self, question: str, info: Observation) -> None:
        self.system = FORAGER_PROMPT.replace("{question}", question).replace("{info}", info.text)
        self.exchanges = []

    def messages(self, pending: Sequence[Mapping[str, str]] = ()) -> list[dict[str, str]]:
        """The forager's conversation: system prompt, kept exchanges, then ``pending``."""
        out = [_msg("system", self.system)]
        for user, reply in self.exchanges:
            out += [_msg("user", user), _msg("assistant", reply)]
        return out + [dict(m) for m in pending]

    def _turn_text(self, state: Any, last: Observation) -> str:
        """The observation, and the notebook (E_t) when it has entries and the kept history
        does not show it as it is now (it changed, or the exchange that showed it was cut)."""
        text = _observation_text(last)
        render = getattr(state, "render", None)
        if callable(render) and getattr(state, "entries", True):
            notebook = f"Your notebook now:\n{render()}\n(end of notebook)"
            if not any(notebook in user for user, _ in self.exchanges):
                text += "\n\n" + notebook
        return text + "\n\nYour next action (one JSON object):"

    def next_action(self, state: Any, last: Observation) -> Action:
        if not self.system:
            raise ScoutError("ChatPolicy.next_action before start(question, info)")
        user = self._turn_text(state, last)
        pending = [_msg("user", user)]
        for attempt in range(MAX_REASKS + 1):
            reply = self._call(self.messages(pending), self.temperature)
            try:
                action = to_action(parse_action_json(reply))
            except ScoutError as err:
                if attempt == MAX_REASKS:
                    raise ScoutError(
                        f"the model gave no usable action in {attempt + 1} replies; last: {err}"
                    ) from err
                fix = REASK.replace("{error}", str(err))
                pending += [{"role": "assistant", "content": reply}, _msg("user", fix)]
                continue
            self.exchanges.append((user, reply))
            if len(self.exchanges) > self.history_turns:
                del self.exchanges[: len(self.exchanges) - self.history_turns]
            return action
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(self, messages: list[dict[str, str]], temperature: float) -> str:
        return self.client.chat(
            messages, temperature=temperature, max_tokens=self.max_tokens, seed=self.seed
        )

    def evaluate(self, question: str, state_text: str) -> Verdict:
        user = (
            f"Question:\n{question}\n\nRecorded evidence (all you may use):\n{state_text}\n\n"
            "Your verdict (one JSON object):"
        )
        return to_verdict(self._call(_pair(EVALUATOR_PROMPT, user), 0.0))

    def answer(self, question: str, evidence: str) -> str:
        user = f"Question:\n{question}\n\nEvidence:\n{evidence}\n\nAnswer:"
        return self._call(_pair(ANSWER_PROMPT, user), 0.0).strip()

    def usage(self) -> dict[str, int]:
        return dict(self.client.usage())
