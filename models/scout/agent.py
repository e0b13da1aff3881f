"""The SCOUT loop (``forage``) and the two baselines the bench compares it with.

``forage``: file reconnaissance (``Tools.file_info``, given to ``Policy.start``), then the
policy's actions until it answers, an Evaluate finds the state sufficient, ``max_insufficient``
Evaluates in a row find it insufficient (scout-open's skill protocol: answer with what is
there), or ``max_turns`` run out. Forage actions return observations; Update writes an
anchored entry; a bad action (a regex that does not compile, an anchor outside the file) is
returned to the policy as an ``error`` observation, so a language model can correct itself.
The answer comes from ``Policy.answer(question, state.render())``: the state E_T only, never
the history H_T (decoupled answering). With ``evaluate=False`` (the paper's ablation) the loop
stops after the first Update. A policy that gives no usable action (``ScoutError`` from
``next_action``: a model that does not speak the action protocol) ends the run with
``stopped="policy_error"`` and the reason, answered from the state so far; a transport failure
(``ChatError``: server down, HTTP error) propagates.

Baselines, with the same policy's answer model:

* ``full_context``: the first ``window_tokens`` of the document, as one prompt;
* ``answer_from_history`` (ReAct, no E_t): the same foraging, answered from H_T.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neuroedge.models.scout.document import Document, estimate_tokens
from neuroedge.models.scout.protocol import (
    FORAGE,
    Action,
    Observation,
    Policy,
    ScoutError,
    Verdict,
)
from neuroedge.models.scout.state import EpistemicState
from neuroedge.models.scout.tools import Ledger, Tools

MAX_TURNS, MAX_INSUFFICIENT = 200, 3


@dataclass
class Result:
    answer: str
    state: EpistemicState
    history: list[Observation]
    ledger: Ledger
    turns: int
    stopped: str  # answer, sufficient, insufficient, first_update, max_turns, policy_error
    grounded: bool  # an entry of E_T states the answer and its anchored span shows it
    usage: Mapping[str, int] = field(default_factory=dict)
    errors: int = 0
    policy_error: str = ""  # why the policy gave no usable action (stopped == policy_error)

    @property
    def answer_tokens(self) -> int:
        """Tokens of what the answer model read (the rendered state)."""
        return estimate_tokens(self.state.render())


def _error(tools: Tools, action: Action, err: Exception) -> Observation:
    return tools.note("error", action.args, f"error in {action.kind}: {err}")


def _step(tools: Tools, state: EpistemicState, action: Action) -> Observation:
    """Run a forage or update action; ScoutError for bad arguments."""
    args = dict(action.args)
    try:
        if action.kind in FORAGE:
            return getattr(tools, action.kind)(**args)
        entry = state.update(**args)
    except TypeError as err:  # unknown or missing argument names
        raise ScoutError(f"{action.kind}: bad arguments {sorted(args)}: {err}") from err
    return tools.note("update", args, f"recorded {entry.render()}")


def _evaluate(tools: Tools, state: EpistemicState, policy: Policy) -> Verdict:
    text = state.render()
    tools.charge_state(text)
    verdict = policy.evaluate(state.question, text)
    state.evaluations.append(verdict)
    return verdict


def forage(
    doc: Document,
    question: str,
    policy: Policy,
    *,
    max_turns: int = MAX_TURNS,
    evaluate: bool = True,
    max_insufficient: int = MAX_INSUFFICIENT,
) -> Result:
    """Run SCOUT on ``doc`` for ``question``; see the module docstring."""
    if not question.strip():
        raise ScoutError("the question is empty")
    tools, state = Tools(doc), EpistemicState(question, doc)
    last = tools.file_info()
    history, strikes, errors, stopped = [last], 0, 0, "max_turns"
    policy.start(question, last)
    turns, policy_error = 0, ""
    while turns < max_turns:
        turns += 1
        try:
            action = policy.next_action(state, last)
        except ScoutError as err:  # the model gave no usable action (ChatError propagates)
            stopped, policy_error = "policy_error", str(err)
            break
        if action.kind == "answer":
            stopped = "answer"
            break
        if action.kind == "evaluate":
            if not evaluate:
                continue
            verdict = _evaluate(tools, state, policy)
            strikes += not verdict.sufficient
            if verdict.sufficient or strikes >= max_insufficient:
                stopped = "sufficient" if verdict.sufficient else "insufficient"
                break
            body = f"insufficient; missing: {'; '.join(verdict.missing) or 'unspecified'}"
            last = tools.note("evaluate", {}, body)
        else:
            try:
                last = _step(tools, state, action)
            except ScoutError as err:
                last, errors = _error(tools, action, err), errors + 1
        history.append(last)
        if not evaluate and last.tool == "update":
            stopped = "first_update"
            break
    return _finish(tools, state, policy, history, turns, stopped, errors, policy_error)


def _finish(tools: Tools, state: EpistemicState, policy: Policy, *run: Any) -> Result:
    """The answer from the state only, and the run's Result (``run``: history, turns,
    stopped, errors, policy_error)."""
    text = state.render()
    tools.charge_state(text)
    answer = policy.answer(state.question, text).strip()
    history, turns, stopped, errors, policy_error = run
    grounded = state.grounded(answer)
    usage = dict(policy.usage())
    return Result(
        answer, state, history, tools.ledger, turns, stopped, grounded, usage, errors, policy_error
    )


def answer_from_history(result: Result, policy: Policy) -> tuple[str, int]:
    """ReAct without E_t: the answer model reads the whole trajectory H_T (every observation
    in order) instead of the state. Returns the answer and the tokens it read."""
    text = f"Question: {result.state.question}\n" + "\n".join(o.text for o in result.history)
    return policy.answer(result.state.question, text).strip(), estimate_tokens(text)


def full_context(
    doc: Document, question: str, policy: Policy, window_tokens: int
) -> tuple[str, int]:
    """The plain long-context reader: the first ``window_tokens`` of the document (whole
    lines) in one prompt. Returns the answer and the tokens read."""
    if window_tokens < 1:
        raise ScoutError(f"window_tokens={window_tokens}: expected a positive token count")
    lines, used = [], estimate_tokens(f"Question: {question}\n")
    for no, line in enumerate(doc.lines, 1):
        cost = estimate_tokens(f"{no}: {line}\n")
        if used + cost > window_tokens:
            break
        lines.append(f"{no}: {line}")
        used += cost
    text = f"Question: {question}\n" + "\n".join(lines)
    return policy.answer(question, text).strip(), estimate_tokens(text)


def describe(result: Result) -> dict[str, Any]:
    """A JSON-ready summary of one run (for reports and the CLI)."""
    return {
        "answer": result.answer,
        "grounded": result.grounded,
        "stopped": result.stopped,
        "turns": result.turns,
        "tokens_read": result.ledger.total,
        "tool_calls": dict(result.ledger.calls),
        "entries": [e.render() for e in result.state.entries],
        "evaluations": len(result.state.evaluations),
        "errors": result.errors,
        "policy_error": result.policy_error,
        "usage": dict(result.usage),
    }
