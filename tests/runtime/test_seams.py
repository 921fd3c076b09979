"""The runtime's seams (StateStore, Invoker, PlanFeed) and the cost rules of the scheduler.

Costs are checked by counting work (evaluations of a call's inputs), never by timing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sophon_dsl.loader import loads
from sophon_dsl.runtime import (
    FixedPlan, GrowingPlan, Invocation, LocalInvoker, MemoryStore, RunOptions, Scheduler, StateStore, arun,
)
from sophon_dsl.runtime.inputs import InputResolver
from sophon_dsl.runtime.store import CommitBarrier, CommitListener
from sophon_dsl.tools import ToolRegistry, tool


@tool
async def echo(value: Any = None) -> Any:
    return value


@tool
async def gather(rows: list) -> int:
    return len(rows)


@tool
async def count(n: int) -> int:
    return n


def plan_of(text: str):
    return loads(text, format="dsl")


class CountingResolver(InputResolver):
    """Counts how often each call's inputs are evaluated."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.evaluations: dict[int, int] = {}

    def evaluate(self, i: int, call: Any):
        self.evaluations[i] = self.evaluations.get(i, 0) + 1
        return super().evaluate(i, call)


def _counting(sched: Scheduler) -> CountingResolver:
    res = CountingResolver(sched.flow, sched._ended, sched.wrote, sched.records, sched.store.get)
    sched.inputs = res
    return res


def test_fan_in_call_is_examined_once_when_its_last_input_ends():
    n = 300
    lines = [f"$state.p{k} = echo(value={k})" for k in range(n)]
    lines.append("$state.total = gather(rows=[" + ", ".join(f"$state.p{k}" for k in range(n)) + "])")
    plan = plan_of("\n".join(lines))
    reg = ToolRegistry([echo, gather])
    sched = Scheduler(plan, reg)
    res = _counting(sched)
    result = asyncio.run(sched.run())
    assert result.status == "succeeded" and result.state["state"]["total"] == n
    assert res.evaluations[n] == 1


def test_prefix_readers_wait_for_every_writer_below():
    n = 200
    lines = [f"$state.rows.k{k} = echo(value={k})" for k in range(n)]
    lines += [f"$state.r{j} = echo(value=$state.rows)" for j in range(5)]
    plan = plan_of("\n".join(lines))
    sched = Scheduler(plan, ToolRegistry([echo]))
    res = _counting(sched)
    result = asyncio.run(sched.run())
    assert result.status == "succeeded"
    assert result.state["state"]["r3"] == {f"k{k}": k for k in range(n)}
    assert all(res.evaluations[n + j] == 1 for j in range(5))


def test_failed_dependency_skips_a_reader_before_its_other_inputs_end():
    @tool
    async def boom() -> int:
        raise RuntimeError("no")

    @tool
    async def slow(value: int) -> int:
        await asyncio.sleep(0.05)
        return value

    plan = plan_of("$state.a = boom()\n$state.b = slow(value=1)\n$state.c = gather(rows=[$state.a, $state.b])")
    result = asyncio.run(arun(plan, [boom, slow, gather]))
    c = result.call("c3")
    assert c.status == "skipped" and "c1 failed" in c.reason
    # skipped as soon as c1 failed, not when the slow call ended
    assert c.ended < result.call("c2").ended


def test_fallback_reader_is_decided_before_its_right_alternative_ends():
    @tool
    async def slow(value: int) -> int:
        await asyncio.sleep(0.05)
        return value

    plan = plan_of("$state.a = echo(value=1)\n$state.b = slow(value=2)\n$state.c = echo(value=$state.a || $state.b)")
    result = asyncio.run(arun(plan, [echo, slow]))
    assert result.state["state"]["c"] == 1
    assert result.call("c3").ended < result.call("c2").ended


class RecordingStore(MemoryStore):
    """A store that remembers what the scheduler told it (the durable stores' hooks)."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []
        self.ended: list[tuple[str, str]] = []

    def record_started(self, record):
        self.started.append(record.id)

    def record_ended(self, record):
        self.ended.append((record.id, record.status))


def test_a_store_sees_writes_and_record_changes():
    plan = plan_of("a: $state.a = echo(value=1)\nb: $state.b = echo(value=$state.a)\nc: $state.c = boom()")

    @tool
    async def boom() -> int:
        raise RuntimeError("no")

    store = RecordingStore()
    assert isinstance(store, StateStore)
    sched = Scheduler(plan, ToolRegistry([echo, boom]), store=store)
    result = asyncio.run(sched.run())
    assert result.status == "failed"
    assert sorted(store.started) == ["a", "b", "c"]
    assert sorted(store.ended) == [("a", "succeeded"), ("b", "succeeded"), ("c", "failed")]
    assert store.get("state", ("b",)) == 1 and [m["call"] for m in result.log] == ["a", "b"]


class TracingInvoker(LocalInvoker):
    """Runs every call through invoke() (no direct fast path) and records it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, dict]] = []

    def direct(self, call, spec):
        return None

    async def invoke(self, inv: Invocation) -> Any:
        self.seen.append((inv.call_id, dict(inv.args)))
        return await super().invoke(inv)


def test_an_invoker_runs_every_call():
    plan = plan_of("a: $state.a = echo(value=1)\nb: $state.b = echo(value=$state.a)")
    inv = TracingInvoker()
    result = asyncio.run(Scheduler(plan, ToolRegistry([echo]), invoker=inv).run())
    assert result.status == "succeeded"
    assert inv.seen == [("a", {"value": 1}), ("b", {"value": 1})]


@pytest.mark.parametrize("order", ["any", "written"])
def test_a_growing_plan_wires_forward_reads_and_settles_at_the_close(order):
    reader = plan_of("$state.s = echo(value=$state.p)").calls[0]
    writer = plan_of("$state.p = echo(value=7)").calls[0]
    lonely = plan_of("$state.t = echo(value=$state.never)").calls[0]

    async def go():
        feed = GrowingPlan(plan_of("goal = \"g\""), order)
        sched = Scheduler(feed, ToolRegistry([echo]), options=RunOptions())
        task = asyncio.ensure_future(sched.run())
        await asyncio.sleep(0)
        feed.add(reader, "r")
        feed.add(lonely, "l")
        await asyncio.sleep(0.01)
        assert [r.status for r in sched.records] == ["pending", "pending"]  # a writer may come
        feed.add(writer, "w")
        await asyncio.sleep(0.01)
        # in any order the read waits for the close (another writer may come); in written
        # order it goes once the writers seen have ended
        assert sched.records[0].status == ("succeeded" if order == "written" else "pending")
        feed.close()
        return await task

    result = asyncio.run(go())
    assert result.state["state"] == {"p": 7, "s": 7}
    assert result.call("l").error.error == "Ref.Unresolved"
    assert result.goal == "g"


def test_fixed_plan_feed_is_closed():
    plan = plan_of("$state.a = echo(value=1)")
    feed = FixedPlan(plan)
    assert not feed.is_open and feed.ids == ["c1"] and len(feed.flow) == 1


def test_input_read_from_a_call_is_validated_at_run_time():
    @tool
    async def text() -> Any:
        return "not a number"

    result = asyncio.run(arun(plan_of("$state.t = text()\n$state.n = count(n=$state.t)"), [text, count]))
    err = result.call("c2").error
    assert err.error == "Tool.InputInvalid" and "parameter 'n'" in err.cause


def test_literal_arguments_are_not_validated_again_at_run_time(monkeypatch):
    from sophon_dsl.runtime import runner

    calls = []
    real = runner.CallRunner._check_input
    monkeypatch.setattr(runner.CallRunner, "_check_input",
                        lambda self, *a: calls.append(a) or real(self, *a))
    result = asyncio.run(arun(plan_of("$state.n = count(n=3)"), [count]))
    assert result.status == "succeeded" and calls == []


@pytest.mark.parametrize("edit", [True])
def test_edited_call_arguments_are_validated(edit):
    from sophon_dsl.runtime import ApprovalDecision

    plan = plan_of("@risk(high) $state.n = count(n=3)")

    async def approver(req):
        if req.kind == "call":
            edited = plan_of('@risk(high) $state.n = count(n="three")').calls[0]
            return ApprovalDecision.edit(edited)
        return ApprovalDecision.approve()

    result = asyncio.run(arun(plan, [count], approve=approver, approve_calls=True))
    assert result.call("c1").error.error == "Tool.InputInvalid"


def test_a_reused_compiled_plan_gets_the_checkers_run_codes():
    from sophon_dsl.compiler import compile_plan
    from sophon_dsl.runtime import PlanInvalid
    from sophon_dsl.tools import ToolSpec

    declared = ToolSpec(name="ship", description="", input_schema={"type": "object"}, output_schema=None,
                        explicit=True)
    latent = ToolSpec(name="think", description="", input_schema={"type": "object"}, output_schema=None)
    plan = plan_of("$state.a = ship()\n$state.b = think()")
    compiled = compile_plan(plan, ToolRegistry([declared, latent]))
    assert compiled.ok  # checking alone needs only the schemas
    with pytest.raises(PlanInvalid) as exc:
        asyncio.run(arun(compiled))
    assert sorted(d.code for d in exc.value.diagnostics) == ["E206", "E207"]
    # the same codes, by the same rules, as checking it for a run from the start
    fresh = compile_plan(plan, ToolRegistry([declared, latent]), require_executor=True,
                         require_implementations=True)
    assert sorted(d.message for d in exc.value.diagnostics) == sorted(d.message for d in fresh.diagnostics)


def test_statically_valid_proves_only_what_needs_no_run_time_check():
    from sophon_dsl.model import ListValue, Literal, ObjectValue, Reference
    from sophon_dsl.runtime.validation import statically_valid

    ref = Reference("state", ("a",))
    any_list = {"anyOf": [{"type": "array", "items": {}}, {"type": "null"}], "default": None}
    int_list = {"type": "array", "items": {"type": "integer"}}
    assert statically_valid(ListValue((ref, Literal(1))), any_list)
    assert not statically_valid(ref, any_list)                       # the writer may return anything
    assert not statically_valid(ListValue((ref,)), int_list)        # items must be integers
    assert statically_valid(ListValue((Literal(2),)), int_list)
    assert not statically_valid(ListValue((Literal("x"),)), int_list)
    assert statically_valid(ref, {}) and statically_valid(ref, True)
    assert statically_valid(ObjectValue((("k", ref),)), {"type": "object"})
    assert not statically_valid(ObjectValue((("k", ref),)), {"type": "object", "required": ["z"]})
    assert not statically_valid(ListValue((ref,)), {"type": "array", "items": {}, "maxItems": 0})


def test_a_list_of_read_values_reaches_a_constrained_tool_checked():
    @tool
    async def nums() -> Any:
        return "seven"

    @tool
    async def total(values: list[int]) -> int:
        return sum(values)

    result = asyncio.run(arun(plan_of("$state.n = nums()\n$state.t = total(values=[$state.n, 1])"),
                              [nums, total]))
    err = result.call("c2").error
    assert err.error == "Tool.InputInvalid" and "parameter 'values'" in err.cause


def test_calls_waiting_for_a_concurrency_slot_are_queued_not_started():
    @tool
    async def slow(value: int) -> int:
        await asyncio.sleep(0.02)
        return value

    plan = plan_of("$state.a = slow(value=1)\n$state.b = slow(value=2)\n$state.c = slow(value=3)")
    events: list = []
    result = asyncio.run(arun(plan, [slow], max_concurrency=1, on_event=events.append))
    assert result.status == "succeeded"
    kinds = [(e.type, e.call_id) for e in events if e.type in ("plan_step_queued", "plan_step_start")]
    assert kinds.count(("plan_step_queued", "c2")) == 1 and kinds.count(("plan_step_start", "c2")) == 1
    # each call started when the one before had ended, not when it was queued
    recs = result.calls
    assert recs[0].ended <= recs[1].started and recs[1].ended <= recs[2].started
    assert recs[1].started_at >= recs[0].ended_at


class HeldCommits(MemoryStore):
    """A :class:`CommitBarrier` whose commits the test makes: a completion waits until
    :meth:`commit`, and what was held for it starts then."""

    run_id = "held"

    def __init__(self) -> None:
        super().__init__()
        self.cleared: set[int] = set()
        self.pending: list[int] = []
        self.held: list[tuple] = []
        self.listener: CommitListener | None = None

    def connect(self, listener: CommitListener) -> None:
        self.listener = listener

    def start_after_intent(self, i: int, args: dict, inline: Any) -> bool:
        return False

    def settle_after_commit(self, i: int) -> None:
        self.pending.append(i)

    def hold(self, i: int, args: dict, inline: Any, *, intent: bool) -> None:
        self.held.append((i, args, inline))

    async def before_start(self, i, call, args, *, intent):
        return None

    async def intent_now(self, i, call):
        return None

    def restore_joined(self, indices: range) -> list[int]:
        return []

    def uncommitted(self, indices) -> bool:
        return any(i in self.pending for i in indices)

    def commit(self) -> None:
        assert self.listener is not None
        ended, self.pending = self.pending, []
        starts, self.held = self.held, []
        if starts:
            self.listener.on_intents(starts)
        for i in ended:
            self.listener.on_committed(i)


def test_a_streamed_reader_of_an_uncommitted_completion_starts_once_it_is_committed():
    """The commit barrier's rule for calls that arrive while the run runs: a call reading one
    that has ended, whose completion is not committed yet, is held until it is."""
    writer = plan_of("w: $state.p = echo(value=7)").calls[0]
    reader = plan_of("r: $state.s = echo(value=$state.p)").calls[0]

    async def go():
        store = HeldCommits()
        assert isinstance(store, CommitBarrier)
        feed = GrowingPlan(plan_of("goal = \"g\""), "written")
        sched = Scheduler(feed, ToolRegistry([echo]), options=RunOptions(), store=store)
        task = asyncio.ensure_future(sched.run())
        await asyncio.sleep(0)
        feed.add(writer, "w")
        await asyncio.sleep(0.01)
        assert sched.records[0].status == "succeeded" and store.pending == [0]
        feed.add(reader, "r")  # in written order a read goes once its writers have ended...
        await asyncio.sleep(0.01)
        assert sched.records[1].status == "pending"  # ...and here, once that end is committed
        store.commit()
        feed.close()
        await asyncio.sleep(0.01)
        store.commit()
        return await task

    result = asyncio.run(go())
    assert result.status == "succeeded" and result.state["state"] == {"p": 7, "s": 7}
