"""A batch of many rows of each kind (what a durable run's pass of its loop commits) on every
store: the rows come back exactly, whatever their text; intents that share one creation time
(a journal's batch) and intents that do not are both kept with theirs; rows that meet stored
ones upsert (a call's record: the last one; an intent: the first one)."""

from __future__ import annotations

import asyncio
import json
import sqlite3

from sophon_dsl.durable.base import dumps

# odd text: quotes, escapes, control characters (no NUL: PostgreSQL text cannot hold one),
# line and paragraph separators, astral characters, a JSON-looking string, a large one
ODD = ['a"b', "back\\slash", "\x01\x07\x08\x0b\x0c\x1b\x1f\x7f", "new\nline\r\ttab", "\u2028\u2029\x85",
       "é†😀\ufeff", '{"not": "json"}', "[1,2]", "null", "", "x" * 300_000]


def _commit_rows(store, log, calls, intents, last=()):
    async def go():
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        store.commit_rows(log, calls, intents, last, (loop, done.set_result))
        return await done
    return asyncio.run(go()).exception()


def _created(store_url: str, run_id: str) -> dict[str, float]:
    """The stored creation time of each intent of the run, read beside the store."""
    stmt = "SELECT call_id, created FROM intents WHERE run_id = {}"
    if store_url.startswith("sqlite:///"):
        with sqlite3.connect(store_url[len("sqlite:///"):]) as conn:
            return dict(conn.execute(stmt.format("?"), (run_id,)).fetchall())
    import psycopg

    with psycopg.connect(store_url) as conn:
        return dict(conn.execute(stmt.format("%s"), (run_id,)).fetchall())


def _new(store, run_id):
    store.create_run(run_id, plan_id="p", goal=None, spec={"plan": "[]"}, plan_hash="h").result()


def test_many_rows_of_each_kind_round_trip_exactly(store, store_url):
    run_id = "r-é†"
    _new(store, run_id)
    n = 400
    values = [ODD[k % len(ODD)] + str(k) for k in range(n)]
    log = [(run_id, k, dumps(["state", [f"n{k}", k], values[k], "set", f"c{k}", 1795867031.9600456 + k]))
           for k in range(n)]
    calls = [(run_id, f"c{k}", dumps({"id": f"c{k}", "output": values[k], "nested": {"l": [values[k], None]}}))
             for k in range(n)]
    intents = [(run_id, f"i{k}", f"{run_id}:i{k}", 1795867031.125) for k in range(n)]  # one time: sent once
    assert _commit_rows(store, log, calls, intents, (run_id, n - 1)) is None
    got = store.load_log(run_id)
    assert [e["value"] for e in got] == values and [e["path"] for e in got] == [[f"n{k}", k] for k in range(n)]
    assert [e["date"] for e in got] == [1795867031.9600456 + k for k in range(n)]
    assert store.load_calls(run_id) == {f"c{k}": json.loads(calls[k][2]) for k in range(n)}
    assert store.load_intents(run_id) == {f"i{k}": f"{run_id}:i{k}" for k in range(n)}
    assert _created(store_url, run_id) == {f"i{k}": 1795867031.125 for k in range(n)}


def test_intents_of_different_times_keep_each_its_own(store, store_url):
    _new(store, "r1")
    times = [1795867031.0 + k / 7 for k in range(50)]
    assert _commit_rows(store, [], [], [("r1", f"i{k}", f"r1:i{k}", t) for k, t in enumerate(times)]) is None
    assert _created(store_url, "r1") == {f"i{k}": t for k, t in enumerate(times)}


def test_rows_that_meet_stored_ones_upsert(store, store_url):
    _new(store, "r1")
    first = [("r1", f"c{k}", dumps({"id": f"c{k}", "v": 1})) for k in range(30)]
    assert _commit_rows(store, [], first, [("r1", f"i{k}", f"r1:i{k}", 100.5) for k in range(30)]) is None
    # again, with new ones among them: a call's record is replaced, an intent is kept as it was
    again = [("r1", f"c{k}", dumps({"id": f"c{k}", "v": 2, "s": ODD[k % len(ODD)]})) for k in range(20, 40)]
    intents = [("r1", f"i{k}", f"r1:i{k}", 200.25) for k in range(20, 40)]
    assert _commit_rows(store, [], again + [again[0]], intents + intents[:3]) is None
    calls = store.load_calls("r1")
    assert calls == {**{f"c{k}": {"id": f"c{k}", "v": 1} for k in range(20)},
                     **{f"c{k}": json.loads(again[k - 20][2]) for k in range(20, 40)}}
    assert _created(store_url, "r1") == {f"i{k}": 100.5 if k < 30 else 200.25 for k in range(40)}
