"""A map in a streamed reply works like any call (issue 12).

It is checked by the per-call rules once its block is complete (the body ends at the
closing brace), dispatched when its list is ready, its items expand as in a batch run
(ids ``c1[0].up``), and the run ends as the same plan run whole.  DSL and JSON replies,
the turn directly, and the agent on a scripted provider.
"""

from __future__ import annotations

import asyncio
import json
import time

from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.providers.scripted import ScriptedProvider
from sophon_dsl.llm.stream import StreamTurn
from sophon_dsl.loader import loads
from sophon_dsl.runtime import arun
from sophon_dsl.tools import as_registry, tool

MAP = """$state.out = map($input.texts, as=t, concurrency=2) {
    $local.u = up(t=$t)
    return $local.u
}
"""


def _tools(events: list | None = None):
    @tool
    async def up(t: str) -> str:
        if events is not None:
            events.append((t, time.perf_counter()))
        await asyncio.sleep(0.001)
        return t.upper()

    @tool
    def join(xs: list) -> str:
        return "-".join(xs)

    @tool
    async def texts() -> list:
        await asyncio.sleep(0.005)
        return ["x", "y"]

    return as_registry([up, join, texts], stdlib=False)


async def _stream(parts: list[str], *, pause: float = 0.0, order: str = "any", data=None, tools=None):
    turn = StreamTurn(tools or _tools(), input=data if data is not None else {"texts": ["a", "b", "c"]}, order=order)
    for p in parts:
        turn.feed(p)
        await asyncio.sleep(pause)
    closed = time.perf_counter()
    return turn, await turn.finish(), closed


def _statuses(outcome) -> dict:
    return {c["id"]: c["status"] for c in outcome.calls}


def test_a_streamed_map_runs_like_the_whole_plan():
    text = MAP + "$state.joined = join(xs=$state.out)\n"
    _, out, _ = asyncio.run(_stream([text[k:k + 7] for k in range(0, len(text), 7)]))
    whole = asyncio.run(arun(loads(text), tools=_tools(), input={"texts": ["a", "b", "c"]}))
    assert out.status == "succeeded" == whole.status, out.errors
    assert out.state == whole.state == {"state": {"out": ["A", "B", "C"], "joined": "A-B-C"}}
    assert _statuses(out) == {c.id: c.status for c in whole.calls}
    assert {"c1[0].up", "c1[1].up", "c1[2].up"} <= _statuses(out).keys()


def test_the_map_arrives_only_when_its_body_is_closed():
    async def go():
        turn = StreamTurn(_tools(), input={"texts": ["a"]})
        cut = MAP.index("return")
        turn.feed(MAP[:cut])
        await asyncio.sleep(0.01)
        before = list(turn.ids)
        turn.feed(MAP[cut:])
        after = list(turn.ids)
        return before, after, await turn.finish()

    before, after, out = asyncio.run(go())
    assert before == [] and after == ["c1"]
    assert out.status == "succeeded" and out.output is None


def test_a_map_over_the_input_runs_its_items_while_the_reply_streams():
    events: list = []
    _, out, closed = asyncio.run(_stream([MAP, "\n", "$state.n = join(xs=['z'])\n"], pause=0.03,
                                         tools=_tools(events)))
    assert out.status == "succeeded", out.errors
    assert [t for t, _ in events] == ["a", "b", "c"]
    assert all(at < closed for _, at in events)  # its list was ready: it did not wait for the end


def test_written_order_starts_a_map_when_its_list_lands():
    events: list = []
    text = "$state.xs = texts()\n" + MAP.replace("$input.texts", "$state.xs")
    _, out, closed = asyncio.run(_stream([text, ""], pause=0.05, order="written", tools=_tools(events)))
    assert out.status == "succeeded", out.errors
    assert out.state["state"]["out"] == ["X", "Y"]
    assert [t for t, _ in events] == ["x", "y"] and all(at < closed for _, at in events)


def test_any_order_waits_for_a_later_writer_of_a_body_read():
    """The body reads `$state.sep`, written later in the reply: the map waits for it, as the
    whole plan's map does (reading it while streaming would use the initial value)."""
    @tool
    def tag(t: str, sep: str) -> str:
        return t + sep

    @tool
    async def make() -> str:
        await asyncio.sleep(0.005)
        return "!"

    text = ("$state.out = map($input.texts, as=t) {\n    $local.v = tag(t=$t, sep=$state.sep)\n"
            "    return $local.v\n}\n$state.sep = make()\n")
    reg = as_registry([tag, make], stdlib=False)

    async def go():
        turn = StreamTurn(reg, input={"texts": ["a", "b"]}, initial={"state": {"sep": "?"}})
        turn.feed(text)
        await asyncio.sleep(0.02)
        return await turn.finish()

    out = asyncio.run(go())
    assert out.status == "succeeded", out.errors
    assert out.state["state"]["out"] == ["a!", "b!"]


def test_a_map_failing_its_check_is_refused_and_its_readers_skipped():
    text = ("$state.out = map($input.texts, as=t) {\n    $state.leak = up(t=$t)\n}\n"
            "$state.joined = join(xs=$state.out)\n")
    _, out, _ = asyncio.run(_stream([text]))
    assert [e["error"]["code"] for e in out.errors] == ["E503"]
    assert out.refused == ["c1"]
    assert _statuses(out) == {"c1": "failed", "c2": "skipped"}


def test_item_failures_are_tolerated_or_fail_the_map_as_in_a_batch_run():
    @tool
    def check(v: int) -> int:
        if v < 0:
            raise ValueError("negative")
        return v

    text = ("$state.ok || $state.err = map($input.vs, as=v, tolerate=1) {\n    $local.r = check(v=$v)\n"
            "    return $local.r\n}\n")
    reg = as_registry([check], stdlib=False)
    for vs, ok in (([1, -1, 2], True), ([-1, -2, 3], False)):
        _, out, _ = asyncio.run(_stream([text], data={"vs": vs}, tools=reg))
        whole = asyncio.run(arun(loads(text), tools=reg, input={"vs": vs}))
        assert out.status == whole.status == "succeeded"
        assert out.state == whole.state
        assert ("ok" in out.state["state"]) is ok


def test_json_replies_with_maps():
    body = {"over": "†input.texts", "as": "t", "do": [{"_tool": "up", "t": "†t", "_outputPath": "†local.u"}],
            "return": "†local.u"}
    calls = [{"_map": body, "_outputPath": "†state.out"},
             {"_tool": "join", "xs": "†state.out", "_outputPath": "†state.joined"}]
    for doc in ({"calls": calls, "output": "†state.joined"}, calls):
        text = json.dumps(doc, indent=1, ensure_ascii=False)
        turn, out, _ = asyncio.run(_stream([text[k:k + 9] for k in range(0, len(text), 9)]))
        assert out.status == "succeeded", out.errors
        assert out.state["state"] == {"out": ["A", "B", "C"], "joined": "A-B-C"}
        assert "c1[2].up" in _statuses(out)
        if isinstance(doc, dict):
            assert out.output == "A-B-C"


def test_the_agent_runs_a_streamed_map_from_a_scripted_provider():
    reply = MAP + "$state.joined = join(xs=$state.out)\nreturn $state.joined\n"
    provider = ScriptedProvider([reply], chunk_size=5, tokens_per_second=400)
    agent = Agent(provider=provider, tools=_tools(), max_turns=1)
    result = agent.run("shout every text", input={"texts": ["a", "b"]})
    assert result.status == "succeeded", result.to_json()
    assert result.output == "A-B"
    ids = [c["id"] for t in result.to_json()["turns"] for c in t["calls"]]
    assert ids[:1] == ["c1"] and {"c1[0].up", "c1[1].up", "c2"} <= set(ids)
