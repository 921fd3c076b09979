"""Streamed dispatch: statement splitting, per-call checks on arrival, the scheduler accepting calls
while the reply streams, and the whole-plan checks at the end of the stream."""

from __future__ import annotations

import asyncio
import random

import pytest

from sophon_dsl.llm.stream import (
    StatementSplitter, StreamScheduler, StreamTurn, route_instance, strip_fences,
)
from sophon_dsl.model import Plan
from sophon_dsl.runtime.scheduler import RunOptions
from sophon_dsl.syntax.dsl_parser import parse_dsl
from sophon_dsl.tools import as_registry, tool


def split(text: str, sizes=None) -> list:
    sp = StatementSplitter()
    out = []
    if sizes is None:
        out += sp.feed(text)
    else:
        k = 0
        rng = random.Random(sizes)
        while k < len(text):
            n = rng.randint(1, 9)
            out += sp.feed(text[k:k + n])
            k += n
    out += sp.close()
    return out


PLAN = '''# a comment line
goal = "demo"
@risk(low) @retry(3)
@timeout(5)
s1: $state.a = f(x="a # not a comment; nor this", y=[1,
   2, 3])   # trailing comment
g(x="it's") ; h(x={"k": "v)"})
$state.b = f(x="line\\nbreak")
return {"a": $state.a}'''


def test_splitter_statements_and_positions():
    sts = split(PLAN)
    texts = [s.text for s in sts]
    assert texts[0] == 'goal = "demo"'
    assert texts[1].startswith("@risk(low) @retry(3)\n@timeout(5)\ns1: $state.a = f(") and texts[1].endswith("2, 3])")
    assert texts[2] == 'g(x="it\'s")'
    assert texts[3] == 'h(x={"k": "v)"})'
    assert texts[4] == '$state.b = f(x="line\\nbreak")'
    assert texts[5] == 'return {"a": $state.a}'
    assert (sts[1].line, sts[1].column) == (3, 1)
    assert (sts[3].line, sts[3].column) == (7, 15)
    # each statement parses on its own at its position
    for st in sts:
        plan, diags = parse_dsl("\n" * (st.line - 1) + " " * (st.column - 1) + st.text)
        assert not [d for d in diags if d.is_error], (st, diags)


@pytest.mark.parametrize("seed", range(8))
def test_splitter_does_not_depend_on_chunk_boundaries(seed):
    assert split(PLAN, sizes=seed) == split(PLAN)


def test_splitter_ignores_fences_and_blank_lines():
    sts = split("```dsl\n\nf(x=1)\n\n```\n")
    assert [s.text for s in sts] == ["f(x=1)"]
    assert strip_fences("```\nf()\n```") == "\nf()\n"


def test_statement_waits_for_the_newline_at_depth_zero():
    sp = StatementSplitter()
    assert sp.feed('f(x=[1,\n') == []
    assert sp.feed('2])') == []
    assert [s.text for s in sp.feed("\n")] == ["f(x=[1,\n2])"]


# ---------------------------------------------------------------------------


def registry(events):
    @tool
    async def fetch(name: str) -> dict:
        events.append(f"start fetch {name}")
        await asyncio.sleep(0.01)
        return {"name": name}

    @tool
    async def show(profile: dict) -> str:
        events.append("start show")
        return profile["name"]

    return as_registry([fetch, show], stdlib=False)


def test_first_call_is_dispatched_before_the_stream_ends():
    events: list = []

    async def go():
        turn = StreamTurn(registry(events), input={"who": "Ann"})
        await asyncio.sleep(0)
        turn.feed('$state.p = fetch(name=$input.who)\n')
        await asyncio.sleep(0)
        events.append("still streaming")
        turn.feed('$state.s = show(profile=$state.p)\nreturn $state.s\n')
        out = await turn.finish()
        return turn, out

    turn, out = asyncio.run(go())
    assert events.index("start fetch Ann") < events.index("still streaming")
    assert out.status == "succeeded" and out.output == "Ann"
    assert set(out.dispatch_latency) == {"c1", "c2"}


def test_a_call_failing_its_check_is_refused_on_arrival_and_its_readers_never_run():
    events: list = []

    async def go():
        turn = StreamTurn(registry(events))
        await asyncio.sleep(0)
        turn.feed('$state.p = fetc(name="x")\n')
        refused_at_once = dict(turn.refused)
        turn.feed('$state.s = show(profile=$state.p)\n$state.q = fetch(name="y")\n')
        out = await turn.finish()
        return refused_at_once, out

    refused_at_once, out = asyncio.run(go())
    assert list(refused_at_once) == [0]
    statuses = {c["id"]: c["status"] for c in out.calls}
    assert statuses == {"c1": "failed", "c2": "skipped", "c3": "succeeded"}
    assert "start show" not in events
    assert out.errors[0]["error"]["code"] == "E201" and out.errors[0]["id"] == "c1"


def test_unwritten_read_waits_while_streaming_then_settles_as_in_the_runtime():
    events: list = []

    async def go():
        turn = StreamTurn(registry(events))
        await asyncio.sleep(0)
        turn.feed('$state.s = show(profile=$state.never)\n')
        await asyncio.sleep(0.02)
        waiting = turn.scheduler.records[0].status
        out = await turn.finish()
        return waiting, out

    waiting, out = asyncio.run(go())
    assert waiting == "pending"
    assert out.calls[0]["status"] == "failed"
    assert out.calls[0]["error"]["error"] == "Ref.Unresolved"


def test_whole_plan_checks_run_when_the_stream_closes():
    events: list = []

    async def go():
        turn = StreamTurn(registry(events), state_schema={"type": "object", "properties": {"p": {"type": "object"}}})
        await asyncio.sleep(0)
        turn.feed('$state.s = show(profile=$state.nope)\n')
        before = list(turn.errors)
        out = await turn.finish()
        return before, out

    before, out = asyncio.run(go())
    assert before == []                        # E301 is a whole-plan check: a writer could have come
    assert [e["error"]["code"] for e in out.errors] == ["E301"]
    assert out.calls[0]["status"] == "failed" and out.calls[0]["error"]["error"] == "Plan.Invalid"


def test_lazy_turn_dispatches_nothing_until_executed():
    events: list = []

    async def go():
        turn = StreamTurn(registry(events), mode="lazy")
        turn.feed('$state.p = fetch(name="x")\nreturn $state.p.name\n')
        await asyncio.sleep(0.02)
        ran_early = list(events)
        turn.close_stream()
        out = await turn.execute()
        return ran_early, out

    ran_early, out = asyncio.run(go())
    assert ran_early == [] and out.output == "x"


def test_json_reply_obeys_the_same_rule():
    events: list = []
    reply = ('{"calls": [{"_tool": "fetc", "name": "a", "_outputPath": "†state.p"},'
             ' {"_tool": "fetch", "name": "b", "_outputPath": "†state.q"}], "output": "†state.q.name"}')

    async def go():
        turn = StreamTurn(registry(events))
        for k in range(0, len(reply), 10):
            turn.feed(reply[k:k + 10])
        return await turn.finish()

    out = asyncio.run(go())
    assert out.form == "json" and out.output == "b"
    assert [c["status"] for c in out.calls] == ["failed", "succeeded"]


def test_stream_scheduler_directly():
    events: list = []
    reg = registry(events)

    async def go():
        plan = parse_dsl('$state.s = show(profile=$state.p)\n$state.p = fetch(name="z")\n')[0]
        sched = StreamScheduler(Plan(), reg, options=RunOptions())
        task = asyncio.ensure_future(sched.run())
        await asyncio.sleep(0)
        sched.add_call(plan.calls[0], "c1")           # reader first: waits
        await asyncio.sleep(0.01)
        assert sched.records[0].status == "pending"
        sched.add_call(plan.calls[1], "c2")           # writer arrives: runs; then the reader
        sched.close_stream()
        return await task

    res = asyncio.run(go())
    assert res.status == "succeeded" and res.state["state"] == {"p": {"name": "z"}, "s": "z"}


def test_route_instance_rewrites_state_and_targeted_input():
    call = parse_dsl('@instance("A") $state.out = f(x=$state.text, y=$input.lang, z=$input.shared, '
                     't="about †state.text")\n')[0].calls[0]
    routed = route_instance(call, {"A": {"lang": "fr"}})
    vals = {p.name: p.value for p in routed.params}
    assert vals["x"].kind == "state@A" and vals["y"].kind == "input@A" and vals["z"].kind == "input"
    assert vals["t"].parts[1].kind == "state@A"
    assert routed.output.paths[0].kind == "state@A"
    plain = parse_dsl('f(x=$state.a)\n')[0].calls[0]
    assert route_instance(plain, {}) is plain


@pytest.mark.parametrize("seed", range(4))
def test_form_is_known_at_the_same_delta_as_from_the_whole_reply(seed):
    """Issue 24: the form of a reply that starts with blank or fence lines is decided one delta
    at a time (asking the whole reply at each delta cost its square), and at the same delta."""
    from sophon_dsl.llm.stream import _LeadScan, _detect_form

    rng = random.Random(seed)
    for _ in range(3000):
        text = "".join(rng.choice([" ", "\n", "`", "```", "x", "\t", "{", "\r", "\u2028"])
                       for _ in range(rng.randint(0, 14)))
        scan, so_far = _LeadScan(), ""
        k = 0
        while k < len(text):
            delta = text[k:k + rng.randint(1, 4)]
            k += len(delta)
            so_far += delta
            pending = scan.feed(delta)
            assert pending == (_detect_form(so_far) is None), (text, so_far)
            if not pending:
                break


def test_a_reply_of_blank_lines_streams_in_time_linear_in_its_size():
    text = "\n" * 200_000 + "```dsl\n" * 1000 + "$state.a = f(x=1)\n"
    turn = StreamTurn(as_registry([]), mode="lazy", dispatch=False)
    for k in range(0, len(text), 16):
        turn.feed(text[k:k + 16])
    turn.close_stream()
    assert [c.tool for c in turn.calls] == ["f"]


def test_a_json_reply_with_a_lone_surrogate_is_a_diagnostic_not_a_crash():
    """Issue 24 (found by tests/test_security_fuzz_runtime.py): pydantic_core's from_json raised
    TypeError on a closed list element holding a lone surrogate."""
    text = '[{"_tool": "f", "x": \udcff[1]}]'
    turn = StreamTurn(as_registry([]), mode="lazy", dispatch=False)
    turn.feed(text)
    turn.close_stream()
    assert turn.errors and turn.calls == []
