"""ConRAD's first three stages: exemplar mining, the Exemplar Guardian, backward distillation.

* Retrieval and judge (stage 1): TF-IDF cosine between the open issue and every historical
  issue, the top ``k`` kept (the paper's 5); the judge picks the most similar one. The paper's
  judge is an LLM rating structural, component, symptom and impact similarity; here it is the
  retrieval score alone, so what the guardian has to catch is what lexical similarity lets
  through.
* Guardian (stage 2): root-cause similarity before anything else. It compares the open
  issue's symptom (its reproduction test run in the sandbox, ``sandbox.diagnose``) with the
  exemplar's recorded symptom: the same symptom is *useful*, a different known one *harmful*
  (the calibration rule: conflicting evidence is harmful), an unknown one on either side *not
  useful* (the default). Only useful exemplars go on; when none of the ``k`` is, there is no
  plan and the repair runs as the baseline (the paper's fallback is not stated). The paper's
  self-reflection pass would repeat a deterministic verdict and is not run.
* Backward distillation (stage 3): from the exemplar's verified fix, one step per stage of the
  Agentless pipeline (file, element, edit location, patch), the patch step being the fix
  shape ``operators.classify_fix`` recovers from the buggy and fixed functions. The paper's
  step refinement (3 variants per step, judged) has nothing to vary in a deterministic plan
  and is not run.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from neuroedge.models.conrad import operators as ops
from neuroedge.models.conrad.protocol import Exemplar, Plan, Verdict

STOP = frozenset("a an the i is in of to and for by it at on my get gets be should".split())
SITE_KINDS = {
    "slice_bound": "Slice",
    "none_guard": "FunctionDef",
    "swap_merge": "Dict",
    "scale_constant": "Constant",
    "add_key_param": "Tuple",
    "flip_compare": "Compare",
    "swap_args": "Call",
    "negate_condition": "If/Return",
}


def words(text: str) -> list[str]:
    """Lower-case alphanumeric words; identifiers split at underscores; stop words dropped."""
    return [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w and w not in STOP]


class TfIdf:
    """TF-IDF vectors (log-scaled idf, l2-normalised) over a fixed set of documents."""

    def __init__(self, documents: Sequence[str]):
        self.docs = [Counter(words(d)) for d in documents]
        n = len(self.docs)
        df = Counter(w for d in self.docs for w in d)
        self.idf = {w: math.log((1 + n) / (1 + c)) + 1.0 for w, c in df.items()}
        self.vectors = [self._vector(d) for d in self.docs]

    def _vector(self, counts: Counter) -> dict[str, float]:
        v = {w: c * self.idf.get(w, 0.0) for w, c in counts.items()}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {w: x / norm for w, x in v.items()}

    def scores(self, query: str) -> list[float]:
        """Cosine similarity of ``query`` with every document."""
        q = self._vector(Counter(words(query)))
        return [sum(x * d.get(w, 0.0) for w, x in q.items()) for d in self.vectors]


def retrieve(issue: str, history: Sequence[Exemplar], k: int = 5) -> list[Exemplar]:
    """The ``k`` historical issues most similar to ``issue``, most similar first (the judge's
    pick is the first)."""
    scores = TfIdf([e.issue for e in history]).scores(issue)
    order = sorted(range(len(history)), key=lambda i: (-scores[i], history[i].name))
    return [history[i] for i in order[:k]]


def guard(symptom: str, exemplar: Exemplar) -> Verdict:
    """The guardian's verdict on ``exemplar`` for an issue whose test shows ``symptom``."""
    unknown = {"unknown", "passed"}
    if symptom in unknown or exemplar.symptom in unknown:
        return Verdict("not_useful", 0.0, f"symptom unknown ({symptom} / {exemplar.symptom})")
    if symptom == exemplar.symptom:
        return Verdict("useful", 0.8, f"same root-cause symptom: {symptom}")
    return Verdict(
        "harmful", -0.6, f"different root cause: issue {symptom}, exemplar {exemplar.symptom}"
    )


def distill(exemplar: Exemplar) -> Plan:
    """The four-stage plan read backwards from the exemplar's verified fix."""
    fix = ops.classify_fix(exemplar.buggy, exemplar.fixed)
    shape = fix.shape if fix else ""
    params = fix.params if fix else ()
    kind = SITE_KINDS.get(shape, "")
    n_params = len(ops.parse_function(exemplar.buggy).args.args)
    what = f"{shape}{list(params)}" if shape else "an edit no single shape reproduces"
    steps = (
        f"Step 1 (file): the fix edited {exemplar.path}; look for the module whose function "
        f"admits a {shape or 'similar'} edit.",
        f"Step 2 (element): a function of {n_params} parameters with a {kind or 'matching'} "
        "node, like the exemplar's.",
        f"Step 3 (edit location): the {kind or 'edited'} node of that function; "
        f"{ops.SHAPE_TEXT.get(shape, 'the same kind of edit')}.",
        f"Step 4 (patch): apply {what}, the exemplar's verified fix, which changed:\n"
        + ops.changed_lines(exemplar.buggy, exemplar.fixed),
    )
    return Plan(exemplar.name, shape, params, kind, steps)


def choose_exemplar(
    issue: str, symptom: str, history: Sequence[Exemplar], k: int = 5, guardian: bool = True
) -> tuple[Exemplar | None, list[tuple[Exemplar, Verdict]], int]:
    """Retrieval, the judge, then (with ``guardian``) the first useful exemplar in the judge's
    order. Returns the exemplar (None: no plan), each (exemplar, verdict) given, model calls."""
    ranked = retrieve(issue, history, k)
    if not guardian:
        return (ranked[0] if ranked else None), [], 1  # the judge
    verdicts = []
    for ex in ranked:
        verdicts.append((ex, guard(symptom, ex)))
        if verdicts[-1][1].label == "useful":
            return ex, verdicts, 1 + len(verdicts)
    return None, verdicts, 1 + len(verdicts)
