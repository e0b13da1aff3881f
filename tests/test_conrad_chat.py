"""apr.conrad with a chat LLM: reply parsing, re-asks, failures named, and the bench and the
command line end to end against a fake OpenAI-compatible server (an oracle that reads the
prompt's numbered options and the plan)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from neuroedge.models.conrad import operators as ops
from neuroedge.models.conrad.chat import ASK, ChatRepairer, parse_choice
from neuroedge.models.conrad.experiment import check_config
from neuroedge.models.conrad.protocol import ConradError, NoAnswer
from neuroedge.models.conrad.repair import Option, StageQuery
from neuroedge.models.scout.chat import ChatError

if TYPE_CHECKING:
    from conftest import FakeServer

PATCHES = ("- return xs[:n - 1]\n+ return xs[:n]", "- return xs[:n - 1]\n+ return xs[:n - 2]")


def _query(stage: str = "file_think", texts=("orders.py", "meters.py", "tickets.py")):
    return StageQuery(
        stage, "take_orders drops the last order", "", None, tuple(map(Option, texts))
    )


@pytest.mark.parametrize(
    "reply, want",
    [
        ("2", 1),
        ("Option 3: tickets.py", 2),
        ("**1**", 0),
        (" 2.\n", 1),
        ("The bug is in `meters.py`.", 1),
        ("4", None),  # out of range: not read as an option
        ("0", None),
        ("12", None),
        ("orders.py or meters.py", None),  # two options quoted: no choice
        ("I cannot tell.", None),
    ],
)
def test_parse_choice_reads_a_number_or_one_quoted_option(reply: str, want) -> None:
    assert parse_choice(reply, _query()) == want


def test_parse_choice_matches_a_quoted_multiline_patch_whitespace_free() -> None:
    q = _query("patch_think", PATCHES)
    assert parse_choice("-  return xs[:n - 1]\n+ return   xs[:n]", q) == 0
    assert parse_choice("```\n" + PATCHES[1] + "\n```", q) == 1


class ScriptedChat:
    """The chat interface, replying from a list; records every message list it is sent."""

    url = "fake://chat"

    def __init__(self, *replies: str | Exception) -> None:
        self.replies, self.sent = list(replies), []

    def chat(self, messages, *, temperature=0.0, max_tokens=512, seed=None) -> str:
        self.sent.append([dict(m) for m in messages])
        item = self.replies.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def usage(self) -> dict[str, int]:
        return {
            "prompt": 10 * len(self.sent),
            "completion": len(self.sent),
            "calls": len(self.sent),
        }


def test_a_bad_reply_goes_back_with_what_was_wrong_then_the_number_counts() -> None:
    client = ScriptedChat("Let me think.", "3")
    model = ChatRepairer(client)
    assert model.pick(_query()) == 2
    assert (model.calls, model.requests) == (1, 2)
    first, second = client.sent
    assert first[1]["content"].endswith("1. orders.py\n2. meters.py\n3. tickets.py\n\n" + ASK)
    assert second[2] == {"role": "assistant", "content": "Let me think."}
    assert "none of the options 1-3" in second[3]["content"]


def test_three_unusable_replies_raise_naming_stage_and_reply() -> None:
    model = ChatRepairer(ScriptedChat("no", "still no", "nine"))
    with pytest.raises(NoAnswer, match=r"stage file_think got no option.*'nine'") as info:
        model.pick(_query())
    assert info.value.stage == "file_think" and model.requests == 3


def test_a_failed_request_is_a_conrad_error_naming_the_model() -> None:
    model = ChatRepairer(ScriptedChat(ChatError("http://h/v1/chat/completions: HTTP 500")))
    with pytest.raises(ConradError, match=r"^fake://chat: .*HTTP 500"):
        model.pick(_query())
    said = "fake://chat/chat/completions: HTTP 502"  # names the URL already: not twice
    model = ChatRepairer(ScriptedChat(ChatError(said)))
    with pytest.raises(ConradError, match=f"^{said}$"):
        model.pick(_query())


@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"model": "endpoint"}, "needs both"),
        ({"model": "endpoint", "endpoint": "http://h:1/v1"}, "needs both"),
        ({"endpoint": "http://h:1/v1", "llm_model": "m"}, "needs both"),
        ({"model": "endpoint", "endpoint": "h:1/v1", "llm_model": "m"}, "expected http://"),
        ({"model": "smollm2", "decode": "sample"}, "'score' or 'generate'"),
    ],
)
def test_chat_config_is_checked(cfg: dict, match: str) -> None:
    with pytest.raises(ConradError, match=match):
        check_config(cfg)


def oracle(body: dict) -> str:
    """A stand-in for a plan-following LLM: the number of the option whose text the plan
    quotes, else 1; without a plan it cannot name a file."""
    text = body["messages"][1]["content"]  # the stage prompt; re-asks follow
    plan = text.split("Plan distilled", 1)[1] if "Plan distilled" in text else ""
    if not plan and "Which file" in text:
        return "I am not sure which one."
    numbered = re.findall(r"^(\d+)\. (.*)$", text.split("Options:\n", 1)[1], re.M)
    for k, option in numbered:
        if plan and option.strip() in plan:
            return k
    return "1"


@pytest.fixture
def server(chat_server: FakeServer) -> FakeServer:
    chat_server.answer = oracle
    return chat_server


def test_bench_over_http_sends_the_plan_and_counts_the_servers_tokens(server, tmp_path) -> None:
    from neuroedge.models.conrad.claims import bench

    url, seen = server.base_url, server.requests
    cfg = {"seeds": [0], "targets": 2, "arms": ["baseline", "conrad"], "model": "endpoint"}
    doc = bench(str(tmp_path), config={**cfg, "endpoint": url, "llm_model": "m7"})
    bodies = [s["body"] for s in seen]
    assert {s["path"] for s in seen} == {"/v1/chat/completions"}
    assert all(b["model"] == "m7" and b["temperature"] == 0.0 for b in bodies)
    assert all(b["messages"][-1]["content"].endswith(ASK) for b in bodies)
    with_plan = sum("Plan distilled" in b["messages"][1]["content"] for b in bodies)
    issues = doc["results"]["seeds"][0]["issues"]
    stages = {arm: sum(i[arm]["requests"] for i in issues) for arm in cfg["arms"]}
    assert stages["conrad"] == 8 == len(bodies) - 6  # 4 stages, no re-ask
    assert stages["baseline"] == 2 * 3  # the file asked three times, then the pass ends
    rows = {r["variant"]: r["metrics"] for r in doc["rows"] if "@" not in r["variant"]}
    unanswered = {arm: m["unanswered"]["value"] for arm, m in rows.items()}
    assert unanswered == {"baseline": 1.0, "conrad": 0.0}
    assert rows["baseline"]["file_localised"]["value"] == 0.0
    assert not any(i["baseline"]["passed"] or i["baseline"]["patch"] for i in issues)
    assert with_plan == 4 * sum(bool(i["conrad"]["plan"]) for i in issues) > 0
    tokens = sum(i[a]["prompt_tokens"] for i in issues for a in cfg["arms"])
    assert tokens == server.usage()["prompt"]  # the server's own counts, summed
    md = (tmp_path / "report.md").read_text()
    assert "prompt_tokens" in md and f"(stage model: m7 at {url} (answers with a number))" in md
    chosen = []  # the edit kind the server answered, request by request
    for b in bodies:
        text = b["messages"][1]["content"]
        if "What kind of edit" in text:
            options = dict(re.findall(r"^(\d+)\. (.*)$", text.split("Options:\n")[1], re.M))
            chosen.append(options[oracle(b)])
    made = [ops.SHAPE_TEXT[i[a]["shape"]] for i in issues for a in cfg["arms"] if i[a]["shape"]]
    assert chosen == made and len(made) == 2  # each answer became the attempt's edit


def test_command_line_repairs_over_http_and_refuses_two_models(
    chat_server: FakeServer, tmp_path: Path, capsys
) -> None:
    from neuroedge.models.conrad.__main__ import main

    url, seen = chat_server.base_url, chat_server.requests
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "shop.py").write_text("def take(items, count):\n    return items[:count - 1]\n")
    (repo / "tests" / "test_shop.py").write_text(
        "from shop import take\n\ndef test_take():\n    assert take([4, 5, 6], 2) == [4, 5]\n"
    )
    args = [str(repo), "tests/test_shop.py::test_take", "take drops the last item"]
    flags = ["--endpoint", url, "--llm-model", "m7"]
    chat_server.replies = ["1", "?", "no idea", "none"]  # the function never named
    assert main([*args, *flags, "--samples", "1"]) == 1
    assert "no patch found in 1 passes (1 without a usable model answer)" in capsys.readouterr().out
    chat_server.replies = ["1", "?", "no idea", "none"]  # pass 1 as above, then pass 2:
    chat_server.replies += ["1", "It is `take`.", "change the end of a slice by one"]
    chat_server.replies += ["-   return items[:count - 1]\n+   return items[:count]"]
    assert main([*args, *flags, "--samples", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["passes"], result["unanswered"], result["function"]) == (2, 1, "take")
    assert "+    return items[:count]" in result["patch"] and len(seen) == 12
    assert main([*args, *flags, "--model", "smollm2"]) == 2
    assert "give one stage model" in capsys.readouterr().err
    assert main([*args, "--endpoint", url]) == 2
    assert "needs both" in capsys.readouterr().err
    assert len(seen) == 12 and Path(repo / "shop.py").read_text().endswith("count - 1]\n")
