"""Durable runs through the Python API: commits per call, the barrier, intents, resume,
in-doubt calls, approvals kept, waiting runs, the lease and the plan hash."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading

import pytest

import sophon_dsl
from sophon_dsl import tool
from sophon_dsl.durable.resume import StoreRunError

from . import plans
from .faults import FaultyStore, forget_lease


@pytest.fixture(autouse=True)
def _fresh_ledger():
    plans.reset_ledger()


def _db(tmp_path):
    path = str(tmp_path / "runs.db")
    return path, f"sqlite:///{path}"


def _rows(path, sql, *params):
    with sqlite3.connect(path) as conn:
        return conn.execute(sql, params).fetchall()


def test_committed_log_equals_the_run_log_and_run_id_is_in_the_json(store_url):
    r = sophon_dsl.run(plans.seeded_plan(1, 30), tools=plans.TOOLS, input={"zero": 0}, store=store_url)
    assert r.to_json()["run_id"] == r.run_id
    store = sophon_dsl.open_store(store_url)
    try:
        committed = store.load_log(r.run_id)
        run = store.get_run(r.run_id)
        calls = store.load_calls(r.run_id)
    finally:
        store.close()
    assert [(e["seq"], e["kind"], e["path"], e["value"], e["call"]) for e in committed] == \
        [(m["seq"], m["kind"], m["path"], m["value"], m["call"]) for m in r.log]
    assert run["status"] == "succeeded" and run["last_seq"] == len(r.log) - 1 and run["lease_owner"] is None
    assert {c.id: c.status for c in r.calls} == {cid: rec["status"] for cid, rec in calls.items()}


def test_current_call_in_async_and_thread_pool_tools():
    seen = []

    @tool
    def sync_tool() -> str:
        c = sophon_dsl.current_call()
        where = "main" if threading.current_thread() is threading.main_thread() else "worker"
        seen.append((where, c.call_id, c.key, c.attempt))
        return "ok"

    @tool
    async def async_tool() -> str:
        c = sophon_dsl.current_call()
        seen.append(("async", c.call_id, c.key, c.attempt))
        return "ok"

    r = sophon_dsl.run("s1: $state.a = sync_tool()\ns2: $state.b = async_tool()\n", tools=[sync_tool, async_tool])
    assert sorted(seen) == sorted([("worker", "s1", f"{r.run_id}:s1", 1), ("async", "s2", f"{r.run_id}:s2", 1)])
    assert sophon_dsl.current_call() is None


def test_barrier_and_intents(tmp_path):
    path, url = _db(tmp_path)
    seen = {}

    @tool
    def first() -> int:
        seen["intent_before_start"] = _rows(path, "SELECT call_id FROM intents")
        return 1

    @tool(idempotent=True)
    def second(x: int) -> int:
        seen["committed_before_dependent"] = _rows(path, "SELECT call_id FROM calls")
        seen["intents"] = _rows(path, "SELECT call_id FROM intents")
        return x + 1

    r = sophon_dsl.run("a: $state.a = first()\nb: $state.b = second(x=$state.a)\n", tools=[first, second],
                       store=url)
    assert r.ok
    assert seen["intent_before_start"] == [("a",)]     # not idempotent: intent committed first
    assert seen["committed_before_dependent"] == [("a",)]  # the barrier
    assert seen["intents"] == [("a",)]                 # idempotent: no intent


def test_a_chain_edge_is_one_transaction_and_its_dependent_starts_after_it(tmp_path):
    """A call that is not idempotent and reads another's result: its intent is committed in
    the transaction of its parent's completion (one commit per edge, not two), and when its
    tool starts both are committed.  Counted on chains of 4 and 8 calls: 4 more edges, 4 more
    transactions."""
    seen: dict = {}
    db: list = []

    @tool
    def step(x: int) -> int:
        cid = sophon_dsl.current_call().call_id
        seen[cid] = ({c for (c,) in _rows(db[0], "SELECT call_id FROM calls")},
                     {c for (c,) in _rows(db[0], "SELECT call_id FROM intents")})
        return x + 1

    def chain(n):
        return "c0: $state.v0 = step(x=0)\n" + "".join(
            f"c{i}: $state.v{i} = step(x=$state.v{i - 1})\n" for i in range(1, n))

    added = {}
    for n in (4, 8):
        path = str(tmp_path / f"chain{n}.db")
        db[:] = [path]
        seen.clear()
        store = sophon_dsl.open_store(f"sqlite:///{path}")
        try:
            r = sophon_dsl.run(chain(n), tools=[step], store=store)
            added[n] = store.transactions
        finally:
            store.close()
        assert r.ok and r.state["state"][f"v{n - 1}"] == n
        for i in range(n):
            committed, intents = seen[f"c{i}"]
            assert committed == {f"c{k}" for k in range(i)}  # the barrier: its parent's completion
            assert intents == {f"c{k}" for k in range(i + 1)}  # its own intent, not the next one's
    assert added[8] - added[4] == 4


def test_a_crash_at_the_edge_commit_leaves_both_or_neither(tmp_path):
    """The store stops at the transaction carrying a's completion and b's intent (the third:
    the run row, a's intent, then that one), or just after it: a resume finds a in doubt and
    b never started, or a committed and b in doubt; with unknown="rerun" both end as an
    uninterrupted run, and a committed call never runs again."""
    plan = "a: $state.a = act(n=1)\nb: $state.b = act(n=2, x=$state.a)\n"
    reference = plans.comparable(sophon_dsl.run(plan, tools=plans.TOOLS))
    for limit, committed, intents in ((2, set(), {"a"}), (3, {"a"}, {"a", "b"})):
        path = str(tmp_path / f"edge{limit}.db")
        plans.reset_ledger()
        store = FaultyStore(path, limit)
        try:
            first = sophon_dsl.run(plan, tools=plans.TOOLS, store=store, run_id="r")
        finally:
            store.close()
        assert first.error is not None and first.error.error == "Store.CommitFailed"
        assert {c for (c,) in _rows(path, "SELECT call_id FROM calls")} == committed
        assert {c for (c,) in _rows(path, "SELECT call_id FROM intents")} == intents
        ran_before = [e["call"] for e in plans.ledger_lines()]
        assert "b" not in ran_before or "b" in intents  # b never ran without its intent
        again = _resume(path, "r", unknown="rerun")
        assert plans.comparable(again) == reference
        ran_after = [e["call"] for e in plans.ledger_lines()][len(ran_before):]
        assert not committed & set(ran_after)


def _resume(path, run_id, **kw):
    forget_lease(path, run_id)
    return sophon_dsl.resume(run_id, store=f"sqlite:///{path}", tools=plans.TOOLS, **kw)


def test_every_crash_point_resumes_to_the_same_result(tmp_path):
    """Fault injection: a store that stops committing after k transactions, for every k."""
    plan = plans.seeded_plan(7, 12)
    reference = plans.comparable(sophon_dsl.run(plan, tools=plans.TOOLS, input={"zero": 0}))
    k = 1  # (0: the run cannot even be registered: run() raises StoreError)
    while True:
        path = str(tmp_path / f"k{k}.db")
        plans.reset_ledger()
        store = FaultyStore(path, k)
        try:
            first = sophon_dsl.run(plan, tools=plans.TOOLS, input={"zero": 0}, store=store, run_id=f"run{k}")
        finally:
            store.close()
        if first.ok and first.error is None and k > 40:
            break
        if first.status == "succeeded":  # the limit was past the run's last transaction
            assert plans.comparable(first) == reference
            break
        assert first.error is not None and first.error.error == "Store.CommitFailed"
        with sqlite3.connect(path) as conn:
            committed = {c for (c,) in conn.execute("SELECT call_id FROM calls")}
        before = [e["call"] for e in plans.ledger_lines()]
        resumed = _resume(path, f"run{k}", unknown="rerun")
        assert plans.comparable(resumed) == reference, k
        after = [e["call"] for e in plans.ledger_lines()][len(before):]
        assert not committed & set(after), (k, committed & set(after))  # committed calls never ran again
        k += 1
    assert k > 3


def test_in_doubt_calls_follow_the_unknown_policy(tmp_path):
    path, url = _db(tmp_path)
    plan = "a: $state.a || $state.err = act(n=1)\nb: $state.b = look(n=2, x=$state.a || $input.zero)\n"
    # one transaction is the run row, the next the intent of `a`: then the store stops
    store = FaultyStore(path, 2)
    try:
        first = sophon_dsl.run(plan, tools=plans.TOOLS, input={"zero": 0}, store=store, run_id="r")
    finally:
        store.close()
    assert first.error.error == "Store.CommitFailed"
    assert _rows(path, "SELECT call_id, idem_key FROM intents") == [("a", "r:a")]
    assert _rows(path, "SELECT call_id FROM calls") == []

    failed = _resume(path, "r", unknown="fail")  # the branching output catches Call.OutcomeUnknown
    assert failed.ok and failed.call("a").error.error == "Call.OutcomeUnknown"
    assert failed.state["state"]["err"]["error"] == "Call.OutcomeUnknown"
    types = [e.type for e in failed.events]
    assert types[0] == "plan_resumed" and types.count("plan_step_unknown") == 1
    assert failed.events[0].data == {"run_id": "r", "restored": 0, "restored_items": 0, "in_doubt": 1, "rerun": 0}


def test_in_doubt_rerun_and_ask(tmp_path):
    for choice, approve, expect in (("rerun", None, "succeeded"), ("ask", True, "succeeded"),
                                    ("ask", False, "failed")):
        path = str(tmp_path / f"{choice}{approve}.db")
        plans.reset_ledger()
        store = FaultyStore(path, 2)
        try:
            sophon_dsl.run("a: $state.a = act(n=1)\n", tools=plans.TOOLS, store=store, run_id="r")
        finally:
            store.close()
        asked = []

        async def approver(req):
            asked.append(req.kind)
            return approve

        r = _resume(path, "r", unknown=choice, approve=approver if choice == "ask" else None)
        assert r.call("a").status == expect
        assert asked == (["unknown"] if choice == "ask" else [])
        keys = [e["key"] for e in plans.ledger_lines()]
        assert keys == ["r:a"] * (2 if expect == "succeeded" else 1)  # one key, even when run twice


def test_approval_decisions_are_stored_and_reused(tmp_path):
    path, url = _db(tmp_path)
    asked = []

    @tool(risk="high")
    def pay(amount: int) -> str:
        return f"paid {amount}"

    async def approver(req):
        asked.append(req.kind)
        return True

    r = sophon_dsl.run("$state.p = pay(amount=3)\n", tools=[pay], approve=approver, store=url)
    assert r.ok and asked == ["plan"]
    forget_lease(path, r.run_id)
    again = sophon_dsl.resume(r.run_id, store=url, tools=[pay], approve=approver)
    assert again.ok and asked == ["plan"]  # not asked twice
    assert _rows(path, "SELECT name FROM decisions") == [("plan",)]


def test_a_run_waits_for_a_person_and_continues_in_another_call(tmp_path):
    path, url = _db(tmp_path)

    @tool(risk="high")
    def pay(amount: int) -> str:
        return f"paid {amount}"

    waiting = sophon_dsl.run("$state.p = pay(amount=3)\n", tools=[pay], approve="wait", store=url)
    assert waiting.status == "waiting"
    store = sophon_dsl.open_store(url)
    try:
        row = store.get_run(waiting.run_id)
        assert row["status"] == "waiting" and row["summary"]["waiting"]["decision"] == "plan"
        store.put_decision(waiting.run_id, "plan", {"action": "approve"}).result()
    finally:
        store.close()
    done = sophon_dsl.resume(waiting.run_id, store=url, tools=[pay], approve="wait")
    assert done.ok and done.state["state"]["p"] == "paid 3"


def test_lease_and_plan_hash(tmp_path):
    path, url = _db(tmp_path)
    r = sophon_dsl.run("$state.a = look(n=1)\n", tools=plans.TOOLS, store=url)
    store = sophon_dsl.open_store(url)
    try:
        assert store.acquire_lease(r.run_id, "someone-else:1:x", 60)
    finally:
        store.close()
    with pytest.raises(StoreRunError) as held:
        sophon_dsl.resume(r.run_id, store=url, tools=plans.TOOLS)
    assert held.value.error == "Store.LeaseHeld"
    forget_lease(path, r.run_id)

    @tool(name="look", idempotent=True)
    def changed(n: int, x: int = 0) -> int:
        return -1

    with pytest.raises(StoreRunError) as moved:
        sophon_dsl.resume(r.run_id, store=url, tools=[changed])
    assert moved.value.error == "Store.PlanChanged"
    forced = sophon_dsl.resume(r.run_id, store=url, tools=[changed], force=True)
    assert forced.ok and forced.state["state"]["a"] == 3  # committed: not run again
    with pytest.raises(StoreRunError) as missing:
        sophon_dsl.resume("nope", store=url)
    assert missing.value.error == "Store.RunNotFound"


def test_many_concurrent_runs_share_one_store(store_url):
    n = int(os.environ.get("SOPHON_CONCURRENT_RUNS", "100"))  # the proof: 1000

    async def main():
        store = sophon_dsl.open_store(store_url)
        try:
            plan = plans.seeded_plan(3, 10)
            results = await asyncio.gather(*(sophon_dsl.arun(plan, tools=plans.TOOLS, input={"zero": 0},
                                                             store=store) for _ in range(n)))
            return results, store.list_runs()
        finally:
            store.close()

    results, rows = asyncio.run(main())
    solo = plans.comparable(sophon_dsl.run(plans.seeded_plan(3, 10), tools=plans.TOOLS, input={"zero": 0}))
    assert all(plans.comparable(r) == solo for r in results)
    assert len({r.run_id for r in results}) == n and {row["status"] for row in rows} == {"succeeded"}


def test_a_call_gate_waits_too(tmp_path):
    path, url = _db(tmp_path)

    @tool(risk="high")
    def pay(amount: int) -> str:
        plans._note("pay")
        return f"paid {amount}"

    tools = [*plans.TOOLS, pay]
    plan = "a: $state.a = look(n=1)\np: $state.p = pay(amount=$state.a)\n"
    first = sophon_dsl.run(plan, tools=tools, approve="wait", approve_calls=True, store=url)
    assert first.status == "waiting"
    store = sophon_dsl.open_store(url)
    try:
        assert store.get_run(first.run_id)["summary"]["waiting"]["decision"] == "plan"
        store.put_decision(first.run_id, "plan", {"action": "approve"}).result()
    finally:
        store.close()
    second = sophon_dsl.resume(first.run_id, store=url, tools=tools, approve="wait", approve_calls=True)
    assert second.status == "waiting" and second.call("a").status == "succeeded"
    assert second.call("p").status == "cancelled"  # not committed: it asks again when the run continues
    store = sophon_dsl.open_store(url)
    try:
        assert store.get_run(first.run_id)["summary"]["waiting"]["decision"] == "call:p"
        store.put_decision(first.run_id, "call:p", {"action": "approve"}).result()
    finally:
        store.close()
    done = sophon_dsl.resume(first.run_id, store=url, tools=tools, approve="wait", approve_calls=True)
    assert done.ok and done.state["state"]["p"] == "paid 3"
    assert [e["call"] for e in plans.ledger_lines()] == ["a", "p"]  # a is not run again


def test_a_wide_run_starts_each_call_once_its_intent_is_committed(tmp_path):
    """More ready calls than the scheduler lets wait for their intents at once (its queue
    parks and drains again as intents land): every tool starts only after its own intent is
    committed, each call runs once, and the run ends as without a store."""
    path, url = _db(tmp_path)
    missing, ran = [], []

    @tool
    async def act(n: int) -> int:
        cid = sophon_dsl.current_call().call_id
        ran.append(cid)
        if not _rows(path, "SELECT 1 FROM intents WHERE call_id = ?", cid):
            missing.append(cid)
        return n

    n = 1_200
    plan = "".join(f"c{i}: $state.v{i} = act(n={i})\n" for i in range(n))
    r = sophon_dsl.run(plan, tools=[act], store=url)
    assert r.ok and not missing
    assert r.state["state"] == {f"v{i}": i for i in range(n)}
    assert sorted(ran) == sorted(f"c{i}" for i in range(n))
    assert len(_rows(path, "SELECT call_id FROM intents")) == n
    assert len(_rows(path, "SELECT call_id FROM calls")) == n


def test_calls_waiting_for_intents_do_not_start_after_their_map_times_out(tmp_path):
    """A map times out while most of its items wait for their intents (or in the queue
    behind them): the items it cancelled never run their tool, even when their intents
    land afterwards, and every item that ran had its intent committed first."""
    path, url = _db(tmp_path)
    ran = []

    @tool
    async def act(n: int) -> int:
        ran.append(sophon_dsl.current_call().call_id)
        await asyncio.sleep(0.2)
        return n

    plan = ("@timeout(0.03) $state.out || $state.err = map(over=$input.items, as=it) {\n"
            "    $local.a = act(n=$it)\n}\n")
    r = sophon_dsl.run(plan, tools=[act], input={"items": list(range(3_000))}, store=url)
    assert r.ok and r.state["state"]["err"]["error"] == "Map.Timeout"
    cancelled = {rec.id for rec in r.calls if rec.status == "cancelled"}
    never_started = {rec.id for rec in r.calls if rec.status == "cancelled" and rec.attempts == 0}
    assert len(never_started) > 1_000  # most items were still waiting when the map timed out
    assert not never_started & set(ran)
    assert len(ran) == len(set(ran)) == sum(1 for rec in r.calls if rec.attempts > 0 and "[" in rec.id)
    intents = {c for (c,) in _rows(path, "SELECT call_id FROM intents")}
    assert set(ran) <= intents and cancelled


def test_calls_a_cancelled_run_never_started_are_not_in_doubt_on_resume(tmp_path):
    """Cancelled while most calls wait for their intents or in the start queue: the intents of
    calls whose tool never started are dropped when the run ends, so a resume (unknown="fail")
    runs them; only the calls whose tool did start are in doubt (Call.OutcomeUnknown)."""
    path, url = _db(tmp_path)
    ran: list[str] = []
    delay = [30.0]  # the first run's tools hang until cancelled; the resumed run's do not

    @tool
    async def act(n: int) -> int:
        ran.append(sophon_dsl.current_call().call_id)
        await asyncio.sleep(delay[0])
        return n

    plan = "".join(f"c{i}: $state.v{i} = act(n={i})\n" for i in range(2_000))

    async def cancelled_once_a_tool_runs():
        handle = sophon_dsl.start(plan, [act], store=url, run_id="c")
        while not ran:
            await asyncio.sleep(0.001)
        handle.cancel()
        return await handle.result()

    first = asyncio.run(cancelled_once_a_tool_runs())
    started = set(ran)
    assert first.status == "cancelled" and 0 < len(started) < 2_000
    assert {c for (c,) in _rows(path, "SELECT call_id FROM intents")} == started
    ran.clear()
    delay[0] = 0.0
    again = sophon_dsl.resume("c", store=url, tools=[act], unknown="fail")
    unknown = {rec.id for rec in again.calls if rec.error is not None and rec.error.error == "Call.OutcomeUnknown"}
    assert unknown == started
    assert set(ran) == {f"c{i}" for i in range(2_000)} - started
    assert all(rec.status == "succeeded" for rec in again.calls if rec.id not in started)


def test_under_max_concurrency_a_call_commits_its_intent_when_it_gets_its_slot(tmp_path):
    """With max_concurrency, a call's intent is committed when it gets a slot, right before
    its tool starts (each tool finds its own intent), not while it waits for one: a store
    that stops committing leaves in doubt at most as many calls as there are slots, and a
    resume ends as an uninterrupted run."""
    missing: list[str] = []
    seen_path: list[str] = []

    @tool
    async def act(n: int) -> int:
        cid = sophon_dsl.current_call().call_id
        if seen_path and not _rows(seen_path[0], "SELECT 1 FROM intents WHERE call_id = ?", cid):
            missing.append(cid)
        await asyncio.sleep(0.002)
        return n

    plan = "".join(f"c{i}: $state.v{i} = act(n={i})\n" for i in range(120))
    path, url = _db(tmp_path)
    seen_path.append(path)
    whole = sophon_dsl.run(plan, tools=[act], store=url, max_concurrency=2)
    assert whole.ok and not missing
    seen_path.clear()

    faulty_path = str(tmp_path / "faulty.db")
    store = FaultyStore(faulty_path, 12)
    try:
        first = sophon_dsl.run(plan, tools=[act], store=store, run_id="r", max_concurrency=2)
    finally:
        store.close()
    assert first.error is not None and first.error.error == "Store.CommitFailed"
    intents = {c for (c,) in _rows(faulty_path, "SELECT call_id FROM intents")}
    committed = {c for (c,) in _rows(faulty_path, "SELECT call_id FROM calls")}
    assert 0 < len(intents - committed) <= 2
    forget_lease(faulty_path, "r")
    again = sophon_dsl.resume("r", store=f"sqlite:///{faulty_path}", tools=[act], unknown="rerun",
                              max_concurrency=2)
    assert again.ok and again.state == whole.state


def test_the_prompt_for_a_call_in_doubt_says_what_approving_does(tmp_path):
    """unknown="ask" through the terminal approver: the prompt names the call, says its outcome
    is unknown and what approve and reject do, and shows the arguments it ran with."""
    from sophon_dsl.runtime.approval import PromptApprover

    path = str(tmp_path / "r.db")
    store = FaultyStore(path, 2)
    try:
        sophon_dsl.run("a: $state.a = act(n=1)\n", tools=plans.TOOLS, store=store, run_id="r")
    finally:
        store.close()
    shown: list[str] = []
    prompt = PromptApprover(input_func=lambda _p: "y", print_func=shown.append)
    r = _resume(path, "r", unknown="ask", approve=prompt.ask)
    assert r.call("a").status == "succeeded"
    assert shown[0] == "Call a started before the run was interrupted; its outcome is unknown."
    assert "Reject: it fails with Call.OutcomeUnknown" in shown[1]
    assert any(line.strip() == "n=1" for line in shown)


def test_a_refused_calls_fallback_reader_starts_after_the_refusal_is_committed(tmp_path):
    """A call refused at the per-call gate ends failed without running; a reader with a
    ``||`` alternative starts only once that failure is committed, as after any call's end
    (a crash in between would otherwise leave a reader that ran on an end nobody recorded).
    (A guard: the old path settled at once, but its reader's thread came after the commit
    here too.)"""
    path = str(tmp_path / "runs.db")
    seen: list = []

    @tool(name="pay", risk="high")
    def pay(amount: int) -> dict:
        return {"paid": amount}

    @tool(name="note", risk="none", idempotent=True)
    def note(error: object = None) -> str:
        seen.append({c for (c,) in _rows(path, "SELECT call_id FROM calls")})
        return "noted"

    async def plan_yes_call_no(req):
        return req.kind == "plan"

    plan = ("c1: $state.receipt || $state.error = pay(amount=5)\n"
            "c2: $state.n = note(error=$state.receipt || $input.none)\n")
    r = sophon_dsl.run(plan, tools=[pay, note], store=f"sqlite:///{path}", approve=plan_yes_call_no,
                       approve_calls=True, input={"none": "no receipt"})
    assert [(c.id, c.status) for c in r.calls] == [("c1", "failed"), ("c2", "succeeded")]
    assert r.calls[0].error.error == "Approval.Rejected"
    assert seen == [{"c1"}]
