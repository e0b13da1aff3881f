"""The ltu.scout benchmark: SCOUT against its ablations and a long-context reader, over
generated documents of growing length (``corpus``), one command.

Methods, per question, all with the same policy (``policy_factory``): the offline
``KeywordPolicy``; ``ChatPolicy`` on an OpenAI-compatible endpoint when ``endpoint`` and
``llm_model`` are set; or, with ``local_model`` (``smollm2``: the bundled SmolLM2-135M-Instruct,
else a GGUF file or model folder), the keyword forager with that model writing every answer
(``local.AnswerOnly``; ``local_role=all``: that model forages and evaluates too, through
``ChatPolicy``; the long-context window is then capped at half the model's context):

* ``scout``: the full loop (``agent.forage``), answered from E_T;
* ``no_evaluate``: the loop stopped after its first Update (the paper's "w/o Evaluate");
* ``react``: the same foraging as ``scout``, answered from the history H_T (no E_t);
* ``full_context``: the first ``window_tokens`` of the document in one prompt.

A question is answered right when the answer names its gold value as a whole token
(case-insensitive) and no other value of that kind: not the revoked value, and no other number
(vault codes, radio channels) or call sign (``right``). Tokens are the offline estimate of
``document.estimate_tokens``: for the loop, every observation shown to the forager (tool
results, Update confirmations, Evaluate feedback, errors) plus every state render the
evaluator and answer model read; for ``react``, the foraging plus the history given to the
answer model; for ``full_context``, the window. With a chat policy, ``llm_prompt_tokens`` /
``llm_completion_tokens`` are the server's counts per question (for ``react``: its answer call
only; its foraging is SCOUT's run).
``provenance`` is the fraction of right SCOUT answers whose value occurs as a whole token in an
entry of E_T and in that entry's anchored span (``EpistemicState.grounded``).

The claims read (the research notes' offline checks, section 1.4 of host_llm_papers.md): C1
SCOUT reads <= 1/8 of the full-context tokens at every size >= 256k (not measured, holds None,
when no size is that large); C2 its tokens at 1M are <= 1.5x those at 64k (not measured,
None, without both sizes); C3 SCOUT accuracy >= 0.9 at every size while full context is < 0.6
at 1M (None without a 1M size, unless SCOUT's accuracy already fails it);
C4 provenance 1.0; C5 two-hop accuracy without Evaluate <= 0.6; C6 on distractor questions,
answering from E_T is right more often than answering from H_T, at every size. All hold when
none fails and none is unmeasured (a failure makes the verdict False, else an unmeasured claim
makes it None). With the keyword policy these check the loop and its costs, not an LLM's
accuracy (its exact answer rule reads H_T as well as E_T, so C6 cannot hold there); with a
local model, C3 and C6 measure that model's reading of the evidence.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.types import Measurement, Report

NAME = "ltu.scout"
METHODS = ("scout", "no_evaluate", "react", "full_context")
DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "sizes": [64_000, 256_000, 1_000_000],
    "questions": 30,
    "window_tokens": 128_000,
    "max_turns": 200,
    "endpoint": "",
    "llm_model": "",
    "local_model": "",
    "local_role": "answer",
}


def check_config(given: Mapping[str, Any]) -> dict[str, Any]:
    """DEFAULTS under the user's ``given``, every value the bench reads checked before any
    work (ConfigError naming the key); a key the chosen policy never reads is refused."""
    from neuroedge.config_values import choice, int_list, integer
    from neuroedge.errors import ConfigError
    from neuroedge.models.scout.corpus import TOKENS_PER_QUESTION

    cfg = {**DEFAULTS, **given}
    out = dict(cfg)
    out["seed"] = integer(cfg, "seed", 0, 2**31 - 1)
    out["sizes"] = sorted(int_list(cfg, "sizes", 1_000, 20_000_000))
    out["questions"] = integer(cfg, "questions", 1, 76)
    out["window_tokens"] = integer(cfg, "window_tokens", 1_000, 10_000_000)
    out["max_turns"] = integer(cfg, "max_turns", 1, 10_000)
    for key in ("endpoint", "llm_model", "local_model"):
        if not isinstance(cfg[key], str):
            raise ConfigError(f"{key}={cfg[key]!r}: expected a string")
    if bool(out["endpoint"]) != bool(out["llm_model"]):
        raise ConfigError(
            f"endpoint={out['endpoint']!r}, llm_model={out['llm_model']!r}: give both (an "
            "OpenAI-compatible base URL and its model name) or neither (the keyword policy)"
        )
    out["local_role"] = choice(cfg, "local_role", ("answer", "all"))
    if "local_role" in given and not out["local_model"]:
        raise ConfigError(
            f"local_role={out['local_role']!r} without local_model: the role is the local "
            "model's (answer: it writes the answers; all: it forages and evaluates too); give "
            "local_model=smollm2 (or a GGUF file or model folder), or leave local_role out"
        )
    if out["endpoint"] and out["local_model"]:
        raise ConfigError("endpoint and local_model: give one answer model, not both")
    if out["sizes"][0] < TOKENS_PER_QUESTION * out["questions"]:
        raise ConfigError(
            f"sizes={out['sizes']}: each must be >= {TOKENS_PER_QUESTION} x questions"
        )
    return out


def policy_factory(cfg: Mapping[str, Any]) -> Callable[[], Any]:
    """A new policy per run: the keyword policy; a chat LLM on the configured endpoint; or, with
    ``local_model`` ("smollm2" for the bundled one, else a GGUF file or model folder), the
    keyword policy's foraging with that local model's answers (``local.AnswerOnly``), or with
    ``local_role="all"`` that model in every role (``ChatPolicy``)."""
    from neuroedge.models.scout.chat import ChatPolicy, OpenAIChat
    from neuroedge.models.scout.keyword import KeywordPolicy

    if cfg.get("local_model"):
        from neuroedge.models.scout.local import AnswerOnly, LocalChat

        path = None if cfg["local_model"] == "smollm2" else cfg["local_model"]
        LocalChat(path)  # load (and check) once, before any question
        if cfg.get("local_role") == "all":
            return lambda: ChatPolicy(LocalChat(path), max_tokens=128)
        return lambda: AnswerOnly(LocalChat(path))
    if not cfg.get("endpoint"):
        return KeywordPolicy
    return lambda: ChatPolicy(OpenAIChat(cfg["endpoint"], cfg["llm_model"]))


def policy_name(cfg: Mapping[str, Any]) -> str:
    if cfg.get("local_model"):
        if cfg.get("local_role") == "all":
            return f"{Path(cfg['local_model']).name} in every role"
        return f"keyword forager, {Path(cfg['local_model']).name} answers"
    return "chat" if cfg.get("endpoint") else "keyword"


def window_for(make: Callable[[], Any], cfg: Mapping[str, Any]) -> int:
    """``window_tokens``, capped at half a local model's context (estimated tokens run ~6 %
    above SmolLM2's own on this text, so the prompt stays well inside the context)."""
    policy = make()  # ChatPolicy holds its client; AnswerOnly, a ChatPolicy as .chat
    client = getattr(policy, "client", None) or getattr(
        getattr(policy, "chat", None), "client", None
    )
    context = getattr(client, "context", None)
    return min(cfg["window_tokens"], context // 2) if context else cfg["window_tokens"]


# A line reference: a history or window line's "4023: " prefix, or "line(s) 120, 121 / 12-14".
LINE_REFERENCE = re.compile(r"(?mi)^\s*\d+:\s|\blines?\s+\d+(?:\s*(?:-|and|,)\s*\d+)*")


def right(answer: str, gold: str, others: Sequence[str] = ()) -> bool:
    """True when ``answer`` names ``gold`` and no other value of its kind: ``gold`` occurs as a
    whole token (not joined to a letter, digit or hyphen; case-insensitive), none of ``others``
    (the question's revoked value) occurs so, and every value-like token of ``gold``'s shape
    (``corpus.value_shape``: any number for a numeric gold, any SIGN-N call sign for a call
    sign) is ``gold`` itself. An answer that hedges ("7825 or 5083"), lists ("channels 12, 19,
    42") or names the revoked value beside the gold is wrong; "The radio channel of agent
    SIERRA-57 is 96." is right for 96 (SIERRA-57 is an agent id, not a number). Line references
    (``LINE_REFERENCE``: a copied "4023: " line prefix, "(line 4023)", "lines 120 and 121") are
    not values: they are dropped first, so an answer citing its line is judged like one citing an
    anchor ``[L12-L12]``, and a line number never counts as the gold."""
    from neuroedge.models.scout.corpus import value_shape
    from neuroedge.models.scout.state import whole_token

    answer = LINE_REFERENCE.sub(" ", answer)
    if whole_token(gold).search(answer) is None:
        return False
    if any(o and o.lower() != gold.lower() and whole_token(o).search(answer) for o in others):
        return False
    shape = value_shape(gold)
    found = re.findall(shape, answer, re.I) if shape else []
    return all(v.lower() == gold.lower() for v in found)


def _usage(u: Mapping[str, int]) -> tuple[int, int]:
    return int(u.get("prompt", 0)), int(u.get("completion", 0))


def one_question(doc: Any, q: Any, make: Callable[[], Any], cfg: Mapping[str, Any]) -> dict:
    """Every method on one question: {method: {right, tokens, answer_tokens, ...}}."""
    from neuroedge.models.scout import agent
    from neuroedge.models.scout.document import estimate_tokens

    out = {}
    for method, evaluate in (("scout", True), ("no_evaluate", False)):
        t0 = time.perf_counter()
        r = agent.forage(doc, q.question, make(), max_turns=cfg["max_turns"], evaluate=evaluate)
        ok = right(r.answer, q.answer, (q.revoked,))
        out[method] = {
            "right": ok,
            "answer": r.answer,
            "tokens": r.ledger.total,
            "answer_tokens": r.answer_tokens,
            "provenance": ok and r.state.grounded(q.answer),
            "turns": r.turns,
            "policy_error": r.stopped == "policy_error",
            "seconds": time.perf_counter() - t0,
            "llm": _usage(r.usage),
        }
        if method == "scout":
            scout = r
    t0 = time.perf_counter()
    policy = make()
    answer, read = agent.answer_from_history(scout, policy)
    out["react"] = {
        "right": right(answer, q.answer, (q.revoked,)),
        "answer": answer,
        "tokens": scout.ledger.observed + read,
        "answer_tokens": read,
        "seconds": out["scout"]["seconds"] + time.perf_counter() - t0,
        "llm": _usage(policy.usage()),
    }
    t0 = time.perf_counter()
    policy = make()
    answer, read = agent.full_context(doc, q.question, policy, cfg["window_tokens"])
    out["full_context"] = {
        "right": right(answer, q.answer, (q.revoked,)),
        "answer": answer,
        "tokens": read,
        "answer_tokens": read,
        "seconds": time.perf_counter() - t0,
        "llm": _usage(policy.usage()),
    }
    out["meta"] = {
        "question": q.question,
        "gold": q.answer,
        "revoked": q.revoked,
        "hops": q.hops,
        "distractor": q.distractor,
        "q_tokens": estimate_tokens(q.question),
    }
    return out


def run_size(
    tokens: int, cfg: Mapping[str, Any], make: Callable[[], Any], bar: Any
) -> dict[str, Any]:
    from neuroedge.models.scout.corpus import generate
    from neuroedge.models.scout.document import Document

    corpus = generate(tokens, cfg["questions"], cfg["seed"])
    doc = Document.from_text(corpus.text, f"generated:{tokens}")
    cfg = {**cfg, "window_tokens": window_for(make, cfg)}
    per = []
    for q in corpus.questions:
        per.append(one_question(doc, q, make, cfg))
        bar.update(1)
    return {
        "tokens": corpus.tokens,
        "lines": doc.n_lines,
        "window_tokens": cfg["window_tokens"],
        "questions": per,
    }


def summarise(per: Sequence[Mapping[str, Any]], method: str) -> dict[str, float]:
    rows = [p[method] for p in per]
    meta = [p["meta"] for p in per]

    def acc(keep: Callable[[Mapping[str, Any]], bool]) -> float:
        picked = [r["right"] for r, m in zip(rows, meta, strict=True) if keep(m)]
        return float(np.mean(picked)) if picked else float("nan")

    out = {
        "accuracy": acc(lambda m: True),
        "accuracy_two_hop": acc(lambda m: m["hops"] == 2),
        "accuracy_distractor": acc(lambda m: m["distractor"]),
        "tokens_per_question": float(np.mean([r["tokens"] for r in rows])),
        "answer_input_tokens": float(np.mean([r["answer_tokens"] for r in rows])),
        "ms_per_question": 1e3 * float(np.mean([r["seconds"] for r in rows])),
        "llm_prompt_tokens": float(np.mean([r["llm"][0] for r in rows])),
        "llm_completion_tokens": float(np.mean([r["llm"][1] for r in rows])),
    }
    if "provenance" in rows[0]:
        n_right = sum(r["right"] for r in rows)
        out["provenance"] = sum(r["provenance"] for r in rows) / n_right if n_right else 0.0
        out["turns"] = float(np.mean([r["turns"] for r in rows]))
        out["policy_errors"] = float(np.mean([r["policy_error"] for r in rows]))
    return out


UNITS = {
    "accuracy": "fraction",
    "accuracy_two_hop": "fraction",
    "accuracy_distractor": "fraction",
    "tokens_per_question": "tokens (estimated)",
    "answer_input_tokens": "tokens (estimated)",
    "ms_per_question": "ms",
    "llm_prompt_tokens": "tokens (server)",
    "llm_completion_tokens": "tokens (server)",
    "provenance": "fraction of right answers",
    "turns": "actions",
    "policy_errors": "fraction of runs (no usable action)",
}


def rows_from(res: Mapping[str, Any], policy: str) -> list[Report]:
    rows = []
    for size, block in res["sizes"].items():
        for method in METHODS:
            s = block["summary"][method]
            how = {"tokens_per_question": "estimated", "answer_input_tokens": "estimated"}
            metrics = {
                k: Measurement(v, UNITS[k], how.get(k, "measured"))
                for k, v in s.items()
                if not (k.startswith("llm_") and policy == "keyword")
            }
            rows.append(Report(NAME, "host", f"{method}@{int(size) // 1000}k", metrics=metrics))
    return rows


def bench(
    out_dir: str,
    backends: Sequence[str] = ("host",),
    config: Mapping[str, Any] | None = None,
    history: str | None = None,
) -> dict[str, Any]:
    """Every method at every size; report.json/report.md/scout.png; returns the document."""
    from neuroedge.bench.report import build_document, write_report
    from neuroedge.models.scout.claims import claim_section, claims, scout_plot
    from tqdm import tqdm

    cfg = check_config(config or {})
    policy = policy_name(cfg)
    res: dict[str, Any] = {"sizes": {}}
    make = policy_factory(cfg)  # a missing model fails here, before any document
    with tqdm(total=len(cfg["sizes"]) * cfg["questions"], desc=NAME) as bar:
        for size in cfg["sizes"]:
            block = run_size(size, cfg, make, bar)
            block["summary"] = {m: summarise(block["questions"], m) for m in METHODS}
            res["sizes"][str(size)] = block
    columns = [
        "accuracy",
        "accuracy_two_hop",
        "accuracy_distractor",
        "tokens_per_question",
        "answer_input_tokens",
        "provenance",
        "turns",
        "ms_per_question",
    ]
    if policy != "keyword":
        columns += ["llm_prompt_tokens", "llm_completion_tokens", "policy_errors"]
    doc = build_document(NAME, rows_from(res, policy), config=cfg, results=res, policy=policy)
    doc["claim"] = claims(res)
    write_report(
        doc,
        out_dir,
        columns=columns,
        sections=claim_section(doc),
        plots=[scout_plot],
        history=history,
    )
    return doc
