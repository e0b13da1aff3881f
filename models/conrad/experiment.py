"""The notes' offline ConRAD experiment: four arms on the generated repository's open issues.

Per seed, ``corpus.generate`` writes a repository of 70 functions; ``targets`` of them carry
an open bug (one repository copy per issue, the other functions correct) and the other 50 are
history, their symptoms recorded by running their tests against their buggy versions. Arms,
each on the same issue, sandbox and reproduction-test result:

* ``baseline``: one greedy repair pass, no plan;
* ``conrad``: retrieval, judge, guardian, backward distillation, one greedy pass with the plan;
* ``no_guardian``: the same with the judge's exemplar taken as is;
* ``forward``: forward exploration, 1 greedy + ``samples - 1`` passes at ``temperature``,
  the first patch that passes the reproduction test is kept (test-based selection).

pass@1: the kept patch applied, the repository's whole test suite passes (the issue's test and
every other function's). Model calls are the stage decisions the repairer is asked for (one
per stage per pass, plus the judge and one per guardian verdict); with an LLM each would be
one request. Test runs are the runs of the issue's reproduction test an arm uses (the
guardian's one; forward exploration's selection); the final whole-suite check that scores
every arm is not counted.
"""

from __future__ import annotations

import difflib
import re
import time
from pathlib import Path
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from neuroedge.models.conrad import operators as ops
from neuroedge.models.conrad.corpus import Corpus, generate
from neuroedge.models.conrad.mining import choose_exemplar, distill
from neuroedge.models.conrad.protocol import STAGES, Attempt, ConradError, Exemplar
from neuroedge.models.conrad.repair import ScriptedRepairer, StagedRepairer, repair_once
from neuroedge.models.conrad.sandbox import Sandbox, all_pass, diagnose
from neuroedge.models.conrad.unread import check_unread

NAME = "apr.conrad"
# The longest run of one test file a config may set: a day, where the generated functions' tests
# take milliseconds (default 30 s); 99999999999 overflowed subprocess's timeout, a traceback.
MAX_TIMEOUT_S = 86_400.0
# The most forward-exploration passes per issue: 125x the paper's 8 (each pass is a full repair
# with its model calls and a test run); samples=10**12 ran on without end.
MAX_SAMPLES = 1000
ARMS = ("baseline", "conrad", "no_guardian", "forward")
DEFAULTS: dict[str, Any] = {
    "seeds": [0, 1, 2, 3, 4],
    "targets": 20,  # open issues per seed
    "top_k": 5,  # exemplars retrieved (the paper's 5)
    "samples": 8,  # forward exploration's passes
    "temperature": 0.8,  # forward exploration's sampling temperature (the paper's)
    "timeout_s": 30.0,  # per test run
    "model": "scripted",  # "scripted", "smollm2" (bundled), a model path or "endpoint"
    "decode": "score",  # a local model: "score" the options (lm) or "generate" a reply (chat)
    "endpoint": "",  # model=endpoint: an OpenAI-compatible base URL ...
    "llm_model": "",  # ... and the model name it serves
    "lm_stages": list(STAGES),  # the stages the language model decides (others: scripted)
    "arms": list(ARMS),
}


def make_model(cfg: Mapping[str, Any], seed: int, temperature: float = 0.0) -> Any:
    """The stage model the config names (an LM is loaded once per process)."""
    if cfg["model"] == "scripted":
        return ScriptedRepairer(seed, temperature)
    lm = _language_model(cfg, seed, temperature)
    stages = cfg.get("lm_stages", STAGES)
    if set(stages) == set(STAGES):
        return lm
    scripted = ScriptedRepairer(seed, temperature)
    return StagedRepairer({s: lm if s in stages else scripted for s in STAGES})


def _language_model(cfg: Mapping[str, Any], seed: int, temperature: float) -> Any:
    """The language model at the LM stages: a chat client answering with option numbers
    (an endpoint, or a local model with ``decode=generate``), else likelihood scoring."""
    from neuroedge.models.conrad.chat import ChatRepairer
    from neuroedge.models.scout.chat import ChatError, OpenAIChat

    if cfg["model"] == "endpoint":
        try:
            client = OpenAIChat(cfg["endpoint"], cfg["llm_model"])
        except ChatError as err:
            raise ConradError(str(err)) from err
        return ChatRepairer(client, temperature, seed)
    path = None if cfg["model"] == "smollm2" else cfg["model"]
    if cfg.get("decode", "score") == "generate":
        from neuroedge.models.scout.local import LocalChat

        try:
            return ChatRepairer(LocalChat(path), temperature, seed)
        except ChatError as err:
            raise ConradError(str(err)) from err
    from neuroedge.models.conrad.lm import LMRepairer

    return LMRepairer(path, temperature, seed)


def model_label(cfg: Mapping[str, Any]) -> str:
    """The stage model in words: which model, how it answers, at which stages."""
    model = cfg["model"]
    if model == "scripted":
        return "scripted"
    if model == "endpoint":
        label = f"{cfg['llm_model']} at {cfg['endpoint']} (answers with a number)"
    else:
        how = "writes its answer" if cfg.get("decode") == "generate" else "options scored"
        label = f"{Path(model).name if model != 'smollm2' else model} ({how})"
    stages = cfg.get("lm_stages", STAGES)
    if set(stages) != set(STAGES):
        label += f" at {', '.join(stages)}, scripted elsewhere"
    return label


def usage_of(model: Any) -> dict[str, int]:
    """Token counts of the chat clients behind a stage model (none for the others)."""
    parts = list(getattr(model, "by_stage", {}).values()) or [model]
    out: dict[str, int] = {}
    for m in {id(p): p for p in parts}.values():
        if hasattr(m, "usage"):
            for key, n in m.usage().items():
                out[key] = out.get(key, 0) + int(n)
    return out


def check_config(cfg: Mapping[str, Any], method: str | None = None) -> dict[str, Any]:
    """The config with every value checked (ConfigError / ConradError naming key and value);
    ``method``: the one arm a build runs (``arms`` otherwise)."""
    from neuroedge.config_values import integer, number

    out = {**DEFAULTS, **dict(cfg)}
    unknown = sorted(set(out) - set(DEFAULTS) - {"seed"})
    if unknown:
        raise ConradError(f"unknown config keys {unknown}; expected some of {sorted(DEFAULTS)}")
    out["seeds"] = _seeds(cfg)
    out.pop("seed", None)
    for key in ("targets", "top_k"):
        out[key] = integer(out, key, 1)
    out["samples"] = integer(out, "samples", 1, MAX_SAMPLES)
    out["temperature"] = number(out, "temperature", 0.0, open_low=True)
    out["timeout_s"] = number(out, "timeout_s", 0.0, MAX_TIMEOUT_S, open_low=True)
    for key in ("endpoint", "llm_model"):  # [] or {} read as "not given", a scripted run
        if key in cfg and (not isinstance(cfg[key], str) or not cfg[key]):
            raise ConradError(
                f"{key}={cfg[key]!r}: expected a non-empty string (with model=endpoint); "
                "leave the key out for the scripted model"
            )
    for key, known in (("lm_stages", STAGES), ("arms", ARMS)):
        value = out[key]  # an unhashable item ([[1]]) failed in set(): a traceback
        if (
            not isinstance(value, list | tuple)
            or not value
            or not all(isinstance(x, str) for x in value)
            or set(value) - set(known)
        ):
            raise ConradError(f"{key} must be a non-empty list of {list(known)}, got {value!r}")
        out[key] = [x for x in known if x in value]
    out["arms"] = [method] if method else out["arms"]
    model = out["model"]
    if not isinstance(model, str) or (  # "" exists as Path("") (".") and loaded the cwd
        model not in ("scripted", "smollm2", "endpoint") and (not model or not Path(model).exists())
    ):
        raise ConradError(
            f"model {model!r}: 'scripted', 'smollm2', a model file / folder or 'endpoint'"
        )
    if out["endpoint"] and not re.match(r"https?://", str(out["endpoint"])):
        raise ConradError(f"endpoint {out['endpoint']!r}: expected http://host[:port]/path")
    if out["decode"] not in ("score", "generate"):
        raise ConradError(f"decode {out['decode']!r}: 'score' or 'generate'")
    chat = [k for k in ("endpoint", "llm_model") if out[k]]
    if (model == "endpoint") != bool(chat) or (chat and len(chat) < 2):
        raise ConradError(
            f"model={model!r}, endpoint={out['endpoint']!r}, llm_model={out['llm_model']!r}: "
            "model=endpoint needs both the endpoint (an OpenAI-compatible base URL) and "
            "llm_model, and those keys need model=endpoint"
        )
    check_unread(cfg, model, out["arms"], "method" if method else "arms")
    return out


def _seeds(cfg: Mapping[str, Any]) -> list[int]:
    """The user's ``seeds`` (distinct integers) or ``[seed]``, the default seeds when neither
    is given; both together are refused (one of them was silently dropped)."""
    from neuroedge.config_values import SEED_MAX, int_list, integer

    if "seed" in cfg and "seeds" in cfg:
        raise ConradError(
            f"seed={cfg['seed']!r} and seeds={cfg['seeds']!r}: give one (seed=S runs one seed, "
            "seeds=[...] several)"
        )
    if "seed" in cfg:
        return [integer(cfg, "seed", 0, SEED_MAX)]
    seeds = int_list({**DEFAULTS, **cfg}, "seeds", 0, SEED_MAX)  # each seed's corpus, numpy's
    if len(set(seeds)) != len(seeds):  # [0, 0] ran seed 0 once and reported one seed
        raise ConradError(f"seeds={seeds!r}: a seed is given twice; give each once")
    return seeds


def history_of(corpus: Corpus, timeout: float = 30.0) -> list[Exemplar]:
    """Every historical fix with the symptom its test showed before the fix (one test run)."""
    with Sandbox(corpus.files(buggy=corpus.history), timeout) as box:
        outcome = {o.test: o for o in box.run()}
    out = []
    for name in corpus.history:
        f = corpus.function(name)
        if f.test_id not in outcome:
            raise ConradError(f"historical test {f.test_id} did not run")
        symptom = diagnose(outcome[f.test_id])
        out.append(Exemplar(f.name, f.path, f.issue, f.buggy, f.fixed, symptom, f.family))
    return out


def patch_text(box: Sandbox, a: Attempt) -> str:
    """The attempt as a unified diff of its file ("" when it edits nothing)."""
    if not a.search or a.search == a.replace:
        return ""
    old = box.read(a.path)
    new = old.replace(a.search, a.replace, 1)
    diff = difflib.unified_diff(
        old.splitlines(True), new.splitlines(True), f"a/{a.path}", f"b/{a.path}"
    )
    return "".join(diff)


def suite_passes(box: Sandbox, a: Attempt, tests: Sequence[str] = ()) -> bool:
    """Whether the tests (all when empty) pass with the attempt applied."""
    if not a.search or a.search == a.replace:
        return False
    with box.patched(a.path, a.search, a.replace):
        return all_pass(box.run(tests))


def _forward(issue: Any, box: Sandbox, sources: list[str], seed: int, cfg: Mapping) -> dict:
    attempts, tokens = [], {}
    for k in range(cfg["samples"]):
        model = make_model(cfg, seed + 7919 * k, 0.0 if k == 0 else float(cfg["temperature"]))
        attempts.append(repair_once(issue.issue, box, sources, model))
        for key, n in usage_of(model).items():
            tokens[key] = tokens.get(key, 0) + n
    runs, kept = 0, attempts[0]
    for a in attempts:
        runs += 1
        if suite_passes(box, a, [issue.test_id]):
            kept = a
            break
    calls = sum(a.calls for a in attempts)
    unanswered = sum(bool(a.unanswered) for a in attempts)
    return {"attempt": kept, "calls": calls, "test_runs": runs, "usage": tokens, "no": unanswered}


def run_issue(
    corpus: Corpus,
    name: str,
    history: Sequence[Exemplar],
    cfg: Mapping[str, Any],
    seed: int,
    arms: Sequence[str] = ARMS,
) -> dict[str, Any]:
    """The ``arms`` on one open issue; a dict per arm plus the issue's symptom."""
    f = corpus.function(name)
    files = corpus.files(buggy=(name,))
    sources = sorted(p for p in files if not p.startswith("tests/"))
    truth = ops.classify_fix(f.buggy, f.fixed)
    out: dict[str, Any] = {"function": name, "family": f.family}
    with Sandbox(files, cfg["timeout_s"]) as box:
        symptom = diagnose(box.run([f.test_id])[0])
        out["symptom"] = symptom
        for arm in arms:
            t0 = time.perf_counter()
            rec: dict[str, Any] = {"test_runs": int(arm == "conrad")}  # the guardian's repro
            if arm == "forward":
                res = _forward(f, box, sources, seed, cfg)
                attempt, calls, rec["test_runs"] = res["attempt"], res["calls"], res["test_runs"]
                usage, unanswered = res["usage"], res["no"]
            else:
                plan, calls = None, 0
                if arm != "baseline":
                    ex, verdicts, calls = choose_exemplar(
                        f.issue, symptom, history, cfg["top_k"], guardian=arm == "conrad"
                    )
                    plan = distill(ex) if ex else None
                    rec["exemplar_family_right"] = bool(ex and ex.family == f.family)
                    rec["plan"] = plan is not None
                    rec["plan_right"] = bool(plan and truth and plan.shape == truth.shape)
                    rec["verdicts"] = [(v.label, e.family == f.family) for e, v in verdicts]
                model = make_model(cfg, seed)
                attempt = repair_once(f.issue, box, sources, model, plan)
                calls += attempt.calls
                usage, unanswered = usage_of(model), int(bool(attempt.unanswered))
            if usage:  # a chat model's requests (re-asks included), tokens, passes unanswered
                rec.update(
                    unanswered=unanswered,
                    requests=usage.get("calls", 0),
                    prompt_tokens=usage.get("prompt", 0),
                    completion_tokens=usage.get("completion", 0),
                )
            rec["passed"] = suite_passes(box, attempt)
            rec.update(
                calls=calls,
                file_right=attempt.path == f.path,
                function_right=attempt.function == name,
                shape=attempt.shape,
                patch=patch_text(box, attempt),
                ms=1e3 * (time.perf_counter() - t0),
            )
            out[arm] = rec
    return out


def run_seed(seed: int, cfg: Mapping[str, Any], tick: Callable[[], None] | None = None) -> dict:
    corpus = generate(seed, cfg["targets"])
    history = history_of(corpus, cfg["timeout_s"])
    issues = []
    for i, name in enumerate(corpus.targets):
        issues.append(
            run_issue(corpus, name, history, cfg, 1_000_003 * seed + 101 * i, cfg["arms"])
        )
        if tick:
            tick()
    return {"issues": issues, "summary": {arm: summarise(issues, arm) for arm in cfg["arms"]}}


def summarise(issues: Sequence[Mapping[str, Any]], arm: str) -> dict[str, float]:
    recs = [i[arm] for i in issues]

    def mean(key: str) -> float:
        return float(np.mean([float(r[key]) for r in recs]))

    found = [float(r["passed"]) for r in recs if r["function_right"]]
    out = {
        "pass_at_1": mean("passed"),
        "file_localised": mean("file_right"),
        "function_localised": mean("function_right"),
        "pass_given_localised": float(np.mean(found)) if found else 0.0,
        "model_calls": mean("calls"),
        "test_runs": mean("test_runs"),
        "ms_per_issue": mean("ms"),
    }
    for key in ("requests", "prompt_tokens", "completion_tokens", "unanswered"):
        if all(key in r for r in recs):
            out[key] = mean(key)
    if arm in ("conrad", "no_guardian"):
        out["exemplar_family_right"] = mean("exemplar_family_right")
        out["plan_shape_right"] = mean("plan_right")
        out["no_plan"] = 1.0 - mean("plan")
    if arm == "conrad":
        verdicts = [v for r in recs for v in r["verdicts"]]
        useful = [same for label, same in verdicts if label == "useful"]
        wrong = [label for label, same in verdicts if not same]
        out["guardian_useful_precision"] = float(np.mean(useful)) if useful else 0.0
        out["guardian_wrong_refused"] = (
            float(np.mean([label != "useful" for label in wrong])) if wrong else 1.0
        )
    return out


UNITS = {
    "pass_at_1": "fraction",
    "file_localised": "fraction",
    "function_localised": "fraction",
    "pass_given_localised": "fraction of issues whose function was found",
    "model_calls": "calls per issue",
    "test_runs": "runs per issue",
    "ms_per_issue": "ms",
    "requests": "chat requests per issue",
    "prompt_tokens": "tokens per issue",
    "completion_tokens": "tokens per issue",
    "unanswered": "passes per issue with a stage the model gave no usable answer at",
    "exemplar_family_right": "fraction",
    "plan_shape_right": "fraction",
    "no_plan": "fraction",
    "guardian_useful_precision": "fraction of useful verdicts",
    "guardian_wrong_refused": "fraction of wrong-family exemplars",
}
