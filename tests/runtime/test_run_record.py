"""The run's record: timestamps, written paths, call records and task creation.

The scheduler stores raw timestamps and output References and formats them when
they are read; these tests pin what readers see.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
import gc
import platform
import re
import time

import pytest

from sophon_dsl.loader import parse
from sophon_dsl.model import OutputMethod
from sophon_dsl.runtime import Branch, arun, run
from sophon_dsl.runtime.result import CallRecord, new_record
from sophon_dsl.runtime.state import StateLog, iso_time
from sophon_dsl.tools import tool

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@tool
async def echo(value: int) -> int:
    return value


@tool
async def pick(ok: bool) -> dict:
    if not ok:
        raise ValueError("no")
    return Branch(1, {"fine": True})


@tool
def boom() -> int:
    raise RuntimeError("boom")


def plan_of(text: str):
    res = parse(text)
    assert res.ok, res.diagnostics
    return res.plan


def test_call_times_are_iso_utc_and_ordered():
    before = time.time()
    result = run(plan_of("a: $state.a = echo(value=1)\nb: $state.b = echo(value=$state.a)"), [echo])
    after = time.time()
    assert result.status == "succeeded"
    for rec in result.calls:
        assert ISO.match(rec.started_at) and ISO.match(rec.ended_at)
        assert rec.started_at <= rec.ended_at  # same format: text order is time order
        assert iso_time(before)[:19] <= rec.started_at[:19] <= iso_time(after)[:19]
    a, b = result.calls
    assert a.ended_at <= b.started_at  # b read a's output
    j = result.to_json()
    assert [c["started_at"] for c in j["calls"]] == [c.started_at for c in result.calls]
    assert all(ISO.match(m["date"]) for m in j["log"])


def test_skipped_calls_have_an_end_but_no_start():
    result = run(plan_of("a: $state.a = boom()\nb: $state.b = echo(value=$state.a)"), [boom, echo])
    b = result.call("b")
    assert b.status == "skipped"
    assert b.started_at is None and b.to_json()["started_at"] is None
    assert ISO.match(b.ended_at) and b.ended_at >= result.call("a").ended_at  # when it was decided


def test_log_dates_given_or_recorded():
    log = StateLog()
    log.append("state", ("a",), 1, date="2020-01-01T00:00:00.000000Z")
    msg = log.append("state", ("b",), 2)
    assert msg.date == log.messages[1].date == log.to_json()[1]["date"]
    assert ISO.match(msg.date)
    assert log.messages[0].date == "2020-01-01T00:00:00.000000Z"
    assert log.to_json()[0]["date"] == "2020-01-01T00:00:00.000000Z"


def test_iso_time_formats_microseconds():
    assert iso_time(0.0) == "1970-01-01T00:00:00.000000Z"
    assert iso_time(86400.25) == "1970-01-02T00:00:00.250000Z"


def test_written_lists_path_texts():
    text = """
    a: $state.x && $state.y = echo(value=1)
    b: $state.left || $state.right || $state.err = pick(ok=true)
    c: $state.l2 || $state.err2 = pick(ok=false)
    """
    result = run(plan_of(text), [echo, pick])
    assert result.call("a").written == ["†state.x", "†state.y"]
    assert result.call("b").written == ["†state.right"]
    assert result.call("b").branch == "†state.right"
    assert result.call("c").written == ["†state.err2"]
    assert result.call("c").caught
    rec = result.call("a")
    rec.written.append("†state.z")  # a real list, kept
    assert rec.written[-1] == "†state.z"
    rec.written = ["†other"]
    assert rec.written == ["†other"]


def test_new_record_is_a_pending_record():
    fresh = new_record("c1", "echo", 0)
    assert fresh == CallRecord("c1", "echo", 0)
    assert fresh.written == [] and fresh.written is not new_record("c2", "echo", 1).written
    assert fresh.to_json()["status"] == "pending"


@pytest.mark.skipif(platform.python_implementation() != "CPython", reason="CPython object layout")
def test_records_keep_no_dict_of_their_own():
    # Records share one attribute layout; a record that got a dict of its own would be
    # one more object per call for the cyclic GC to track and promote.
    calls = "\n".join(f"c{i}: $state.v{i} = echo(value={i})" for i in range(20))
    result = run(plan_of(calls + "\nlast: $state.last = echo(value=$state.v3)"), [echo])
    assert result.status == "succeeded"
    for rec in result.calls:
        assert not any(type(o) is dict for o in gc.get_referents(rec)), rec.id


def test_writer_that_fails_in_the_first_pass_settles_earlier_readers():
    # `early` comes first in the plan but reads what `late` writes; `late` fails without
    # starting (its own input is missing), so `early` is skipped and `other` runs.  (The
    # input schema makes `missing` optional: without one the run would be refused, E310.)
    text = """
    input = {"type": "object", "properties": {"missing": {}}}
    early: $state.early = echo(value=$state.late)
    late: $state.late = echo(value=$input.missing)
    other: $state.other = echo(value=3)
    fallback: $state.fb = echo(value=$state.late || $state.other)
    """
    result = run(plan_of(text), [echo], input={})
    status = {c.id: c.status for c in result.calls}
    assert status == {"early": "skipped", "late": "failed", "other": "succeeded", "fallback": "succeeded"}
    assert result.call("late").error.error == "Ref.Unresolved"
    assert "late failed" in result.call("early").reason
    assert result.state["state"] == {"other": 3, "fb": 3}


def test_custom_task_factory_is_used():
    created = []

    def factory(loop, coro, **kw):
        created.append(getattr(coro, "__qualname__", ""))
        return asyncio.Task(coro, loop=loop, **kw)

    async def main():
        asyncio.get_running_loop().set_task_factory(factory)
        return await arun(plan_of("a: $state.a = echo(value=1)\nb: $state.b = echo(value=$state.a)"),
                          [echo])

    result = asyncio.run(main())
    assert result.status == "succeeded"
    assert sum(q.endswith("run_call") for q in created) == 2


def test_merge_output_still_needs_an_object():
    @tool
    async def num() -> int:
        return 1

    result = run(plan_of("a: $state.a &= num()"), [num])
    assert result.call("a").error.error == "Tool.OutputInvalid"
    assert OutputMethod.MERGE.value in result.call("a").error.cause


def test_call_gate_edit_may_change_arguments_only():
    from sophon_dsl.model import Literal, Param
    from sophon_dsl.runtime import ApprovalDecision

    @tool(risk="high")
    async def send(to: str) -> str:
        return f"sent to {to}"

    @tool
    async def draft(to: str) -> str:
        return f"draft for {to}"

    text = "m: $state.m = send(to=\"team\")\nd: $state.d = echo(value=1) \n"

    def gate(edit):
        async def approver(req):
            if req.kind == "plan":
                return True
            return ApprovalDecision.edit(edit(req.call))
        return approver

    args_edit = gate(lambda c: replace(c, params=(Param("to", Literal("ana")),)))
    r = run(plan_of(text), [send, draft, echo], approve=args_edit, approve_calls=True)
    assert r.status == "succeeded" and r.state["state"]["m"] == "sent to ana"

    tool_edit = gate(lambda c: replace(c, tool="draft"))
    r = run(plan_of(text + "x: $state.x = draft(to=$state.m)"), [send, draft, echo], approve=tool_edit,
            approve_calls=True)
    m = r.call("m")
    assert m.status == "failed" and m.error.error == "Approval.Rejected"
    assert "keep the tool and output path" in m.error.cause
    assert r.call("x").status == "skipped" and r.call("d").status == "succeeded"
    assert "m" not in r.state.get("state", {})

    output_edit = gate(lambda c: replace(c, output=None))
    r = run(plan_of(text), [send, draft, echo], approve=output_edit, approve_calls=True)
    assert r.call("m").error.error == "Approval.Rejected"
