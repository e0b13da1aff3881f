"""ltu.scout: the document, tools and state, the loop and its ablations, the keyword policy
on generated documents, the bench, the registered program and the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neuroedge.models.scout import agent
from neuroedge.models.scout.corpus import generate
from neuroedge.models.scout.document import MAX_LINE_CHARS, Document, split_long_line
from neuroedge.models.scout.keyword import KeywordPolicy
from neuroedge.models.scout.protocol import Action, ScoutError, Verdict
from neuroedge.models.scout.state import EpistemicState
from neuroedge.models.scout.tools import Tools


@pytest.fixture(scope="module")
def corpus():
    return generate(40_000, 12, seed=5)


@pytest.fixture(scope="module")
def doc(corpus) -> Document:
    return Document.from_text(corpus.text, "generated")


def test_long_lines_split_at_a_sentence_end_in_the_last_fifth() -> None:
    text = "word " * 300 + "The end. " + "tail " * 200  # sentence end at ~1508 chars
    pieces = split_long_line(text.strip(), 1800)
    assert pieces[0].endswith("The end.") and len(pieces[0]) > 0.8 * 1800 - 400
    assert all(len(p) <= 1800 for p in pieces)
    assert " ".join(pieces).split() == text.split()
    hard = split_long_line("x" * 5000)
    assert [len(p) for p in hard] == [MAX_LINE_CHARS, MAX_LINE_CHARS, 1000]


def test_bad_files_are_refused_naming_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ScoutError, match="no such file"):
        Document.from_path(tmp_path / "missing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine text\n\xff\xfe more")
    with pytest.raises(ScoutError, match="byte offset 10"):
        Document.from_path(bad)
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"abc\0def")
    with pytest.raises(ScoutError, match="NUL byte at offset 3"):
        Document.from_path(nul)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n\n")
    with pytest.raises(ScoutError, match="empty"):
        Document.from_path(empty)


def test_file_info_picks_the_strategy_by_size() -> None:
    small = Document.from_text("a short line of text.\n" * 100)
    big = Document.from_text(generate(150_000, 2, 0).text)
    assert small.strategy() == "full_read" and big.strategy() == "grep_only"
    assert abs(big.estimated_tokens() - 150_000) < 0.05 * 150_000


def test_tools_check_their_arguments_and_count_tokens(doc: Document) -> None:
    tools = Tools(doc)
    with pytest.raises(ScoutError, match="not a valid regex"):
        tools.grep("(unclosed")
    with pytest.raises(
        ScoutError, match=f"offset=0: expected an integer in \\[1, {doc.n_lines}\\]"
    ):
        tools.read(0)
    with pytest.raises(ScoutError, match="limit=101"):
        tools.read(1, 101)
    hits = tools.grep("stationed in", max_hits=3)
    assert len(hits.lines) <= 3 and all("stationed in" in t for _, t in hits.lines)
    window = tools.read(5, 4)
    assert [no for no, _ in window.lines] == [5, 6, 7, 8]
    scan = tools.scan(1, 100, stride=20)
    assert [no for no, _ in scan.lines] == [1, 21, 41, 61, 81]
    assert tools.ledger.observed == hits.tokens + window.tokens + scan.tokens
    assert tools.ledger.calls == {"grep": 1, "read": 1, "scan": 1}


def test_state_anchors_are_checked_and_replace_drops_by_tag(doc: Document) -> None:
    state = EpistemicState("q?", doc)
    with pytest.raises(ScoutError, match=f"outside 1..{doc.n_lines}"):
        state.update("x", 1, doc.n_lines + 1)
    state.update("first", 1, 1, tags=["a"])
    state.update("second", 2, 2, tags=["b"])
    state.update("third", 3, 3, tags=["a"], action="replace")
    assert [e.content for e in state.entries] == ["second", "third"]
    word = doc.lines[2].split()[0]
    assert not state.grounded(word)  # the span shows it, but no entry states it
    state.update(f"{word} was there.", 3, 3)
    assert state.grounded(word) and not state.grounded("zzz-not-there")


@pytest.mark.parametrize("index", range(12))
def test_keyword_scout_answers_from_anchored_evidence(corpus, doc, index: int) -> None:
    q = corpus.questions[index]
    result = agent.forage(doc, q.question, KeywordPolicy())
    assert result.answer == q.answer, (q, [e.render() for e in result.state.entries])
    assert result.grounded and result.stopped == "sufficient"
    anchored = {e.start for e in result.state.entries}
    assert set(q.fact_lines) <= anchored  # bridge, statement and distractor all recorded


def test_without_evaluate_two_hop_questions_stop_at_the_bridge(corpus, doc) -> None:
    two_hop = [q for q in corpus.questions if q.hops == 2]
    for q in two_hop:
        result = agent.forage(doc, q.question, KeywordPolicy(), evaluate=False)
        assert result.stopped == "first_update" and len(result.state.entries) == 1
        assert result.answer == ""


def test_distractors_are_ruled_out_and_history_answers_match(corpus, doc) -> None:
    for q in (q for q in corpus.questions if q.distractor):
        result = agent.forage(doc, q.question, KeywordPolicy())
        assert any("revoked" in e.content for e in result.state.entries)
        answer, read = agent.answer_from_history(result, KeywordPolicy())
        assert answer == q.answer and read > result.answer_tokens


class Scripted:
    """A policy replaying actions; its evaluator is never satisfied."""

    name = "scripted"

    def __init__(self, actions: list[Action]) -> None:
        self.actions, self.seen = iter(actions), []

    def start(self, question, info) -> None:
        self.seen.append(info.tool)

    def next_action(self, state, last) -> Action:
        self.seen.append(last.tool)
        action = next(self.actions, Action("evaluate"))
        if isinstance(action, Exception):
            raise action
        return action

    def evaluate(self, question, state_text) -> Verdict:
        return Verdict(False, 0.0, ("everything",))

    def answer(self, question, evidence) -> str:
        return "n/a"

    def usage(self):
        return {"prompt": 0, "completion": 0, "calls": 0}


def test_bad_actions_come_back_as_errors_and_insufficient_verdicts_stop(doc) -> None:
    policy = Scripted(
        [
            Action("grep", {"pattern": "("}),
            Action("update", {"content": "x", "start": 0, "end": 1}),
            Action("read", {"offset": 1, "bogus": 2}),
        ]
    )
    result = agent.forage(doc, "What is it?", policy)
    assert result.errors == 3 and policy.seen[1:5] == ["file_info", "error", "error", "error"]
    assert result.stopped == "insufficient" and len(result.state.evaluations) == 3
    assert result.turns == 6 and not result.grounded
    capped = agent.forage(
        doc, "What is it?", Scripted([Action("scan", {"offset": 1})] * 9), max_turns=4
    )
    assert capped.stopped == "max_turns" and capped.turns == 4


def test_a_policy_without_a_usable_action_ends_the_run_but_transport_errors_raise(doc) -> None:
    from neuroedge.models.scout.chat import ChatError

    grep = Action("grep", {"pattern": "stationed in"})
    mute = Scripted([grep, ScoutError("no JSON object found in the model's reply: 'hello'")])
    result = agent.forage(doc, "What is it?", mute)
    assert result.stopped == "policy_error" and "no JSON object" in result.policy_error
    assert result.turns == 2 and result.answer == "n/a"  # still answered from the state
    assert agent.describe(result)["policy_error"] == result.policy_error
    down = Scripted([ChatError("http://127.0.0.1:9/v1/chat/completions: no reply")])
    with pytest.raises(ChatError, match="no reply"):
        agent.forage(doc, "What is it?", down)


def test_cost_stays_flat_while_the_window_misses_late_facts() -> None:
    small, large = generate(16_000, 8, 1), generate(256_000, 8, 1)
    cost, right = {}, {}
    for name, c in (("small", small), ("large", large)):
        d = Document.from_text(c.text)
        runs = [agent.forage(d, q.question, KeywordPolicy()) for q in c.questions]
        cost[name] = np.mean([r.ledger.total for r in runs])
        full = [agent.full_context(d, q.question, KeywordPolicy(), 32_000) for q in c.questions]
        right[name] = np.mean([a == q.answer for (a, _), q in zip(full, c.questions, strict=True)])
        assert all(r.answer == q.answer for r, q in zip(runs, c.questions, strict=True))
    assert cost["large"] / cost["small"] <= 1.5
    assert right["small"] == 1.0 and right["large"] < 0.6


def test_bench_writes_rows_claims_and_plot(tmp_path: Path) -> None:
    from neuroedge.models.scout.experiment import bench

    doc = bench(str(tmp_path), config={"sizes": [8_000, 40_000], "questions": 6})
    variants = [r["variant"] for r in doc["rows"]]
    assert variants[:4] == ["scout@8k", "no_evaluate@8k", "react@8k", "full_context@8k"]
    row = {r["variant"]: r["metrics"] for r in doc["rows"]}
    assert row["scout@40k"]["accuracy"]["value"] == 1.0
    assert row["full_context@40k"]["tokens_per_question"]["how"] == "estimated"
    assert set(doc["claim"]) >= {"C1_tokens_full_over_scout", "C5_no_evaluate_two_hop", "holds"}
    # no size reaches 256k: C1 is not measured; C2 and C3 name 64k and 1M, not 8k and 40k
    assert doc["claim"]["C1_tokens_full_over_scout"]["holds"] is None
    assert doc["claim"]["C2_scout_token_growth"]["holds"] is None
    assert doc["claim"]["C3_accuracy"]["holds"] is None and doc["claim"]["holds"] is False
    # the keyword answer rule reads the history as well as the state: C6 cannot hold here
    assert not doc["claim"]["C6_state_over_history_distractor"]["holds"]
    gold = doc["results"]["sizes"]["8000"]["questions"][0]["meta"]["gold"]
    assert doc["results"]["sizes"]["8000"]["questions"][0]["scout"]["answer"] == gold
    assert (tmp_path / "scout.png").stat().st_size > 0
    assert "## Claims (keyword policy)" in (tmp_path / "report.md").read_text()


def test_bench_config_is_checked_before_work(tmp_path: Path) -> None:
    from neuroedge.errors import ConfigError
    from neuroedge.models.scout.experiment import bench

    with pytest.raises(ConfigError, match="give both"):
        bench(str(tmp_path), config={"endpoint": "http://localhost:1/v1"})
    with pytest.raises(ConfigError, match="give one answer model, not both"):
        bench(
            str(tmp_path),
            config={"endpoint": "http://x/v1", "llm_model": "m", "local_model": "smollm2"},
        )
    with pytest.raises(ConfigError, match="local_role='both': expected one of answer, all"):
        bench(str(tmp_path), config={"local_role": "both"})
    with pytest.raises(ConfigError, match="questions=0"):
        bench(str(tmp_path), config={"questions": 0})
    assert not any(tmp_path.iterdir())


def test_an_endpoint_gives_the_chat_policy() -> None:
    from neuroedge.models.scout.chat import ChatPolicy
    from neuroedge.models.scout.experiment import policy_factory

    made = policy_factory({"endpoint": "http://127.0.0.1:9/v1", "llm_model": "m"})()
    assert (
        isinstance(made, ChatPolicy) and made.client.url == "http://127.0.0.1:9/v1/chat/completions"
    )
    assert isinstance(policy_factory({"endpoint": "", "llm_model": ""})(), KeywordPolicy)


def test_registered_program_runs_and_names_bad_bytes() -> None:
    from neuroedge.models.scout.spec import SPEC, decode, encode

    program, example = SPEC.build({}), SPEC.example(0)
    out = program.fn(**example)
    answer = decode(out["answer"], "answer", True)
    gold = generate(8_000, 2, 0).questions[0].answer
    assert answer == gold and bool(out["grounded"][0]) and out["tokens_read"][0] > 0
    bad = example["document"].copy()
    bad[7] = 0xFF
    with pytest.raises(ScoutError, match="document: not UTF-8 at byte 7"):
        program.fn(document=bad, question=example["question"])
    with pytest.raises(ValueError, match="question has 2000 UTF-8 bytes > 1024"):
        encode("q" * 2000, 1024, "question")


def test_command_line_on_a_users_file(tmp_path: Path, capsys) -> None:
    from neuroedge.models.scout.__main__ import main

    c = generate(20_000, 2, 4)
    path = tmp_path / "notes.txt"
    path.write_text(c.text)
    assert main([str(path), c.questions[1].question, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["answer"] == c.questions[1].answer and got["grounded"]
    assert main([str(tmp_path / "none.txt"), "q?"]) == 2
    assert "none.txt: no such file" in capsys.readouterr().err
    assert main([str(tmp_path), "q?"]) == 2
    assert f"{tmp_path}: is a directory (expected a UTF-8 text file)" in capsys.readouterr().err
    assert main([str(path), "q?", "--endpoint", "http://x"]) == 2
    capsys.readouterr()
    for turns in ("0", "-5"):
        assert main([str(path), "q?", "--max-turns", turns]) == 2
        assert f"--max-turns={turns}: expected an integer >= 1" in capsys.readouterr().err


def test_ids_match_whole_ids_and_exact_bridges_come_first() -> None:
    from neuroedge.models.scout.keyword import parse, resolve

    evidence = (
        "Question: What is the vault code of agent ZETA-1?\n"
        "[L1-L1] The vault code of agent ZETA-17 is 1111.\n"
        "[L2-L2] The vault code of agent ZETA-1 is 2222."
    )
    assert resolve(parse("What is the vault code of agent ZETA-1?"), evidence)[1] == "2222"
    bridged = (
        "[L1-L1] Agent KILO-20 was near the station in Oslo.\n"
        "[L2-L2] Agent MIKE-30 is stationed in Oslo.\n"
        "[L3-L3] The call sign of agent KILO-20 is ORCHID-2.\n"
        "[L4-L4] The call sign of agent MIKE-30 is COBALT-3."
    )
    ids, value = resolve(parse("What is the call sign of the agent stationed in Oslo?"), bridged)
    assert ids == ("MIKE-30",) and value == "COBALT-3"


def test_neuroedge_run_prints_the_answer_text(capsys) -> None:
    from neuroedge.cli import main

    assert main(["run", "ltu.scout"]) == 0
    gold = generate(8_000, 2, 0).questions[0].answer
    out = capsys.readouterr().out
    assert f"text '{gold}'" in out and "grounded" in out


@pytest.mark.parametrize("role", ["all", "answer"])
@pytest.mark.parametrize("command", ["run", "bench"])
def test_local_role_without_local_model_is_refused(command, role, tmp_path, capsys) -> None:
    """local_role=all without local_model ran the keyword policy, the key never read."""
    from neuroedge.cli import main

    out = tmp_path / "out"
    extra = ["--out", str(out)] if command == "bench" else ["--repeats", "1"]
    args = [command, "ltu.scout", *extra, "--config", f"local_role={role}"]
    assert main([*args, "sizes=[8000]", "questions=2"] if command == "bench" else args) == 2
    err = capsys.readouterr().err
    assert f"local_role='{role}' without local_model: the role is the local model's" in err
    assert "give local_model=smollm2" in err and "Traceback" not in err and not out.exists()
