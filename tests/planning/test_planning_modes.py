"""Planning modes on the agent: auto / llm / always / never, the depth limit, the result's
``planning`` block, the ``agent_planning`` event and ``sophon-dsl agent --planning``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sophon_dsl.cli import main
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.planning.modes import MAX_DEPTH, PlanningMode, PlanningPolicy
from sophon_dsl.tools import tool

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "llm"))

ACME = ("Search my emails for the invoice from Acme, then create a Jira ticket with the amount and send "
        "a summary to the team Slack channel")
ASK = r"COMPLEX or SIMPLE\?"
PLAN = ('$state.hits = web.search(query="acme invoice")\n'
        + "".join(f'$state.more{i} = web.search(query="q{i}")\n' for i in range(5))
        + '$state.sent = mail.send(to="team", text="done")\n'
        + 'return $state.sent\n')


def make_tools(log: list):
    @tool(name="web.search", risk="low", description="Search the web")
    async def search(query: str) -> list:
        log.append(f"tool {query}")
        return [{"title": query}]

    @tool(name="mail.send", risk="high", description="Send mail")
    async def send(to: str, text: str) -> str:
        log.append("tool mail")
        return "sent"

    return [search, send]


class Recording:
    """Wraps a provider: ``reply_end`` goes to ``log`` when a reply has been read to its end."""

    def __init__(self, inner, log: list):
        self.inner, self.log, self.name = inner, log, "recording"

    async def stream(self, messages, **kw):
        async for delta in self.inner.stream(messages, **kw):
            yield delta
        self.log.append("reply_end")


def scripted(*keys, chunk_size=4, tps=None):
    return ScriptedProvider(keyed=[KeyedReply(p, r) for p, r in keys], chunk_size=chunk_size,
                            tokens_per_second=tps)


def run(provider, log, planning, request=ACME, **kw):
    events = []
    agent = Agent(Recording(provider, log), tools=make_tools(log), approve="yes", planning=planning,
                  on_event=lambda ev: (events.append(ev), log.append(ev.type)), **kw)
    return agent.run(request), events


def test_always_plans_first_dry_run_and_plan_approval_before_any_tool():
    log: list = []
    result, events = run(scripted(("Request: ", PLAN)), log, "always", request="hi")
    assert result.ok and result.output == "sent"
    assert result.to_json()["planning"] == {"mode": "always", "score": 0, "signals": {}, "plan": True,
                                            "decided_by": "always"}
    first_tool = next(i for i, x in enumerate(log) if str(x).startswith("tool "))
    for before in ("agent_planning", "reply_end", "agent_dry_run", "approval_requested", "approval_granted"):
        assert log.index(before) < first_tool, before
    # the session log's user_message comes first (seed 002: before the pipeline), then planning
    assert [e.type for e in events[:2]] == ["user_message", "agent_planning"] and events[1].status == "plan"


def test_never_streams_a_tool_starts_before_the_reply_ends():
    log: list = []
    result, _ = run(scripted(("Request: ", PLAN), tps=500), log, "never")   # ACME would plan under auto
    assert result.ok
    assert result.to_json()["planning"]["decided_by"] == "never"
    assert log.index("tool acme invoice") < log.index("reply_end")
    assert "agent_dry_run" not in log


def test_auto_follows_the_classifier():
    log: list = []
    planned, _ = run(scripted(("Request: ", PLAN)), log, "auto")
    assert planned.to_json()["planning"] == {"mode": "auto", "score": 4,
                                             "signals": {"length": 1, "conjunction": 2, "action_verbs": 1},
                                             "plan": True, "decided_by": "heuristic"}
    assert "agent_dry_run" in log
    log.clear()
    direct, _ = run(scripted(("Request: ", PLAN)), log, "auto", request="look up acme")
    assert direct.to_json()["planning"]["plan"] is False
    assert "agent_dry_run" not in log


def test_llm_decides_with_one_fast_request_at_temperature_zero():
    log: list = []
    provider = scripted((ASK, "COMPLEX"), ("Request: ", PLAN))
    result, _ = run(provider, log, "llm", request="look up acme")      # heuristic alone: score 0
    assert result.to_json()["planning"]["decided_by"] == "llm"
    assert result.to_json()["planning"]["plan"] is True
    asks = [c for c in provider.calls if "COMPLEX or SIMPLE" in c["messages"][-1].content]
    assert len(asks) == 1
    assert asks[0]["temperature"] == 0.0 and asks[0]["max_tokens"] == 3


@pytest.mark.parametrize("answer, why", [
    ("MAYBE", "neither COMPLEX nor SIMPLE"),
    ({"error": {"status": 400, "message": "bad"}}, "ProviderError"),
])
def test_llm_falls_back_to_the_heuristic(answer, why):
    log: list = []
    result, events = run(scripted((ASK, answer), ("Request: ", PLAN)), log, "llm")
    planning = result.to_json()["planning"]
    assert planning["decided_by"] == "heuristic" and planning["plan"] is True   # ACME scores 4
    assert why in planning["fallback"]
    assert why in events[1].reason   # (events[0]: the session log's user_message)


def test_llm_decides_through_the_openai_sdk_and_local_sse_server(monkeypatch):
    pytest.importorskip("openai")
    from sse_server import ScriptedLLMServer

    from sophon_dsl.llm.providers import OpenAIProvider

    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    log: list = []
    with ScriptedLLMServer(replies=["SIMPLE", PLAN], chunk_chars=3, delay=0.002) as srv:
        provider = OpenAIProvider("gpt-test", base_url=srv.openai_base_url, api_key="sk-test")
        result, _ = run(provider, log, "llm")
        ask = srv.requests[0].json
    assert result.ok
    assert result.to_json()["planning"]["decided_by"] == "llm"
    assert result.to_json()["planning"]["plan"] is False
    assert ask["temperature"] == 0 and ask["max_tokens"] == 3
    assert "COMPLEX or SIMPLE?" in ask["messages"][-1]["content"]
    last_reply_end = len(log) - 1 - log[::-1].index("reply_end")    # the first one ends the classifier's
    assert "agent_dry_run" not in log and log.index("tool acme invoice") < last_reply_end


def test_no_planning_three_levels_down_and_per_request_mode_wins():
    log: list = []
    deep, _ = run(scripted(("Request: ", PLAN)), log, "always", _depth=MAX_DEPTH)
    assert deep.to_json()["planning"]["decided_by"] == "depth"
    assert deep.to_json()["planning"]["plan"] is False
    agent = Agent(scripted(("Request: ", PLAN)), tools=make_tools(log), approve="yes", planning="never")
    assert agent.run("hi", planning="always").to_json()["planning"]["decided_by"] == "always"
    assert "planning" not in Agent(scripted(("Request: ", PLAN)), tools=make_tools(log),
                                   approve="yes").run("hi").to_json()


def test_mode_names_and_policy():
    assert PlanningMode.parse("LlmDecides") is PlanningMode.LLM
    assert PlanningMode.parse("Auto") is PlanningMode.AUTO
    assert PlanningPolicy.of(None) is None
    with pytest.raises(ValueError, match="unknown planning mode"):
        PlanningMode.parse("sometimes")


def test_cli_agent_planning_flag(tmp_path, capsys):
    tools = tmp_path / "tools.py"
    tools.write_text("from sophon_dsl.tools import tool\n\n@tool(name='web.search')\n"
                     "async def search(query: str) -> list:\n    return [query]\n")
    script = tmp_path / "replies.yaml"
    script.write_text(json.dumps({"keyed": [{"match": "Request: ", "reply": "$state.a = web.search(query=\"x\")\n"
                                                                             "return $state.a\n"}]}))
    code = main(["agent", "do it", "--tools", str(tools), "--no-stdlib", "--provider", f"scripted:{script}",
                 "--planning", "always", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["output"] == ["x"]
    assert out["planning"] == {"mode": "always", "score": 0, "signals": {}, "plan": True, "decided_by": "always"}
    code = main(["agent", "do it", "--tools", str(tools), "--no-stdlib", "--provider", f"scripted:{script}",
                 "--planning", "never"])
    assert code == 0
    assert "planning never: run as it streams (eager), score 0, decided by never" in capsys.readouterr().err
