"""Durable runs with maps (issue 12): a run interrupted at any commit and resumed never runs
an item call its store committed (``c1[2].act``), replays its writes, runs the rest, and
ends as an uninterrupted run; item calls found in doubt follow ``unknown``."""

from __future__ import annotations

import sqlite3

import sophon_dsl

from . import plans
from .faults import FaultyStore, forget_lease

# Items fail (flaky, uncaught) for some values: the map tolerates one; concurrency 1 keeps
# which items started deterministic after the map fails.
PLAN = """$state.base = look(n=1)
$state.out || $state.bad = map($input.items, as=it, concurrency=2, tolerate=1) {
    $local.a = act(n=$it, x=$state.base)
    $local.b || $local.e = flaky(n=$local.a, x=$index)
    return {a: $local.a, b: $local.b || $local.e}
}
$state.strict || $state.failed = map(over=[1, 2, 3, 4], as=v, concurrency=1) {
    $local.f = flaky(n=$v, x=1)
}
$state.after = pause(n=3, x=$state.base)
$state.nested = map(over=[[1, 2], [3]], as=row) {
    $local.sums = map($row, as=x) {
        $local.p = act(n=$x)
    }
}
"""
INPUT = {"zero": 0, "items": [1, 2, 3, 4, 5]}


def _committed(path: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {c for (c,) in conn.execute("SELECT call_id FROM calls")}


def _resume(path: str, run_id: str, **kw):
    forget_lease(path, run_id)
    return sophon_dsl.resume(run_id, store=f"sqlite:///{path}", tools=plans.TOOLS, **kw)


def _interrupted(path: str, k: int, plan: str = PLAN, data: dict = INPUT):
    store = FaultyStore(path, k)
    try:
        return sophon_dsl.run(plan, tools=plans.TOOLS, input=data, store=store, run_id=f"run{k}")
    finally:
        store.close()


def test_the_reference_run_has_maps_that_fail_and_tolerate():
    r = sophon_dsl.run(PLAN, tools=plans.TOOLS, input=INPUT)
    assert r.ok, r.error
    state = r.state["state"]
    assert len(state["out"]) == 5 and state["failed"]["error"] == "Map.Failed"
    assert state["nested"] == [{"sums": [{"p": 7}, {"p": 14}]}, {"sums": [{"p": 21}]}]
    assert {"c2[0].act", "c2[4].flaky", "c5[1].map[0].act"} <= {c.id for c in r.calls}


def test_every_crash_point_resumes_a_plan_with_maps_to_the_same_result(tmp_path):
    """Fault injection: a store that stops committing after k transactions, for every k."""
    reference = plans.comparable(sophon_dsl.run(PLAN, tools=plans.TOOLS, input=INPUT))
    k = 1
    resumed_with_items = 0
    while True:
        path = str(tmp_path / f"k{k}.db")
        plans.reset_ledger()
        first = _interrupted(path, k)
        if first.status == "succeeded" and first.error is None:  # the limit was past the last commit
            assert plans.comparable(first) == reference
            break
        assert first.error is not None and first.error.error == "Store.CommitFailed", k
        committed = _committed(path)
        resumed_with_items += any("[" in c for c in committed)
        before = len(plans.ledger_lines())
        resumed = _resume(path, f"run{k}", unknown="rerun")
        assert plans.comparable(resumed) == reference, k
        again = {e["call"] for e in plans.ledger_lines()[before:]}
        assert not committed & again, (k, committed & again)  # committed calls never ran again
        assert not any("@" in kind for kind in resumed.state), k  # item kinds stay hidden
        k += 1
    assert k > 5 and resumed_with_items > 3


def test_a_seeded_plan_with_maps_resumes_at_every_crash_point(tmp_path):
    plan = plans.seeded_plan(11, 14, maps=True)
    assert "map(" in plan
    reference = plans.comparable(sophon_dsl.run(plan, tools=plans.TOOLS, input={"zero": 0}))
    for k in range(1, 200):
        path = str(tmp_path / f"s{k}.db")
        plans.reset_ledger()
        first = _interrupted(path, k, plan, {"zero": 0})
        if first.status == "succeeded" and first.error is None:
            assert plans.comparable(first) == reference
            break
        committed = _committed(path)
        before = len(plans.ledger_lines())
        assert plans.comparable(_resume(path, f"run{k}", unknown="rerun")) == reference, k
        assert not committed & {e["call"] for e in plans.ledger_lines()[before:]}, k
    else:
        raise AssertionError("the run never completed")


def _in_doubt_item(tmp_path, plan: str) -> tuple[str, str, str]:
    """The first crash point that leaves an item call in doubt: (db path, run id, call id)."""
    for k in range(1, 60):
        path = str(tmp_path / f"d{k}.db")
        plans.reset_ledger()
        _interrupted(path, k, plan, {"zero": 0})
        with sqlite3.connect(path) as conn:
            intents = {c for (c,) in conn.execute("SELECT call_id FROM intents")}
        doubt = sorted(c for c in intents - _committed(path) if "[" in c)
        if doubt:
            return path, f"run{k}", doubt[0]
    raise AssertionError("no crash point leaves an item call in doubt")


def test_in_doubt_item_calls_follow_the_unknown_policy(tmp_path):
    plan = """$state.out = map(over=[1, 2, 3], as=it, concurrency=1) {
    $local.a || $local.err = act(n=$it)
}
"""
    path, run_id, cid = _in_doubt_item(tmp_path, plan)
    assert cid.startswith("c1[") and cid.endswith("].act")

    failed = _resume(path, run_id, unknown="fail")
    assert failed.ok, failed.error
    assert failed.call(cid).error.error == "Call.OutcomeUnknown"
    k = int(cid[3:cid.index("]")])
    assert failed.state["state"]["out"][k] == {"err": {"error": "Call.OutcomeUnknown",
                                                       "cause": failed.call(cid).error.cause}}
    types = [e.type for e in failed.events]
    assert types[0] == "plan_resumed" and types.count("plan_step_unknown") == 1
    assert failed.events[0].data["in_doubt"] == 1 and failed.events[0].data["rerun"] == 0


def test_in_doubt_item_calls_rerun_with_their_key(tmp_path):
    plan = """$state.out = map(over=[1, 2, 3], as=it, concurrency=1) {
    $local.a = act(n=$it)
}
"""
    path, run_id, cid = _in_doubt_item(tmp_path, plan)
    plans.reset_ledger()
    rerun = _resume(path, run_id, unknown="rerun")
    assert rerun.ok and rerun.state["state"]["out"] == [{"a": 7}, {"a": 14}, {"a": 21}]
    ran = [e for e in plans.ledger_lines() if e["call"] == cid]
    assert [e["key"] for e in ran] == [f"{run_id}:{cid}"]


def _faulty(url: str, limit: int):
    """A store of ``url``'s backend that stops committing after ``limit`` transactions."""
    if url.startswith("sqlite:///"):
        return FaultyStore(url[len("sqlite:///"):], limit)
    from sophon_dsl.durable.postgres import PostgresRunStore

    class FaultyPostgres(PostgresRunStore):
        def _transaction(self, conn, ops):
            if self.transactions >= limit:
                from sophon_dsl.durable.base import StoreError

                return StoreError("injected: the store stopped committing")
            return super()._transaction(conn, ops)

    return FaultyPostgres(url)


def test_both_backends_resume_item_calls_from_their_commits(store_url):
    """SQLite and PostgreSQL share the journal: crash points along the run, then resume."""
    reference = plans.comparable(sophon_dsl.run(PLAN, tools=plans.TOOLS, input=INPUT))
    with_items = 0
    for k in (3, 6, 9, 12):
        run_id = f"b{k}"
        plans.reset_ledger()
        store = _faulty(store_url, k)
        try:
            first = sophon_dsl.run(PLAN, tools=plans.TOOLS, input=INPUT, store=store, run_id=run_id)
        finally:
            store.close()
        if first.ok and first.error is None:  # past the run's last commit
            assert plans.comparable(first) == reference
            continue
        assert first.error is not None and first.error.error == "Store.CommitFailed", k
        backend = sophon_dsl.open_store(store_url)
        try:
            committed = set(backend.load_calls(run_id))
            backend.release_lease(run_id, backend.get_run(run_id)["lease_owner"]).result()
        finally:
            backend.close()
        with_items += any("[" in c for c in committed)
        before = len(plans.ledger_lines())
        resumed = sophon_dsl.resume(run_id, store=store_url, tools=plans.TOOLS, unknown="rerun")
        assert plans.comparable(resumed) == reference, k
        assert not committed & {e["call"] for e in plans.ledger_lines()[before:]}, k
    assert with_items >= 2


def test_a_map_resumed_mid_way_writes_each_item_entry_once(tmp_path):
    """A map not committed expands again on resume: the item and index entries its first
    expansion wrote are in the replayed log already, and are not written a second time
    (the resumed log is the uninterrupted one's, order between independent calls aside)."""
    plan = """$state.out = map(over=[1, 2, 3, 4], as=it, concurrency=1) {
    $local.a = act(n=$it, x=$index)
}
"""
    reference = sophon_dsl.run(plan, tools=plans.TOOLS, input={"zero": 0})
    item_entries = [e for e in reference.log if "@" in e["kind"] and e["call"] == "c1"]
    assert len(item_entries) == 8  # it@c1[k] and index@c1[k], k = 0..3
    mid_map = 0
    for k in range(1, 6):
        path = str(tmp_path / f"m{k}.db")
        first = _interrupted(path, k, plan, {"zero": 0})
        if first.ok and first.error is None:
            break
        committed = _committed(path)
        mid_map += "c1" not in committed and any(c.startswith("c1[") for c in committed)
        resumed = _resume(path, f"run{k}", unknown="rerun")
        kinds = [e["kind"] for e in resumed.log if e["call"] == "c1"]
        assert sorted(kinds) == sorted([e["kind"] for e in item_entries] + ["state"]), (k, kinds)
        assert plans.comparable(resumed) == plans.comparable(reference), k
        with sophon_dsl.open_store(f"sqlite:///{path}") as store:  # what `runs show --log` prints
            assert len(store.load_log(f"run{k}")) == len(reference.log), k
    assert mid_map >= 2


def test_a_run_cancelled_mid_map_resumes_to_the_uninterrupted_result(tmp_path):
    """Stopped (cancelled) rather than killed: the cancelled item calls are not committed and
    run on resume, the committed ones do not; status, state, output, calls and log as an
    uninterrupted run's."""
    import asyncio

    plan = """$state.out = map(over=[1, 2, 3, 4, 5, 6], as=it, concurrency=2) {
    $local.a = pause(n=$it)
    $local.b = act(n=$local.a, x=$index)
}
$state.after = look(n=1, x=$state.out[0].b)
"""
    reference = plans.comparable(sophon_dsl.run(plan, tools=plans.TOOLS, input={"zero": 0}))
    mid_map = 0
    for trial in range(40):  # cancelled later and later, until it lands mid-map (the machine may be slow)
        if mid_map >= 2:
            break
        url = f"sqlite:///{tmp_path / f'c{trial}.db'}"

        async def cancelled_after(delay: float):
            handle = sophon_dsl.start(plan, plans.TOOLS, input={"zero": 0}, store=url, run_id="c")
            await asyncio.sleep(delay)
            handle.cancel()
            return await handle.result()

        plans.reset_ledger()
        first = asyncio.run(cancelled_after(0.002 * (trial + 1)))
        with sophon_dsl.open_store(url) as store:
            committed = set(store.load_calls("c"))
        mid_map += first.status == "cancelled" and "c1" not in committed and any("c1[" in c for c in committed)
        before = len(plans.ledger_lines())
        resumed = sophon_dsl.resume("c", store=url, tools=plans.TOOLS, unknown="rerun")
        assert plans.comparable(resumed) == reference, trial
        assert not committed & {e["call"] for e in plans.ledger_lines()[before:]}, trial
    assert mid_map >= 2


def test_a_map_s_dependent_starts_once_the_map_s_completion_is_committed(tmp_path):
    """The barrier holds for a map call as for any call: its reader, idempotent or not, finds
    the map's record and its result committed when its tool starts (and a reader that is
    not idempotent, its own intent)."""
    path = str(tmp_path / "runs.db")
    seen: dict = {}

    @sophon_dsl.tool(name="item")
    def item(n: int) -> int:
        return n * 2

    def reader(name):
        def read(xs: list) -> int:
            with sqlite3.connect(path) as conn:
                seen[name] = ({c for (c,) in conn.execute("SELECT call_id FROM calls")},
                              {c for (c,) in conn.execute("SELECT call_id FROM intents")})
            return sum(xs)
        return read

    pure = sophon_dsl.tool(name="pure", idempotent=True)(reader("pure"))
    act = sophon_dsl.tool(name="act2")(reader("act2"))
    plan = ("m: $state.xs = map(over=[1, 2], as=v) {\n    $local.y = item(n=$v)\n    return $local.y\n}\n"
            "p: $state.p = pure(xs=$state.xs)\nq: $state.q = act2(xs=$state.xs)\n")
    r = sophon_dsl.run(plan, tools=[item, pure, act], store=f"sqlite:///{path}")
    assert r.ok, r.error
    assert r.state["state"]["p"] == r.state["state"]["q"] == 6
    assert "m" in seen["pure"][0] and "m" in seen["act2"][0]
    assert "q" in seen["act2"][1] and "p" not in seen["pure"][1]
