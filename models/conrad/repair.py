"""The Agentless-style repair pass (file -> element -> edit location -> patch) and its models.

Each stage is a ``StageQuery``: the issue, what the stage shows (a function's source), the
plan if any, and the options, each with the text an LLM would read (a path, a function
header, a shape description, the changed lines of an edit), its TF-IDF cosine with the issue
and how far it matches the plan's edit. A model's ``pick`` returns one option.

``ScriptedRepairer`` stands in for the LLM (the notes' MockScriptedBackend, made explicit):
file_think and func_think take the option of highest ``similarity + PLAN_BONUS * (admits the
plan's edit)``; edit_think and patch_think keep the options that match the plan best (its
shape and parameters, else its shape) and choose uniformly among them; without a plan,
uniformly among all (the shapes present, then that shape's edits). Greedy at temperature 0
(ties broken by its seeded generator), else ``softmax(score * SHARPNESS / T)``. It follows a
plan exactly: that is the assumption the scripted arms measure. ``lm.LMRepairer`` reads the
same queries with a real language model, the plan as in-context text only.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import textwrap
import random
from collections.abc import Sequence
from dataclasses import dataclass

from neuroedge.models.conrad import operators as ops
from neuroedge.models.conrad.mining import TfIdf
from neuroedge.models.conrad.protocol import Attempt, ConradError, NoAnswer, Plan
from neuroedge.models.conrad.sandbox import Sandbox

SHARPNESS = 10.0  # logits per unit of cosine similarity at temperature 1
PLAN_BONUS = 1.0  # added to the score of a file / function that admits the plan's edit


@dataclass(frozen=True)
class Option:
    """One choice of a stage."""

    text: str  # what a language model reads
    similarity: float = 0.0  # TF-IDF cosine with the issue (file and function stages)
    plan_match: int = 0  # 2: admits the plan's edit (shape and parameters), 1: its shape only


@dataclass(frozen=True)
class StageQuery:
    """One stage's question."""

    stage: str  # one of protocol.STAGES
    issue: str
    shown: str  # what the stage shows besides the issue ("" or a function's source)
    plan: Plan | None
    options: tuple[Option, ...]


class ScriptedRepairer:
    """The stage model: picks among scored options; counts its calls."""

    def __init__(self, seed: int, temperature: float = 0.0):
        if temperature < 0:
            raise ConradError(f"temperature must be >= 0, got {temperature}")
        self.rng = random.Random(seed)
        self.temperature = temperature
        self.calls = 0

    def choose(self, scores: Sequence[float]) -> int:
        self.calls += 1
        if not scores:
            raise ConradError("a stage was given no options")
        if self.temperature == 0:
            top = max(scores)
            best = [i for i, s in enumerate(scores) if s >= top - 1e-12]
            return self.rng.choice(best)
        logits = [s * SHARPNESS / self.temperature for s in scores]
        m = max(logits)
        weights = [math.exp(x - m) for x in logits]
        return self.rng.choices(range(len(scores)), weights=weights)[0]

    def pick(self, q: StageQuery) -> int:
        opts = q.options
        if q.stage in ("file_think", "func_think"):
            return self.choose([o.similarity + PLAN_BONUS * (o.plan_match > 0) for o in opts])
        best = max(o.plan_match for o in opts)
        kept = [i for i, o in enumerate(opts) if o.plan_match == best]
        return kept[self.choose([0.0] * len(kept))]


class StagedRepairer:
    """One model per stage (e.g. retrieval localisation, a language model for the edit)."""

    def __init__(self, by_stage: dict[str, object]):
        self.by_stage = by_stage
        self.calls = 0

    def pick(self, q: StageQuery) -> int:
        self.calls += 1
        return self.by_stage[q.stage].pick(q)


def functions_of(text: str, path: str) -> list[tuple[str, str]]:
    """(name, source lines) of every top-level function and every method of a top-level
    class (named ``Class.method``); a method's lines keep their indentation, so they are
    the exact SEARCH block of an edit."""
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        raise ConradError(f"{path}: does not parse at line {err.lineno}: {err.msg}") from err
    lines = text.splitlines(keepends=True)
    out = []
    for top in tree.body:
        inner = top.body if isinstance(top, ast.ClassDef) else [top]
        for node in inner:
            if isinstance(node, ast.FunctionDef):
                name = f"{top.name}.{node.name}" if node is not top else node.name
                src = "".join(lines[node.lineno - 1 : node.end_lineno]).rstrip("\n")
                out.append((name, src))
    return out


def edits_of(src: str, shapes: tuple[str, ...] = ops.SHAPES) -> list[ops.Candidate]:
    """``operators.candidates`` of a function's lines, indented or not, with each edit's
    source indented as the original; none when the lines do not parse on their own."""
    body = textwrap.dedent(src)
    pad = src[: len(src) - len(src.lstrip(" \t"))]
    try:
        found = ops.candidates(body, shapes)
    except ValueError:
        return []
    if not pad:
        return found
    return [dataclasses.replace(c, source=textwrap.indent(c.source, pad)) for c in found]


def _level(c: ops.Candidate, plan: Plan | None) -> int:
    if plan is None or not plan.shape or c.shape != plan.shape:
        return 0
    return 2 if c.params == plan.params else 1


def _admits(src: str, plan: Plan | None) -> int:
    if plan is None or not plan.shape:
        return 0
    return int(any(_level(c, plan) == 2 for c in edits_of(src, (plan.shape,))))


def repair_once(
    issue: str,
    box: Sandbox,
    sources: Sequence[str],
    model: ScriptedRepairer,
    plan: Plan | None = None,
) -> Attempt:
    """One pass of the four stages over the ``sources`` files of the sandbox; ``model`` is
    anything with ``pick(StageQuery) -> int`` and a ``calls`` counter. A stage the model
    gives no usable answer at (``NoAnswer``) ends the pass without an edit."""
    got, start = {"path": "", "function": ""}, model.calls
    try:
        return _pass(issue, box, sources, model, plan, got)
    except NoAnswer as err:
        calls = model.calls - start
        return Attempt(got["path"], got["function"], "", "", "", calls, err.stage)


def _pass(
    issue: str,
    box: Sandbox,
    sources: Sequence[str],
    model: ScriptedRepairer,
    plan: Plan | None,
    got: dict[str, str],
) -> Attempt:
    start = model.calls
    texts = [box.read(p) for p in sources]
    funcs = [functions_of(t, p) for p, t in zip(sources, texts, strict=True)]
    admits = [[_admits(src, plan) for _, src in fs] for fs in funcs]  # once per pass
    sims = TfIdf(texts).scores(issue)
    opts = tuple(
        Option(p, x, max(a, default=0)) for p, x, a in zip(sources, sims, admits, strict=True)
    )
    i = model.pick(StageQuery("file_think", issue, "", plan, opts))
    path = got["path"] = sources[i]
    if not funcs[i]:  # nothing to edit in that file: the later stages are not asked
        return Attempt(path, "", "", "", "", model.calls - start)
    sims = TfIdf([src for _, src in funcs[i]]).scores(issue)
    opts = tuple(
        Option(src.splitlines()[0].strip(), x, a)
        for (_, src), x, a in zip(funcs[i], sims, admits[i], strict=True)
    )
    j = model.pick(StageQuery("func_think", issue, f"File: {path}", plan, opts))
    name, src = funcs[i][j]
    got["function"] = name
    cands = edits_of(src)
    if not cands:
        return Attempt(path, name, "", src, src, model.calls - start)
    shapes = sorted({c.shape for c in cands}, key=ops.SHAPES.index)
    levels = [max(_level(c, plan) for c in cands if c.shape == sh) for sh in shapes]
    opts = tuple(Option(ops.SHAPE_TEXT[sh], 0.0, lv) for sh, lv in zip(shapes, levels, strict=True))
    shape = shapes[model.pick(StageQuery("edit_think", issue, f"Function:\n{src}", plan, opts))]
    mine = [c for c in cands if c.shape == shape]
    opts = tuple(Option(ops.changed_lines(src, c.source), 0.0, _level(c, plan)) for c in mine)
    edit = mine[model.pick(StageQuery("patch_think", issue, f"Function:\n{src}", plan, opts))]
    return Attempt(path, name, edit.shape, src, edit.source, model.calls - start)
