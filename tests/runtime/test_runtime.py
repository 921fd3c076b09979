"""Runtime behaviour: state resolution, branching, cascade, retries, timeouts, cancellation,
approval, events, latent calls, fire-and-forget, result JSON, dry-run."""

from __future__ import annotations

import asyncio
import json

import pytest

from sophon_dsl.loader import parse
from sophon_dsl.model import OutputMethod
from sophon_dsl.runtime import (
    ApprovalDecision, Branch, PlanInvalid, RunError, dry_run, run, start,
)
from sophon_dsl.runtime.state import StateLog
from sophon_dsl.tools import tool


def plan_of(calls, **header):
    res = parse(json.dumps({**header, "calls": calls}), "json")
    assert res.ok, res.diagnostics
    return res.plan


@tool
async def echo(x: object = None) -> object:
    return x


@tool
def sync_echo(x: object = None) -> object:
    return x


@tool
def boom(x: object = None) -> object:
    raise ValueError("boom")


@tool(risk="medium")
def send(to: str) -> dict:
    return {"sent": to}


TOOLS = [echo, sync_echo, boom, send]


# ---------------------------------------------------------------- state


def test_state_resolution_methods():
    log = StateLog()
    log.append("data", (), {"user": {"name": "Alex", "status": "active"}})
    log.append("data", ("user", "status"), "inactive")
    assert log.get("data", ("user",)) == {"name": "Alex", "status": "inactive"}
    log.append("data", ("items",), 1, OutputMethod.PUSH)
    log.append("data", ("items",), [2, 3], OutputMethod.CONCAT)
    log.append("data", ("user",), {"tags": {"a": 1}}, OutputMethod.MERGE)
    log.append("data", ("user",), {"tags": {"b": 2}}, OutputMethod.MERGE)
    log.append("data", ("cfg",), {"a": {"x": 1}}, OutputMethod.ASSIGN)
    log.append("data", ("cfg",), {"a": {"y": 2}}, OutputMethod.ASSIGN)
    assert log.get("data", ("items",)) == [1, 2, 3]
    assert log.get("data", ("user", "tags")) == {"a": 1, "b": 2}
    assert log.get("data", ("cfg",)) == {"a": {"y": 2}}
    log.append("data", ("items",), [9])  # set stops the search
    assert log.get("data", ("items",)) == [9]
    assert len(log.messages) == 9  # append-only


# ---------------------------------------------------------------- data flow


def test_data_flow_templates_and_json():
    plan = plan_of([
        {"_id": "a", "_tool": "echo", "x": {"n": 1}, "_outputPath": "†state.a"},
        {"_id": "b", "_tool": "sync_echo", "x": "n=†state.a.n obj=†state.a", "_outputPath": "†state.b"},
        {"_id": "c", "_tool": "echo", "x": ["†state.a", "†input.q"], "_outputPath": "†state.c"},
    ], output={"final": "†state.b"})
    r = run(plan, TOOLS, input={"q": True})
    assert r.status == "succeeded"
    assert r.state["state"]["b"] == 'n=1 obj={"n":1}'
    assert r.state["state"]["c"] == [{"n": 1}, True]
    assert r.output == {"final": 'n=1 obj={"n":1}'}
    j = r.to_json()
    assert set(j) == {"status", "state", "output", "calls", "error", "log", "run_id"}  # run_id: issue 13
    assert set(j["calls"][0]) == {"id", "tool", "status", "attempts", "error", "reason", "started_at", "ended_at"}
    assert [m["call"] for m in j["log"] if m["kind"] == "state"] == ["a", "b", "c"] or len(j["log"]) == 4


def test_default_ids_and_cascade_with_fallback():
    plan = plan_of([
        {"_tool": "boom", "_outputPath": "†state.x"},                       # c1 fails
        {"_tool": "echo", "x": "†state.x", "_outputPath": "†state.y"},       # c2 skipped
        {"_tool": "echo", "x": "†state.y", "_outputPath": "†state.z"},       # c3 skipped transitively
        {"_tool": "echo", "x": "†state.x || †state.d", "_outputPath": "†state.w"},  # c4 fallback
        {"_tool": "echo", "x": 5, "_outputPath": "†state.d"},               # c5 unrelated
    ])
    r = run(plan, TOOLS)
    st = {c.id: c.status for c in r.calls}
    assert st == {"c1": "failed", "c2": "skipped", "c3": "skipped", "c4": "succeeded", "c5": "succeeded"}
    assert r.status == "failed"
    assert r.call("c1").error.error == "Tool.Failed"
    assert "c1 failed" in r.call("c2").reason
    assert r.state["state"] == {"w": 5, "d": 5}


def test_branching_pick_catch_and_dead_branch():
    @tool
    def verify(x: int):
        return Branch("†state.big", x) if x > 2 else x

    plan = plan_of([
        {"_id": "v", "_tool": "verify", "x": 3, "_outputPath": "†state.small || †state.big"},
        {"_id": "s", "_tool": "echo", "x": "†state.small", "_outputPath": "†state.s"},
        {"_id": "b", "_tool": "echo", "x": "†state.big", "_outputPath": "†state.b"},
        {"_id": "p", "_tool": "boom", "_outputPath": "†state.ok || †state.err"},
        {"_id": "h", "_tool": "echo", "x": "†state.err", "_outputPath": "†state.handled"},
        {"_id": "n", "_tool": "echo", "x": 1, "_outputPath": "†state.first || †state.second"},
    ])
    r = run(plan, [*TOOLS, verify])
    st = {c.id: c.status for c in r.calls}
    assert st == {"v": "succeeded", "s": "skipped", "b": "succeeded", "p": "failed", "h": "succeeded",
                  "n": "succeeded"}
    assert "another branch" in r.call("s").reason
    assert r.state["state"]["handled"] == {"error": "Tool.Failed", "cause": "ValueError: boom"}
    assert r.state["state"]["first"] == 1
    assert r.status == "succeeded"  # the failure was caught by its branch


def test_fan_out_and_output_schema_violation():
    @tool
    def bad() -> int:
        return "nope"  # type: ignore[return-value]

    plan = plan_of([
        {"_id": "f", "_tool": "echo", "x": 7, "_outputPath": "†state.a && †data.b"},
        {"_id": "g", "_tool": "bad", "_outputPath": "†state.g"},
    ])
    r = run(plan, [*TOOLS, bad])
    assert r.state["state"]["a"] == 7 and r.state["data"]["b"] == 7
    assert r.call("g").error.error == "Tool.OutputInvalid"
    assert "g" not in r.state["state"]


def test_retries_with_filter():
    n = {"k": 0}

    @tool
    def flaky() -> int:
        n["k"] += 1
        if n["k"] < 3:
            raise RunError("Net.Flaky", "try again")
        return n["k"]

    plan = plan_of([{"_id": "f", "_tool": "flaky", "_outputPath": "†state.f",
                     "_retry": {"max_attempts": 5, "interval": 0, "errors": ["Net.*"]}}])
    r = run(plan, [flaky])
    assert r.call("f").attempts == 3 and r.state["state"]["f"] == 3
    assert sum(1 for e in r.events if e.type == "plan_step_retry") == 2

    n["k"] = 0
    plan = plan_of([{"_id": "f", "_tool": "flaky", "_outputPath": "†state.f",
                     "_retry": {"max_attempts": 5, "interval": 0, "errors": ["Tool.Timeout"]}}])
    r = run(plan, [flaky])
    assert r.call("f").attempts == 1 and r.call("f").error.error == "Net.Flaky"


def test_call_timeout_and_plan_timeout():
    @tool
    async def slow() -> int:
        await asyncio.sleep(5)
        return 1

    plan = plan_of([{"_id": "s", "_tool": "slow", "_outputPath": "†state.s", "_timeout": 0.01},
                    {"_id": "e", "_tool": "echo", "x": 1, "_outputPath": "†state.e"}])
    r = run(plan, [slow, echo])
    assert r.call("s").error.error == "Tool.Timeout"
    assert r.call("e").status == "succeeded"

    plan = plan_of([{"_id": "s", "_tool": "slow", "_outputPath": "†state.s"},
                    {"_id": "t", "_tool": "echo", "x": "†state.s", "_outputPath": "†state.t"},
                    {"_id": "e", "_tool": "echo", "x": 1, "_outputPath": "†state.e"}])
    r = run(plan, [slow, echo], max_time=0.05)
    assert r.status == "failed" and r.error.error == "Plan.Timeout"
    assert {c.id: c.status for c in r.calls} == {"s": "cancelled", "t": "cancelled", "e": "succeeded"}
    assert r.state["state"] == {"e": 1}  # nothing already written is lost


def test_cancel_and_event_stream():
    async def main():
        started = asyncio.Event()

        @tool
        async def wait_forever() -> int:
            started.set()
            await asyncio.sleep(10)
            return 1

        plan = plan_of([{"_id": "w", "_tool": "wait_forever", "_outputPath": "†state.w"},
                        {"_id": "d", "_tool": "echo", "x": "†state.w", "_outputPath": "†state.d"},
                        {"_id": "q", "_tool": "echo", "x": 2, "_outputPath": "†state.q"}],
                       goal="cancel me")
        h = start(plan, [wait_forever, echo])
        seen = []

        async def consume():
            async for ev in h.events():
                seen.append(ev)

        consumer = asyncio.ensure_future(consume())
        await started.wait()
        h.cancel()
        r = await h.result()
        await consumer
        return r, seen

    r, seen = asyncio.run(main())
    assert r.status == "cancelled"
    assert {c.id: c.status for c in r.calls} == {"w": "cancelled", "d": "cancelled", "q": "succeeded"}
    assert r.state["state"] == {"q": 2}
    types = [e.type for e in seen]
    assert types[0] == "plan_start" and types[-1] == "plan_failed" and seen[-1].status == "cancelled"
    assert all(e.goal == "cancel me" and e.total_steps == 3 for e in seen)
    done = [e for e in seen if e.type == "plan_step_complete"]
    assert done[0].step_index == 2 and done[0].preview == "2"


def test_fire_and_forget_is_awaited():
    seen = []

    @tool
    async def notify(text: str) -> None:
        await asyncio.sleep(0.01)
        seen.append(text)

    plan = plan_of([{"_id": "n", "_tool": "notify", "text": "hi"},
                    {"_id": "e", "_tool": "echo", "x": 1, "_outputPath": "†state.e"}])
    r = run(plan, [notify, echo])
    assert seen == ["hi"] and r.call("n").status == "succeeded"


def test_plan_approval_gate():
    plan = plan_of([{"_id": "a", "_tool": "echo", "x": 1, "_outputPath": "†state.a"},
                    {"_id": "m", "_tool": "send", "to": "team", "_outputPath": "†state.m"}])
    r = run(plan, TOOLS)  # no approver: a risky plan is rejected before anything runs
    assert r.status == "rejected" and r.error.error == "Approval.Rejected"
    assert all(c.status == "pending" for c in r.calls) and r.state == {}
    assert run(plan, TOOLS, approve=False).status == "rejected"
    assert run(plan, TOOLS, approve=True).status == "succeeded"

    asked = []

    async def approver(req):
        asked.append((req.kind, [c["id"] for c in req.calls]))
        return ApprovalDecision.edit(plan_of([{"_id": "a", "_tool": "echo", "x": 2, "_outputPath": "†state.a"}]))

    r = run(plan, TOOLS, approve=approver)
    assert asked == [("plan", ["m"])]
    assert r.status == "succeeded" and r.state == {"state": {"a": 2}}

    async def slow_approver(req):
        await asyncio.sleep(1)
        return True

    r = run(plan, TOOLS, approve=slow_approver, approval_timeout=0.01)
    assert r.status == "rejected"


def test_per_call_gate():
    async def approver(req):
        return req.kind == "plan"

    plan = plan_of([{"_id": "m", "_tool": "send", "to": "team", "_outputPath": "†state.m"},
                    {"_id": "d", "_tool": "echo", "x": "†state.m", "_outputPath": "†state.d"}])
    r = run(plan, TOOLS, approve=approver, approve_calls=True)
    assert r.call("m").error.error == "Approval.Rejected"
    assert r.call("d").status == "skipped" and r.status == "failed"


def test_latent_calls():
    plan = plan_of([{"_id": "s", "_tool": "sentiment", "text": "great", "_output": {"sentiment": "positive"},
                     "_outputPath": "†state.s"}],
                   tools={"sentiment": {"description": "latent", "output": {"type": "object"}}})
    r = run(plan, [])
    assert r.state["state"]["s"] == {"sentiment": "positive"}

    plan = plan_of([{"_id": "s", "_tool": "sentiment", "text": "great", "_outputPath": "†state.s"}],
                   tools={"sentiment": {"description": "latent"}})
    with pytest.raises(PlanInvalid) as exc:
        run(plan, [])
    assert any(d.code == "E206" for d in exc.value.diagnostics)

    class Llm:
        async def execute(self, request):
            return {"said": request.args["text"]}

    r = run(plan, [], executor=Llm())
    assert r.state["state"]["s"] == {"said": "great"}


def test_concurrency_limit_and_callbacks():
    active = {"now": 0, "max": 0}

    @tool
    async def busy(i: int) -> int:
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        await asyncio.sleep(0.002)
        active["now"] -= 1
        return i

    plan = plan_of([{"_tool": "busy", "i": i, "_outputPath": f"†state.b{i}"} for i in range(8)])
    events = []
    r = run(plan, [busy], max_concurrency=2, on_event=events.append)
    assert r.status == "succeeded" and active["max"] <= 2
    assert events[-1].type == "plan_complete"


def test_failing_step_never_corrupts_state():
    plan = plan_of([{"_id": "a", "_tool": "echo", "x": {"k": 1}, "_outputPath": "†state.a"},
                    {"_id": "b", "_tool": "boom", "x": "†state.a", "_outputPath": "†state.a",
                     "_outputMethod": "merge"}])
    r = run(plan, TOOLS)
    assert r.state["state"]["a"] == {"k": 1}


def test_dry_run_report():
    plan = plan_of([
        {"_id": "s1", "_tool": "echo", "x": 1, "_outputPath": "†state.a"},
        {"_id": "s2", "_tool": "echo", "x": 2, "_outputPath": "†state.b"},
        {"_id": "s4", "_tool": "sync_echo", "x": ["†state.a", "†state.b"], "_outputPath": "†state.c"},
        {"_id": "s5", "_tool": "send", "to": "†state.c", "_outputPath": "†state.ok || †state.err"},
        {"_id": "s6", "_tool": "echo", "x": "†state.ok", "_outputPath": "†state.done"},
    ])
    rep = dry_run(plan, TOOLS, mocks={"echo": {"result": "r", "latency": 1.0},
                                      "s4": {"result": "sheet", "latency": 0.5},
                                      "s5": [{"error": "Mail.Down", "latency": 0.25}]})
    assert rep.parallel_groups[0] == ["s1", "s2"]
    assert rep.makespan == pytest.approx(1.75)
    assert rep.approvals == [{"id": "s5", "tool": "send", "risk": "medium", "index": 3}]
    assert rep.branches == [{"id": "s5", "taken": "†state.err", "not_taken": ["†state.ok"]}]
    assert rep.skipped[0]["id"] == "s6"
    # without mocks: samples from output schemas
    rep = dry_run(plan, TOOLS)
    assert rep.result.state["state"]["ok"] == {}  # dict -> {"type": "object"}
    assert rep.result.state["state"]["a"] == "<echo result>"  # no usable schema
    json.dumps(rep.to_json())


def test_dsl_text_end_to_end():
    text = '''goal = "dsl"
†state.a = echo(x=1)
†state.b && †state.c = echo(x=†state.a)
s3: sync_echo(x="a=†state.a")
†state.ok || †state.err = boom(x=†state.b)
'''
    r = run(text, TOOLS)
    assert r.state["state"]["b"] == 1 and r.state["state"]["c"] == 1
    assert r.state["state"]["err"]["error"] == "Tool.Failed"
    assert r.call("s3").status == "succeeded" and r.status == "succeeded"
