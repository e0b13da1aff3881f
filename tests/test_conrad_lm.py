"""apr.conrad with a real language model choosing at each stage (the bundled SmolLM2-135M,
loaded once for this file, ~20 s): prompts, cached option scoring, a whole repair pass."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from neuroedge.models.conrad.corpus import generate
from neuroedge.models.conrad.lm import LMRepairer, prompt_text
from neuroedge.models.conrad.protocol import ConradError, Plan
from neuroedge.models.conrad.repair import Option, StageQuery, repair_once
from neuroedge.models.conrad.sandbox import Sandbox

PLAN = Plan("take", "slice_bound", ("+1",), "Slice", ("Step 1 (file): x", "Step 4 (patch): y"))


def _query(plan: Plan | None = PLAN) -> StageQuery:
    opts = (Option("orders.py"), Option("meters.py"), Option("tickets.py"))
    return StageQuery("file_think", "take_orders drops the last order", "", plan, opts)


def test_prompt_carries_the_plan_and_the_calibration_prompt_drops_issue_and_plan() -> None:
    text = prompt_text(_query())
    assert "take_orders drops" in text and "Step 4 (patch): y" in text
    assert text.endswith(
        "Which file has the bug?\nOptions:\n- orders.py\n- meters.py\n- tickets.py"
    )
    null = prompt_text(_query(), null=True)
    assert "take_orders" not in null and "Step 1" not in null and "- meters.py" in null
    assert "Plan distilled" not in prompt_text(_query(None))


@pytest.fixture(scope="module")
def lm() -> LMRepairer:
    return LMRepairer()


def _reference(lm: LMRepairer, head: list[int], text: str) -> float:
    """Mean log-probability of ``text`` after ``head``, one uncached forward."""
    import torch

    tail = lm.tok(text, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([head + tail])
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(ids).logits.float(), -1)[0]
    pos = torch.arange(len(head) - 1, len(head) + len(tail) - 1)
    return float(logp[pos, torch.tensor(tail)].mean())


def test_cached_option_scores_equal_one_forward_per_option(lm: LMRepairer) -> None:
    q = _query()
    head = lm._ids(q)
    cached = lm._logprobs(head, q)
    want = [_reference(lm, head, o.text) for o in q.options]
    assert all(math.isfinite(x) for x in cached)
    assert max(abs(a - b) for a, b in zip(cached, want, strict=True)) < 1e-3
    calibrated = lm.scores(q)
    null = lm._logprobs(lm._ids(q, null=True), q)
    assert calibrated == pytest.approx([a - b for a, b in zip(cached, null, strict=True)])


def test_a_whole_repair_pass_with_the_language_model(lm: LMRepairer) -> None:
    corpus = generate(0, targets=7)
    name = corpus.targets[0]
    f = corpus.function(name)
    files = corpus.files(buggy=(name,))
    sources = sorted(p for p in files if not p.startswith("tests/"))
    before = lm.calls
    with Sandbox(files) as box:
        a = repair_once(f.issue, box, sources, lm, PLAN)
    assert lm.calls - before == a.calls == 4
    assert a.path in sources and a.search and a.replace != a.search


def test_a_missing_model_is_refused_naming_it(tmp_path: Path) -> None:
    from neuroedge.models.conrad.experiment import check_config

    with pytest.raises(ConradError, match="no such model file"):
        LMRepairer(tmp_path / "none.gguf")
    with pytest.raises(ConradError, match="model 'gpt9'"):
        check_config({"model": "gpt9"})
    with pytest.raises(ConradError, match="arms must be a non-empty list"):
        check_config({"arms": ["oracle"]})
