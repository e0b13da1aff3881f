"""ltu.scout, pinned where the audit found the tests could not fail: the answer rule
(``right``), the cost ledger and the ReAct baseline's input and tokens, the edges of the tools'
windows and of the long-context window, provenance, distinct planted values, and long-line
splitting. Token counts here are recomputed independently as ceil(len / 4)."""

from __future__ import annotations

import random
import re

import pytest

from neuroedge.models.scout import agent
from neuroedge.models.scout.corpus import generate
from neuroedge.models.scout.document import Document, split_long_line
from neuroedge.models.scout.experiment import one_question, right
from neuroedge.models.scout.keyword import KeywordPolicy
from neuroedge.models.scout.protocol import Action, ScoutError, Verdict
from neuroedge.models.scout.state import EpistemicState
from neuroedge.models.scout.tools import Tools


def est(text: str) -> int:
    return -(-len(text) // 4)


class Recording(KeywordPolicy):
    """The keyword policy, keeping every text its evaluator and its answer model read."""

    def __init__(self) -> None:
        super().__init__()
        self.evaluated: list[str] = []
        self.answered: list[str] = []

    def evaluate(self, question: str, state_text: str) -> Verdict:
        self.evaluated.append(state_text)
        return super().evaluate(question, state_text)

    def answer(self, question: str, evidence: str) -> str:
        self.answered.append(evidence)
        return super().answer(question, evidence)


class Scripted(Recording):
    """Replays ``actions``, then asks for Evaluate; its evaluator is never satisfied."""

    def __init__(self, actions: list[Action]) -> None:
        super().__init__()
        self.actions = iter(actions)

    def start(self, question, info) -> None:
        pass

    def next_action(self, state, last) -> Action:
        return next(self.actions, Action("evaluate"))

    def evaluate(self, question: str, state_text: str) -> Verdict:
        self.evaluated.append(state_text)
        return Verdict(False, 0.0, ("the vault code",))


@pytest.fixture(scope="module")
def corpus():
    return generate(24_000, 8, seed=3)


@pytest.fixture(scope="module")
def doc(corpus) -> Document:
    return Document.from_text(corpus.text, "generated")


@pytest.mark.parametrize(
    ("answer", "gold", "others", "ok"),
    [
        ("The radio channel of agent SIERRA-57 is 96.", "96", (), True),
        ("4821", "4821", ("1111",), True),
        ("[L12-L12] The vault code of agent ZETA-17 is 4821.", "4821", (), True),
        ("The call sign of agent ECHO-42 is harbor-8.", "HARBOR-8", ("ORCHID-3",), True),
        ("Lisbon", "Lisbon", ("Oslo",), True),
        ("7825 or 5083", "7825", (), False),
        ("5083 (not 7825)", "7825", (), False),
        ("The former code 7825 was revoked; the code is 5083.", "7825", (), False),
        ("channels 12, 19, 33, 42, 68", "42", (), False),
        ("HARBOR-6, formerly COBALT-9", "HARBOR-6", (), False),
        ("Lisbon, not Oslo", "Lisbon", ("Oslo",), False),
        ("", "42", (), False),
        ("The code is 1942.", "42", (), False),
        ("The call sign is HARBOR-60.", "HARBOR-6", (), False),
        ("Agent ZETA-42 has none.", "42", (), False),
        ("The vault code of agent ZETA-17 is 7825 (line 4023).", "7825", (), True),
        ("4023: The vault code of agent ZETA-17 is 7825.", "7825", (), True),
        ("7825 (stated on lines 120 and 121)", "7825", (), True),
        ("The channel is on line 42.", "42", (), False),
        ("4023: The vault code was 5083, now 7825.", "7825", (), False),
    ],
)
def test_right_needs_the_gold_and_no_other_value_of_its_kind(answer, gold, others, ok) -> None:
    assert right(answer, gold, others) is ok


def test_the_ledger_counts_every_observation_and_every_state_render(corpus, doc) -> None:
    q = next(q for q in corpus.questions if q.hops == 2 and q.distractor)
    policy = Recording()
    r = agent.forage(doc, q.question, policy)
    assert r.answer == q.answer and policy.evaluated and len(policy.answered) == 1
    assert policy.answered[0] == r.state.render()
    renders = sum(est(t) for t in (*policy.evaluated, *policy.answered))
    shown = sum(est(o.text) for o in r.history)
    assert r.ledger.observed == shown and r.ledger.state == renders
    assert r.ledger.total == shown + renders
    assert r.answer_tokens == est(r.state.render()) > 0
    assert {"file_info", "grep", "read", "update"} <= {o.tool for o in r.history}


def test_update_evaluate_and_error_messages_are_charged(doc) -> None:
    actions = [
        Action("grep", {"pattern": "agent"}),
        Action("grep", {"pattern": "("}),
        Action("update", {"content": "A first statement.", "start": 2, "end": 2}),
    ]
    policy = Scripted(actions)
    r = agent.forage(doc, "What is the vault code of agent ZETA-17?", policy)
    tools = [o.tool for o in r.history]
    assert tools == ["file_info", "grep", "error", "update", "evaluate", "evaluate"]
    assert r.stopped == "insufficient" and len(policy.evaluated) == 3
    assert r.ledger.observed == sum(est(o.text) for o in r.history)
    assert r.ledger.state == sum(est(t) for t in (*policy.evaluated, *policy.answered))
    assert dict(r.ledger.calls) == {"file_info": 1, "grep": 1}  # tool calls only


def test_react_reads_the_read_windows_and_pays_for_the_foraging(corpus, doc) -> None:
    q = next(q for q in corpus.questions if q.hops == 2 and q.distractor)
    made: list[Recording] = []

    def make() -> Recording:
        made.append(Recording())
        return made[-1]

    out = one_question(doc, q, make, {"max_turns": 200, "window_tokens": 2_000})
    assert len(made) == 4  # scout, no_evaluate, react, full_context, in that order
    scout = agent.forage(doc, q.question, Recording())  # the same deterministic run
    history = made[2].answered[0]
    assert history.startswith(f"Question: {q.question}\n") and "Evidence:" not in history
    reads = [o for o in scout.history if o.tool == "read"]
    assert reads and all(o.text in history for o in reads)
    assert all(f"{no}: {doc.lines[no - 1]}" in history for no in q.fact_lines)
    foraging = sum(est(o.text) for o in scout.history)
    assert out["react"]["tokens"] == foraging + est(history)
    assert out["react"]["answer_tokens"] == est(history)
    assert out["scout"]["tokens"] == scout.ledger.total
    assert out["scout"]["answer_tokens"] == est(made[0].answered[0])
    assert out["scout"]["right"] and out["react"]["right"] and out["meta"]["revoked"]


class Cheat(KeywordPolicy):
    """Answers ``gold`` at once, having read and recorded nothing."""

    def __init__(self, gold: str) -> None:
        super().__init__()
        self.gold = gold

    def next_action(self, state, last) -> Action:
        return Action("answer")

    def answer(self, question: str, evidence: str) -> str:
        return self.gold


def test_provenance_needs_the_value_in_the_state(corpus, doc) -> None:
    q = corpus.questions[0]
    cfg = {"max_turns": 200, "window_tokens": 2_000}
    honest = one_question(doc, q, KeywordPolicy, cfg)["scout"]
    assert honest["right"] and honest["provenance"]
    cheat = one_question(doc, q, lambda: Cheat(q.answer), cfg)["scout"]
    assert cheat["right"] and not cheat["provenance"]


def numbered(n: int) -> Document:
    return Document.from_text(
        "\n".join(f"Line {i} Stationed in place {i}." for i in range(1, n + 1))
    )


@pytest.mark.parametrize(
    ("offset", "limit", "stride", "shown"),
    [(3, 41, 20, [3, 23, 43]), (90, 2000, 5, [90, 95, 100]), (7, 3, 1, [7, 8, 9])],
)
def test_scan_shows_every_stride_th_line_up_to_the_windows_last(
    offset, limit, stride, shown
) -> None:
    d = numbered(100)
    obs = Tools(d).scan(offset, limit, stride)
    assert obs.lines == tuple((no, f"Line {no} Stationed in place {no}.") for no in shown)
    assert obs.text == "\n".join(f"{no}: Line {no} Stationed in place {no}." for no in shown)


def test_grep_ignores_case_and_caps_its_hits() -> None:
    tools = Tools(numbered(100))
    assert [no for no, _ in tools.grep("STATIONED IN PLACE 1\\b").lines] == [1]
    assert len(tools.grep("stationed", max_hits=50).lines) == 50
    with pytest.raises(ScoutError, match=r"max_hits=51: expected an integer in \[1, 50\]"):
        tools.grep("stationed", max_hits=51)


def test_full_context_reads_the_first_lines_that_fit_and_stops() -> None:
    lines = [f"short line {i} of filler." for i in range(1, 41)]
    lines[10] = "a long line " + "x" * 100  # line 11 overflows; shorter lines follow it
    d = Document.from_text("\n".join(lines))
    head = "Question: q?\n"
    fit = est(head) + sum(est(f"{no}: {lines[no - 1]}\n") for no in range(1, 11))
    window = fit + 20  # lines 1-10 fit, line 11 does not (a short one would)
    assert est(f"11: {lines[10]}\n") > 20 > est(f"12: {lines[11]}\n")
    policy = Recording()
    _, read = agent.full_context(d, "q?", policy, window)
    want = head + "\n".join(f"{no}: {lines[no - 1]}" for no in range(1, 11))
    assert policy.answered == [want] and read == est(want) <= window


def test_grounded_needs_an_entry_stating_the_value_over_a_span_showing_it() -> None:
    d = Document.from_text(
        "The archive in Lyon catalogued 72 memos from the windy period.\n"
        "The radio channel of agent ZETA-17 is 172.\n"
        "The call sign of agent ZETA-18 is HARBOR-6."
    )
    state = EpistemicState("What is the radio channel of agent ZETA-17?", d)
    state.update("The weather was windy.", 1, 1)  # the span shows 72, the entry does not
    state.update("The radio channel of agent ZETA-17 is 172.", 2, 2)
    assert not state.grounded("72") and state.grounded("172")
    state.update("Channel 72 was mentioned.", 2, 2)  # stated, but its span shows 172 only
    assert not state.grounded("72")
    state.update("The call sign of agent ZETA-18 is HARBOR-6.", 3, 3)
    assert state.grounded("harbor-6") and not state.grounded("HARBOR")


PLANTED = re.compile(r"The (vault code|radio channel|call sign) of agent (\S+) is (\S+?)\.(?!\d)")
REVOKED = re.compile(r"Agent (\S+)'s former (?:vault code|radio channel|call sign) (\S+) was")


@pytest.mark.parametrize(
    ("tokens", "n", "seed"),
    [(64_000, 30, 0), (256_000, 30, 0), (24_000, 8, 3), *((20_000, 76, s) for s in range(4))],
)
def test_no_planted_value_is_shared_by_two_questions(tokens, n, seed) -> None:
    c = generate(tokens, n, seed)
    gold = {agent: value for _, agent, value in PLANTED.findall(c.text)}
    revoked = dict(REVOKED.findall(c.text))
    assert len(gold) == n and len(revoked) == sum(q.distractor for q in c.questions)
    values = [*gold.values(), *revoked.values()]
    assert len(set(values)) == len(values), "a value is planted for two agents or twice"
    assert sorted(q.answer for q in c.questions) == sorted(gold.values())
    assert sorted(q.revoked for q in c.questions if q.distractor) == sorted(revoked.values())


def test_an_attribute_out_of_values_is_not_drawn() -> None:
    from neuroedge.models.scout.corpus import ATTRIBUTES, _facts

    taken = set(ATTRIBUTES["call sign"][1:]) | set(ATTRIBUTES["radio channel"])
    for seed in range(10):  # one call sign left: too few for a gold and a revoked value
        used = set(taken)
        q, value, old, _ = _facts(random.Random(seed), "ZETA-17", 1, "", True, used)
        assert q.startswith("What is the vault code") and value != old
        assert used == taken | {value, old}


def test_long_lines_are_not_cut_at_a_period_ending_the_window() -> None:
    for pad in range(1985, 1996):  # pad 1991 puts "3." at the window's last two characters
        line = "x" * pad + " pi is 3.14159 and more text " + "y" * 100
        pieces = split_long_line(line, 2000)
        assert any("3.14159" in p for p in pieces) and not any(p.endswith("3.") for p in pieces)
        assert all(len(p) <= 2000 for p in pieces) and " ".join(pieces).split() == line.split()
    late = "x" * 1996 + " end. " + "z " * 100  # a sentence end one past the window
    assert [len(p) for p in split_long_line(late, 2000)] == [1996, 205]
    ended = "w " * 900 + "end. " + "z " * 200  # a sentence end in the last fifth still cuts
    assert split_long_line(ended, 2000)[0].endswith("end.")


@pytest.mark.parametrize("questions", [1, 10, 76])
def test_the_smallest_size_allowed_plants_every_question(questions: int) -> None:
    from neuroedge.models.scout.corpus import TOKENS_PER_QUESTION, generate

    for seed in range(3):  # 100 x questions passed the check and then crashed in sampling
        corpus = generate(TOKENS_PER_QUESTION * questions, questions, seed)
        assert len(corpus.questions) == questions
