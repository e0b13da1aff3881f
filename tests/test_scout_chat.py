"""scout.chat: the OpenAI-compatible client against a fake local server, the JSON action
parser, ChatPolicy with a scripted chat object, and one SCOUT run end to end over HTTP."""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING

import pytest

from neuroedge.errors import NeuroedgeError
from neuroedge.models.scout import chat
from neuroedge.models.scout.chat import ChatError, ChatPolicy, OpenAIChat, parse_action_json
from neuroedge.models.scout.document import Document
from neuroedge.models.scout.protocol import Action, Entry, Observation, ScoutError

if TYPE_CHECKING:
    from conftest import FakeServer

INFO = Observation("file_info", {}, (), "file notes.txt: 900 bytes, 60 lines", 9)
QUESTION = "What is the vault code of agent ZETA-17?"


@pytest.fixture
def server(chat_server: FakeServer) -> FakeServer:
    return chat_server


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chat, "RETRY_PAUSE_S", 0.0)
    monkeypatch.delenv(chat.API_KEY_ENV, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")  # a proxy must not see localhost
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def test_client_sends_the_request_and_sums_usage(server: FakeServer) -> None:
    server.replies = ["hello", "again"]
    client = OpenAIChat(server.base_url + "/", "tiny-model", api_key="sk-test")
    messages = [{"role": "user", "content": "hi"}]
    assert client.chat(messages, temperature=0.3, max_tokens=64, seed=7) == "hello"
    assert client.chat(messages) == "again"
    first, second = server.requests
    assert first["path"] == "/v1/chat/completions"
    assert first["body"]["model"] == "tiny-model"
    assert first["body"]["messages"] == messages
    assert first["body"]["temperature"] == 0.3
    assert (first["body"]["max_tokens"], first["body"]["seed"]) == (64, 7)
    assert second["body"]["temperature"] == 0.0 and "seed" not in second["body"]
    assert first["headers"]["Authorization"] == "Bearer sk-test"
    assert client.usage() == {"prompt": 100 + 101, "completion": 5 + 6, "calls": 2}


def test_api_key_comes_from_the_environment_else_none(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.replies = ["a", "b"]
    OpenAIChat(server.base_url, "m").chat([{"role": "user", "content": "x"}])
    monkeypatch.setenv(chat.API_KEY_ENV, "from-env")
    OpenAIChat(server.base_url, "m").chat([{"role": "user", "content": "x"}])
    assert "Authorization" not in server.requests[0]["headers"]
    assert server.requests[1]["headers"]["Authorization"] == "Bearer from-env"


def test_http_500_names_url_status_and_body_without_retry(server: FakeServer) -> None:
    server.replies = [(500, "the model exploded"), "never asked"]
    client = OpenAIChat(server.base_url, "m")
    with pytest.raises(ChatError, match="500") as info:
        client.chat([{"role": "user", "content": "x"}])
    assert server.base_url + "/chat/completions" in str(info.value)
    assert "the model exploded" in str(info.value)
    assert isinstance(info.value, NeuroedgeError) and len(server.requests) == 1


def test_busy_server_is_tried_once_more_and_no_more(server: FakeServer) -> None:
    server.replies = [(503, "busy"), "ok", (503, "busy"), (503, "still busy"), "never"]
    client = OpenAIChat(server.base_url, "m")
    assert client.chat([{"role": "user", "content": "x"}]) == "ok"
    with pytest.raises(ChatError, match="503.*still busy"):
        client.chat([{"role": "user", "content": "x"}])
    assert len(server.requests) == 4


def test_connection_refused_names_the_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ChatError, match=f"127.0.0.1:{port}/v1/chat/completions"):
        OpenAIChat(url, "m", timeout_s=2).chat([{"role": "user", "content": "x"}])


def test_timeout_names_the_url(server: FakeServer) -> None:
    server.replies = [("sleep", 0.6), ("sleep", 0.6)]
    client = OpenAIChat(server.base_url, "m", timeout_s=0.1)
    with pytest.raises(ChatError, match="timed out") as info:
        client.chat([{"role": "user", "content": "x"}])
    assert server.base_url in str(info.value)


@pytest.mark.parametrize(
    "body", [{"choices": []}, {"choices": [{"message": {"content": None}}]}, {"usage": {}}]
)
def test_reply_without_content_names_what_is_missing(server: FakeServer, body: dict) -> None:
    server.replies = [body]
    with pytest.raises(ChatError, match=r"choices\[0\]\.message\.content"):
        OpenAIChat(server.base_url, "m").chat([{"role": "user", "content": "x"}])


def test_bad_base_url_is_refused() -> None:
    with pytest.raises(ChatError, match="localhost:8080"):
        OpenAIChat("localhost:8080/v1", "m")


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"action": "grep", "pattern": "vault", "max_hits": 5}\n```',
        'I will search first. {"action": "grep", "pattern": "vault", "max_hits": 5} Done.',
        "{'action': 'grep', 'pattern': 'vault', 'max_hits': 5, 'flag': True}",
        '{"action": "grep", "pattern": "vault", "max_hits": 5}\n{"action": "read"}',
    ],
)
def test_parse_action_json_finds_the_object(text: str) -> None:
    found = parse_action_json(text)
    assert (found["action"], found["pattern"], found["max_hits"]) == ("grep", "vault", 5)


@pytest.mark.parametrize("text", ["I think the answer is 42.", "{not json at all}", ""])
def test_parse_action_json_refuses_garbage_quoting_it(text: str) -> None:
    with pytest.raises(ScoutError, match="no JSON object") as info:
        parse_action_json(text)
    assert text[:10] in str(info.value)


class FakeChat:
    """A scripted chat client: records each call's messages and temperature."""

    def __init__(self, *replies: str) -> None:
        self.replies, self.calls = list(replies), []

    def chat(self, messages, *, temperature=0.0, max_tokens=512, seed=None) -> str:
        self.calls.append({"messages": [dict(m) for m in messages], "temperature": temperature})
        return self.replies.pop(0)

    def usage(self) -> dict[str, int]:
        return {"prompt": 0, "completion": 0, "calls": len(self.calls)}


def started(*replies: str, **kwargs) -> tuple[ChatPolicy, FakeChat]:
    fake = FakeChat(*replies)
    policy = ChatPolicy(fake, **kwargs)
    policy.start(QUESTION, INFO)
    return policy, fake


def obs(text: str, tool: str = "grep") -> Observation:
    return Observation(tool, {}, (), text, 1)


def test_policy_parses_actions_and_coerces_numbers() -> None:
    policy, fake = started(
        '{"action": "grep", "pattern": "ZETA-17", "max_hits": "5", "thought": "look"}',
        '{"action": "read", "offset": "12", "limit": 30.0}',
        '{"action": "update", "content": "code 4821", "start": "L3", "end": 4, '
        '"tags": "code", "mode": "replace"}',
        '{"action": "evaluate"}',
    )
    assert policy.name == "chat"
    assert policy.next_action(None, INFO) == Action("grep", {"pattern": "ZETA-17", "max_hits": 5})
    assert policy.next_action(None, obs("3: hit")) == Action("read", {"offset": 12, "limit": 30})
    update = policy.next_action(None, obs("12: text", "read"))
    assert update.kind == "update"
    assert dict(update.args) == {
        "content": "code 4821",
        "start": 3,
        "end": 4,
        "tags": ["code"],
        "action": "replace",
    }
    assert policy.next_action(None, obs("recorded", "update")) == Action("evaluate", {})
    system = fake.calls[0]["messages"][0]
    assert system["role"] == "system" and QUESTION in system["content"]
    assert INFO.text in system["content"] and '"action": "grep"' in system["content"]
    assert "12: text" in fake.calls[2]["messages"][-1]["content"]
    assert fake.calls[3]["messages"][-3]["content"] == fake.calls[2]["messages"][-1]["content"]


def test_policy_recovers_from_one_bad_reply() -> None:
    policy, fake = started("Let me grep for it.", '{"action": "grep", "pattern": "vault"}')
    assert policy.next_action(None, INFO).kind == "grep"
    retry = fake.calls[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Let me grep for it."}
    assert "not usable" in retry[-1]["content"] and "no JSON object" in retry[-1]["content"]
    assert len(policy.messages()) == 3  # system, observation, the good reply only


def test_policy_gives_up_after_three_bad_replies() -> None:
    policy, fake = started("nope", '{"action": "search", "query": "x"}', '{"action": "read"}')
    with pytest.raises(ScoutError, match="3 replies.*read needs offset"):
        policy.next_action(None, INFO)
    assert "unknown action 'search'" in fake.calls[2]["messages"][-1]["content"]
    assert len(fake.calls) == 3


def test_policy_shows_errors_and_the_notebook_and_bounds_history() -> None:
    class State:
        entries = [Entry("code 4821", 3, 3)]

        def render(self) -> str:
            return "Question: q\nEvidence:\n[L3-L3] code 4821"

    policy, fake = started(*['{"action": "evaluate"}'] * 6, history_turns=2)
    policy.next_action(State(), Observation("error", {}, (), "error in read: bad offset", 3))
    first = fake.calls[0]["messages"][-1]["content"]
    assert "failed: error in read: bad offset" in first and "[L3-L3] code 4821" in first
    policy.next_action(State(), obs("grep 'x': 0 matching lines"))
    assert "[L3-L3]" not in fake.calls[1]["messages"][-1]["content"]  # shown, unchanged
    for _ in range(4):
        policy.next_action(State(), obs("more"))
    assert len(fake.calls[-1]["messages"]) == 1 + 2 * 2 + 1
    assert any("[L3-L3]" in m["content"] for m in fake.calls[-1]["messages"][1:])


def test_evaluate_parses_a_verdict_at_temperature_zero() -> None:
    policy, fake = started(
        '```json\n{"is_sufficient": true, "confidence": 1.7, "reasoning": "line 3 says it",'
        ' "missing_info": "nothing", "draft_answer": "4821"}\n```',
        "{'is_sufficient': False, 'confidence': -1, 'missing_info': ['the year', 'the place']}",
        "The evidence seems fine to me.",
        temperature=0.7,
    )
    verdict = policy.evaluate(QUESTION, "Evidence:\n[L3-L3] code 4821")
    assert verdict.sufficient and verdict.confidence == 1.0 and verdict.draft_answer == "4821"
    assert verdict.missing == ("nothing",) and verdict.reasoning == "line 3 says it"
    assert fake.calls[0]["temperature"] == 0.0
    system, user = fake.calls[0]["messages"]
    assert "see section" in system["content"] and "[L3-L3] code 4821" in user["content"]
    other = policy.evaluate(QUESTION, "Evidence:\n(no entries)")
    assert not other.sufficient and other.confidence == 0.0
    assert other.missing == ("the year", "the place")
    bad = policy.evaluate(QUESTION, "Evidence:\n(no entries)")
    assert not bad.sufficient and "could not be parsed" in bad.reasoning


def test_answer_sees_only_question_and_evidence() -> None:
    policy, fake = started('{"action": "read", "offset": 1, "limit": 5}', "  4821 \n")
    policy.next_action(None, obs("7: SECRET-OBSERVATION-TEXT the code 1111 was revoked"))
    evidence = "Question: q\nEvidence:\n[L3-L3] The vault code is 4821."
    assert policy.answer(QUESTION, evidence) == "4821"
    messages = fake.calls[-1]["messages"]
    text = "\n".join(m["content"] for m in messages)
    assert len(messages) == 2 and evidence in text and QUESTION in text
    assert "SECRET-OBSERVATION-TEXT" not in text and INFO.text not in text
    assert policy.usage() == {"prompt": 0, "completion": 0, "calls": 2}


def planted_document() -> Document:
    lines = [f"Region {i} reported mild weather and quiet roads on day {i}." for i in range(1, 61)]
    lines[39] = "The vault code of agent ZETA-17 is 4821."
    lines[9] = "Agent ZETA-17 arrived in Lisbon by train."
    return Document.from_text("\n".join(lines), "notes.txt")


def test_forage_end_to_end_over_http(server: FakeServer) -> None:
    from neuroedge.models.scout.agent import forage

    fact = "The vault code of agent ZETA-17 is 4821."
    server.replies = [
        'First the key terms.\n```json\n{"action": "grep", "pattern": "ZETA-17|vault code"}\n```',
        '{"action": "read", "offset": "35", "limit": 10}',
        json.dumps({"action": "update", "content": fact, "start": 40, "end": 40, "tags": ["code"]}),
        '{"action": "evaluate"}',
        json.dumps({"is_sufficient": True, "confidence": 0.9, "draft_answer": "4821"}),
        "4821",
    ]
    policy = ChatPolicy(OpenAIChat(server.base_url, "tiny", api_key="k"))
    result = forage(planted_document(), QUESTION, policy, max_turns=10)
    assert result.answer == "4821" and result.grounded is True
    assert result.stopped == "sufficient" and result.turns == 4
    assert result.state.entries == [Entry(fact, 40, 40, ("code",))]
    assert [o.tool for o in result.history] == ["file_info", "grep", "read", "update"]
    assert len(server.requests) == 6
    assert dict(result.usage) == {**server.usage(), "calls": 6}
    bodies = [r["body"] for r in server.requests]
    assert "40: " + fact in bodies[1]["messages"][-1]["content"]  # the grep hit, numbered
    assert "notes.txt" in bodies[0]["messages"][0]["content"]  # the file reconnaissance
    answer_text = json.dumps(bodies[5]["messages"])
    assert "[L40-L40]" in answer_text and "Lisbon" not in answer_text
    assert "quiet roads" not in answer_text  # the read's filler lines stay in H_T
    assert bodies[4]["temperature"] == 0.0 and "[L40-L40]" in json.dumps(bodies[4])
