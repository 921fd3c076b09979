"""JSON replies dispatched mid-stream (issue 11 item 1): each call as soon as its object closes,
through the same per-call checks as a DSL statement."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any, AsyncIterator, Sequence

import pytest
from hypothesis import given, settings, strategies as st

from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.json_stream import JsonReplyScanner
from sophon_dsl.llm.provider import Message
from sophon_dsl.llm.providers.scripted import ScriptedProvider
from sophon_dsl.llm.stream import StreamTurn
from sophon_dsl.loader import parse
from sophon_dsl.tools import as_registry, tool


def tools(events: list):
    @tool
    async def fetch(name: str) -> dict:
        events.append(f"start fetch {name}")
        await asyncio.sleep(0.005)
        return {"name": name}

    @tool
    def show(profile: dict) -> str:
        events.append(f"show {profile['name']}")
        return profile["name"]

    return as_registry([fetch, show], stdlib=False)


SOLUTION = ('{"calls": [\n'
            '  {"_tool": "fetch", "name": "Ann", "_outputPath": "†state.p"},\n'
            '  {"_tool": "show", "profile": "†state.p", "_outputPath": "†state.s"}\n'
            '], "output": "†state.s"}\n')


@pytest.mark.parametrize("reply", [SOLUTION, "```json\n" + SOLUTION + "```\n",
                                   '[{"_tool": "fetch", "name": "Ann", "_outputPath": "†state.p"},\n'
                                   ' {"_tool": "show", "profile": "†state.p"}]'])
def test_a_call_is_dispatched_when_its_object_closes(reply):
    events: list = []
    first_end = reply.index("}", reply.index('"fetch"')) + 1

    async def go():
        turn = StreamTurn(tools(events))
        turn.feed(reply[:first_end])
        await asyncio.sleep(0.001)
        events.append("first object closed")
        turn.feed(reply[first_end:])
        return await turn.finish()

    out = asyncio.run(go())
    assert events.index("start fetch Ann") < events.index("first object closed")
    assert out.status == "succeeded" and out.form == "json", out.errors
    assert "show Ann" in events
    if reply.lstrip().startswith(("{", "`")):
        assert out.output == "Ann"


def test_a_fenced_reply_streamed_one_character_at_a_time():
    events: list = []
    reply = "```json\n" + SOLUTION + "```\n"

    async def go():
        turn = StreamTurn(tools(events))
        for ch in reply:
            turn.feed(ch)
        return await turn.finish()

    out = asyncio.run(go())
    assert out.form == "json" and out.status == "succeeded" and out.output == "Ann", out.errors


def test_a_call_failing_its_check_is_refused_at_its_position():
    reply = ('{"calls": [{"_tool": "fetch", "name": "a", "_outputPath": "†state.p"},\n'
             '   {"_tool": "fetc", "name": "b"}], "output": null}')
    events: list = []

    async def go():
        turn = StreamTurn(tools(events))
        turn.feed(reply[:reply.index('"fetc"') + 30])
        refused_now = dict(turn.refused)
        turn.feed(reply[reply.index('"fetc"') + 30:])
        return refused_now, await turn.finish()

    refused_now, out = asyncio.run(go())
    assert list(refused_now) == [1]
    err = out.errors[0]
    assert err["error"]["code"] == "E201" and err["id"] == "c2"
    # the same position as checking the whole document
    import sophon_dsl

    whole = [d for d in sophon_dsl.check(parse(reply, "json").plan, tools=tools([])) if d.code == "E201"][0]
    assert (err["error"]["line"], err["error"]["column"]) == (whole.span.line, whole.span.column) == (2, 14)


def test_a_malformed_call_object_is_reported_once():
    reply = '{"calls": [{"_tool": "fetch", "name": "a", "_outputPath": "state.p"}], "output": 1}'

    async def go():
        turn = StreamTurn(tools([]))
        turn.feed(reply)
        return await turn.finish()

    out = asyncio.run(go())
    codes = [e["error"]["code"] for e in out.errors]
    assert codes == ["E106"], out.errors


def test_header_members_before_the_calls_apply_to_them():
    decl = {"summarize": {"description": "Summarise", "input": {"type": "object",
                                                                 "properties": {"text": {"type": "string"}}},
                          "output": {"type": "string"}}}
    reply = json.dumps({"tools": decl, "calls": [
        {"_tool": "summarize", "text": "x", "_output": "short", "_outputPath": "†state.s"}],
        "output": "†state.s"})
    seen_at_close: list = []

    async def go():
        turn = StreamTurn(tools([]))
        turn.feed(reply[:-len(', "output": "†state.s"}')])
        seen_at_close.append(dict(turn.refused))
        turn.feed(reply[-len(', "output": "†state.s"}'):])
        return await turn.finish()

    out = asyncio.run(go())
    assert seen_at_close == [{}]
    assert out.status == "succeeded" and out.output == "short", out.errors


def test_a_context_list_is_read_whole_at_the_end():
    reply = json.dumps([{"type": "state", "state": {"n": 1}},
                        {"type": "plan", "calls": [{"_tool": "fetch", "name": "z", "_outputPath": "†state.p"}]}])

    async def go():
        turn = StreamTurn(tools([]))
        turn.feed(reply)
        return await turn.finish()

    out = asyncio.run(go())
    assert out.status == "succeeded", out.errors
    assert out.state["state"]["p"] == {"name": "z"}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["fetch", "show", "fetc"]), min_size=1, max_size=6), st.integers(0, 1000),
       st.booleans())
def test_any_chunking_reads_the_calls_and_positions_of_the_whole_document(tools_used, seed, pretty):
    calls = [{"_tool": t, **({"name": f"n{k}"} if t != "show" else {"profile": "†state.p0"}),
              "_outputPath": f"†state.p{k}"} for k, t in enumerate(tools_used)]
    reply = json.dumps({"goal": "g", "calls": calls, "output": None}, indent=2 if pretty else None,
                       ensure_ascii=False)
    rng = random.Random(seed)

    async def go():
        turn = StreamTurn(tools([]), dispatch=False, mode="lazy")
        k = 0
        while k < len(reply):
            n = rng.randint(1, 12)
            turn.feed(reply[k:k + n])
            k += n
        turn.close_stream()
        return turn

    turn = asyncio.run(go())
    whole = parse(reply, "json").plan
    assert tuple(turn.calls) == whole.calls
    assert [c.tool_span for c in turn.calls] == [c.tool_span for c in whole.calls]
    e201 = [(e["id"], e["error"]["line"], e["error"]["column"]) for e in turn.errors if e["error"]["code"] == "E201"]
    assert len(e201) == tools_used.count("fetc")


def test_scanner_handles_strings_with_brackets_and_escapes():
    reply = '{"calls": [{"_tool": "a", "q": "}]\\"{["}, {"_tool": "b"}], "output": "]"}'
    for size in range(1, 8):
        sc = JsonReplyScanner()
        items = []
        for k in range(0, len(reply), size):
            items += sc.feed(reply[k:k + size])
        assert [i.text for i in items if i.kind == "call"] == ['{"_tool": "a", "q": "}]\\"{["}', '{"_tool": "b"}']


class Timed:
    """Wraps a provider: records when its reply ends."""

    name = "timed"

    def __init__(self, inner: Any, events: list):
        self.inner = inner
        self.events = events

    async def stream(self, messages: Sequence[Message], **kw: Any) -> AsyncIterator[str]:
        async for d in self.inner.stream(messages, **kw):
            yield d
        self.events.append("reply_end")


def test_agent_dispatches_json_calls_mid_stream_with_the_scripted_provider():
    events: list = []
    provider = Timed(ScriptedProvider([SOLUTION], chunk_size=6, tokens_per_second=400), events)
    result = Agent(provider, tools=tools(events), max_turns=1).run("who")
    assert result.status == "succeeded" and result.output == "Ann", result.to_json()
    assert events.index("start fetch Ann") < events.index("reply_end")
    assert result.turns[0].form == "json"


def test_agent_dispatches_json_calls_mid_stream_through_the_openai_sdk_and_sse_server(monkeypatch):
    pytest.importorskip("openai")
    sse = pytest.importorskip("sse_server")
    from sophon_dsl.llm import providers

    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    events: list = []
    with sse.ScriptedLLMServer([sse.Reply(SOLUTION, chunk_chars=6, delay=0.004)]) as srv:
        inner = providers.OpenAIProvider("gpt-test", base_url=srv.openai_base_url, api_key="sk-test")
        result = Agent(Timed(inner, events), tools=tools(events), max_turns=1).run("who")
    assert result.status == "succeeded" and result.output == "Ann", result.to_json()
    assert events.index("start fetch Ann") < events.index("reply_end")
