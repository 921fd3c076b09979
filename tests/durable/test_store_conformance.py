"""One conformance suite for every run store (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from sophon_dsl.durable import open_store
from sophon_dsl.durable.base import MIGRATIONS, StoreError


def _entry(n: int, call: str | None = "c1") -> dict:
    return {"kind": "state", "path": ["x", n], "value": {"n": n, "text": "é†"}, "method": "set", "call": call,
            "date": 1.5}


def _new(store, run_id="r1", **kw):
    store.create_run(run_id, plan_id="p", goal="g", spec={"plan": "f()", "input": {"a": 1}}, plan_hash="h1",
                     entries=[(0, _entry(0, None))], **kw).result()


def test_schema_is_migrated_once(store, store_url):
    assert store.schema_version() == MIGRATIONS[-1][0]
    again = open_store(store_url)  # a second opener finds the schema and applies nothing
    try:
        assert again.schema_version() == MIGRATIONS[-1][0]
    finally:
        again.close()


def test_run_row_round_trip(store):
    _new(store)
    row = store.get_run("r1")
    assert row["status"] == "running" and row["plan_hash"] == "h1" and row["last_seq"] == 0
    assert row["spec"] == {"plan": "f()", "input": {"a": 1}}
    assert store.get_run("nope") is None
    # the row without its spec (what the dashboard polls)
    head = store.get_run_head("r1")
    assert head == {k: v for k, v in row.items() if k != "spec"} and store.get_run_head("nope") is None


def test_commit_call_holds_entries_record_and_last_seq(store):
    _new(store)
    store.commit_call("r1", [(1, _entry(1)), (2, _entry(2))], {"id": "c1", "status": "succeeded"}).result()
    assert store.get_run("r1")["last_seq"] == 2
    log = store.load_log("r1")
    assert [e["seq"] for e in log] == [0, 1, 2]
    assert log[1]["value"] == {"n": 1, "text": "é†"} and log[1]["path"] == ["x", 1]
    assert store.load_calls("r1") == {"c1": {"id": "c1", "status": "succeeded"}}


def test_a_failing_operation_fails_alone_in_its_batch(store):
    _new(store)
    futs = [store.commit_call("r1", [(n, _entry(n))], {"id": f"c{n}"}) for n in range(1, 40)]
    dup = store.commit_call("r1", [(5, _entry(5))], {"id": "dup"})  # seq 5 again: refused
    for f in futs:
        f.result()
    with pytest.raises(StoreError):
        dup.result()
    assert len(store.load_log("r1")) == 40 and "dup" not in store.load_calls("r1")


_AWKWARD = ['a"b', "back\\slash", "x,y", "{braces}", "new\nline\ttab", "NULL", " spaced ", "é†😀", "'quote'"]


def _commit_rows(store, log, calls, intents, last):
    """``commit_rows`` (a run's batch of one pass of its loop) and wait for its landing."""
    async def go():
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        store.commit_rows(log, calls, intents, last, (loop, done.set_result))
        return await done
    return asyncio.run(go()).exception()


def test_a_batch_of_rows_keeps_any_text_and_the_last_record_of_a_call(store):
    """Rows travel as text (PostgreSQL: one array literal per column): quotes, backslashes,
    commas, braces, newlines, "NULL" come back as they went; a call recorded twice in one
    batch keeps its last record, an intent asked twice is kept once."""
    for run_id in _AWKWARD:
        _new(store, run_id)
        log = [(run_id, 1 + n, json.dumps({"kind": "state", "path": [t], "value": t, "method": "set",
                                           "call": t, "date": 1.5}, ensure_ascii=False))
               for n, t in enumerate(_AWKWARD)]
        calls = [(run_id, t, json.dumps({"id": t, "n": 1})) for t in _AWKWARD]
        calls.append((run_id, run_id, json.dumps({"id": run_id, "n": 2})))  # again: the last wins
        intents = [(run_id, t, f"{run_id}:{t}", 1700000000.123456) for t in _AWKWARD + _AWKWARD[:2]]
        assert _commit_rows(store, log, calls, intents, (run_id, len(_AWKWARD))) is None
        assert [e["value"] for e in store.load_log(run_id)[1:]] == _AWKWARD
        assert store.load_calls(run_id) == {t: {"id": t, "n": 2 if t == run_id else 1} for t in _AWKWARD}
        assert store.load_intents(run_id) == {t: f"{run_id}:{t}" for t in _AWKWARD}
        assert store.get_run(run_id)["last_seq"] == len(_AWKWARD)
    # one row of each (PostgreSQL: plain VALUES instead of the arrays)
    run_id, t = _AWKWARD[0], _AWKWARD[1]
    entry = json.dumps({"kind": "state", "path": [t], "value": t, "method": "set", "call": t, "date": 1.5})
    assert _commit_rows(store, [(run_id, 99, entry)], [(run_id, t, json.dumps({"id": t, "n": 3}))],
                        [(run_id, "one", f"{run_id}:one", 1.25)], (run_id, 99)) is None
    assert store.load_log(run_id)[-1]["value"] == t and store.load_calls(run_id)[t] == {"id": t, "n": 3}
    assert store.load_intents(run_id)["one"] == f"{run_id}:one" and store.get_run(run_id)["last_seq"] == 99
    assert _commit_rows(store, [], [], [], ()) is None  # (an empty batch commits nothing)


def test_nothing_is_pickled(store):
    _new(store)
    with pytest.raises(TypeError):  # refused before anything is queued
        store.commit_call("r1", [(1, {"value": object()})], {"id": "c1"})
    with pytest.raises(ValueError):
        store.commit_call("r1", [(1, {"value": float("nan")})], {"id": "c1"})


def test_intents_and_decisions(store):
    _new(store)
    store.put_intent("r1", "c2", "r1:c2").result()
    store.put_intent("r1", "c2", "r1:c2").result()  # twice: kept once
    assert store.load_intents("r1") == {"c2": "r1:c2"}
    store.put_intent("r1", "c3", "r1:c3").result()
    store.drop_intents("r1", ["c3", "c9"]).result()  # (c9 has none: nothing to drop)
    assert store.load_intents("r1") == {"c2": "r1:c2"}
    store.put_decision("r1", "plan", {"action": "approve"}).result()
    store.put_decision("r1", "plan", {"action": "reject", "reason": "no"}).result()
    assert store.load_decisions("r1") == {"plan": {"action": "reject", "reason": "no"}}


def test_status_summary_and_listing(store):
    _new(store, "r1")
    _new(store, "r2")
    store.set_status("r1", "succeeded", {"output": [1, 2]}).result()
    assert store.get_run("r1")["summary"] == {"output": [1, 2]}
    assert [r["run_id"] for r in store.list_runs(status="succeeded")] == ["r1"]
    assert {r["run_id"] for r in store.list_runs()} == {"r1", "r2"}
    store.set_spec("r2", {"plan": "g()"}, "h2").result()
    assert store.get_run("r2")["plan_hash"] == "h2"


def test_lease_excludes_a_second_owner(store):
    _new(store)
    assert store.acquire_lease("r1", "a", 60)
    assert store.acquire_lease("r1", "a", 60)  # its own lease: renewed
    assert not store.acquire_lease("r1", "b", 60)
    store.release_lease("r1", "a").result()
    assert store.acquire_lease("r1", "b", 0.0)
    assert store.acquire_lease("r1", "a", 60)  # b's lease expired
    assert not store.acquire_lease("missing", "a", 60)


def test_group_commit_batches_concurrent_completions(store):
    _new(store)
    before = store.transactions
    futs = []
    threads = [threading.Thread(target=lambda k=k: futs.extend(
        store.commit_call("r1", [(1 + k * 100 + n, _entry(n))], {"id": f"c{k}_{n}"}) for n in range(100)))
        for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for f in futs:
        f.result()
    assert len(store.load_calls("r1")) == 400
    assert store.transactions - before < 400  # batched


def test_two_stores_on_one_database(store_url):
    a, b = open_store(store_url), open_store(store_url)
    try:
        _new(a, "r1")
        assert b.get_run("r1")["status"] == "running"
        assert a.acquire_lease("r1", "pa", 60) and not b.acquire_lease("r1", "pb", 60)
    finally:
        a.close()
        b.close()


def test_bad_urls():
    with pytest.raises(ValueError):
        open_store("mysql://x")
    with pytest.raises(ValueError):
        open_store("sqlite:///")


def test_sqlite_pragmas(tmp_path):
    s = open_store(f"sqlite:///{tmp_path / 'a.db'}?synchronous=FULL")
    try:
        assert s.synchronous == "FULL"
        mode = s._wait(lambda cur: cur.execute("PRAGMA journal_mode").fetchone()[0])
        assert mode == "wal"
    finally:
        s.close()
    assert json.loads('"x"') == "x"


def test_tool_chains_are_kept_in_creation_order_and_replaced_by_name(store, store_url):
    first = {"name": "a.chain", "description": "one", "steps": [{"toolName": "t", "arguments": {"x": "é"}}]}
    second = {"name": "b.chain", "description": "two", "steps": []}
    store.put_chain("a.chain", first).result()
    store.put_chain("b.chain", second).result()
    store.put_chain("a.chain", {**first, "description": "one, again"}).result()
    again = open_store(store_url)   # another process, in effect
    try:
        assert [(c["name"], c["description"]) for c in again.load_chains()] == [("a.chain", "one, again"),
                                                                               ("b.chain", "two")]
    finally:
        again.close()


def test_a_cancelled_waiter_does_not_stop_the_writer(store):
    """asyncio.wrap_future cancels the store's future when the awaiting task is cancelled
    (Ctrl-C, a timeout): the writer thread still commits the operation and serves the next."""
    import asyncio

    _new(store)
    gate = threading.Event()
    store.submit(lambda cur: gate.wait(5))  # holds the writer until the waiter below is cancelled

    async def cancelled_waiter():
        task = asyncio.ensure_future(asyncio.wrap_future(store.set_status("r1", "paused")))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_waiter())
    gate.set()
    store.set_status("r1", "succeeded").result(timeout=10)  # would hang if the writer had died
    assert store.get_run("r1")["status"] == "succeeded"
