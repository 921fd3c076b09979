"""One conformance suite for every :class:`~sophon_dsl.runtime.store.StateStore`.

Each implementation declares its capabilities by name (as LangGraph's
checkpoint-conformance suite does); a test names the capability it needs and runs on every
store that has it:

* ``log`` (required): ``write`` copies, ``get`` reads resolved values (``MISSING`` when
  absent), the output methods combine, ``resolved`` / ``snapshot`` report the log;
* ``records`` (required): ``add_record`` keeps records in call order, ``record_started`` /
  ``record_ended`` accept a record's changes; a plan run through the scheduler on the store
  ends as it does on the default store; a retried call's attempts round-trip (on a durable
  store: in its committed record, and while it runs);
* ``commit_barrier`` (optional, :class:`~sophon_dsl.runtime.store.CommitBarrier`): a call's
  completion is committed before ``on_committed`` examines its dependents, or before the
  dependents ``on_ended`` examined and held start; a call that is not idempotent has its
  intent committed before its tool starts, the committed log is the run's log;
* ``sampled_reads`` (optional, the dry run's store): a read below a value a sample wrote
  finds a placeholder, reported once, instead of nothing.

Implementations: the in-memory store, the durable journal on SQLite and on PostgreSQL
(the session's throwaway cluster, ``pg_cluster``), the dry run's sampled store.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from sophon_dsl import loads
from sophon_dsl.durable import open_store
from sophon_dsl.durable.session import DurableRun
from sophon_dsl.model import OutputMethod
from sophon_dsl.runtime import MemoryStore, Scheduler, StateStore
from sophon_dsl.runtime.dryrun import SampledStore, Samples
from sophon_dsl.runtime.errors import RunError
from sophon_dsl.runtime.result import new_record
from sophon_dsl.runtime.state import MISSING
from sophon_dsl.runtime.store import CommitBarrier, CommitListener
from sophon_dsl.tools import ToolRegistry, tool

REQUIRED = frozenset({"log", "records"})
OPTIONAL = frozenset({"commit_barrier", "sampled_reads"})


@tool
async def echo(value: Any = None) -> Any:
    return value


@tool(idempotent=True)
async def pure(value: Any = None) -> Any:
    return value


flaky_tries: dict[str, int] = {}


@tool
async def flaky(key: str) -> str:
    """Fails twice per key, then returns the key."""
    n = flaky_tries[key] = flaky_tries.get(key, 0) + 1
    if n <= 2:
        raise RunError("Net.Flaky", f"try {n}")
    return key


TOOLS = ToolRegistry([echo, pure, flaky])
# a call retried under its policy: two failed attempts, then one that succeeds
RETRY_PLAN = ('@retry({"max_attempts": 3, "interval": 0.01, "backoff_rate": 1})\n'
              'r: $state.r = flaky(key="r")\n')
PLAN = ("a: $state.a = echo(value={\"n\": 1, \"tags\": [\"x\"]})\n"
        "b: $state.b = pure(value=$state.a.n)\n"
        "c: $state.items += pure(value=[$state.b])\n"
        "d: $state.items += echo(value=[2, 3])\n")


@dataclass
class Subject:
    """One store under test, what it can do, and how a run is wired to it."""

    name: str
    store: StateStore
    capabilities: frozenset
    attach: Callable[[Scheduler], None] = lambda sched: None
    committed: Callable[[], list] | None = None  # the backend's log (a durable store)
    intents: Callable[[], dict] | None = None
    records: Callable[[], dict] | None = None    # the backend's committed call records
    live_attempts: Callable[[], dict] | None = None  # the backend's attempts of calls being retried
    flush: Callable[[], Any] | None = None
    cleanup: list = field(default_factory=list)


def _durable(name: str, url: str, text: str = PLAN) -> Subject:
    backend = open_store(url)
    run_id = uuid.uuid4().hex
    run = DurableRun(backend, run_id)
    plan = loads(text, format="dsl")
    run.register(text, plan, TOOLS, {})
    return Subject(name, run.journal, REQUIRED | {"commit_barrier"},
                   attach=lambda sched: run.attach(sched.durable_host()),
                   committed=lambda: backend.load_log(run_id), intents=lambda: backend.load_intents(run_id),
                   records=lambda: backend.load_calls(run_id), live_attempts=lambda: backend.load_attempts(run_id),
                   flush=run.journal.flush, cleanup=[backend.close])


def _subject(request, tmp_path, text: str):
    kind = request.param
    if kind == "memory":
        s = Subject(kind, MemoryStore(), REQUIRED)
    elif kind == "sqlite":
        s = _durable(kind, f"sqlite:///{tmp_path / 'runs.db'}", text)
    elif kind == "postgres":
        s = _durable(kind, request.getfixturevalue("pg_cluster").new_database(), text)
    else:
        s = Subject(kind, SampledStore(Samples(TOOLS)), REQUIRED | {"sampled_reads"})
    yield s
    for close in s.cleanup:
        close()


@pytest.fixture(params=["memory", "sqlite", "postgres", "sampled"])
def subject(request, tmp_path):
    yield from _subject(request, tmp_path, PLAN)


@pytest.fixture(params=["memory", "sqlite", "postgres", "sampled"])
def retry_subject(request, tmp_path):
    """A store whose run (a durable one is registered with it) is RETRY_PLAN."""
    flaky_tries.clear()
    yield from _subject(request, tmp_path, RETRY_PLAN)


def needs(subject: Subject, capability: str) -> None:
    assert capability in REQUIRED | OPTIONAL
    if capability not in subject.capabilities:
        pytest.skip(f"{subject.name} store: no {capability}")


def test_declared_capabilities_match_the_protocols(subject):
    assert REQUIRED <= subject.capabilities <= REQUIRED | OPTIONAL
    assert isinstance(subject.store, StateStore)
    assert isinstance(subject.store, CommitBarrier) == ("commit_barrier" in subject.capabilities)


# -- log (required) ----------------------------------------------------------------------

def test_write_copies_and_get_reads_resolved_values(subject):
    needs(subject, "log")
    store = subject.store
    value = {"a": [1, 2]}
    store.write("state", ("x",), value, OutputMethod.SET, "c1")
    value["a"].append(3)  # the caller keeps using its object
    assert store.get("state", ("x",)) == {"a": [1, 2]}
    assert store.get("state", ("x", "a")) == [1, 2]
    assert store.get("state", ("nothing",)) is MISSING and store.get("other") is MISSING


def test_output_methods_combine(subject):
    needs(subject, "log")
    store = subject.store
    store.write("state", ("o",), {"a": {"x": 1}}, OutputMethod.SET, "c1")
    store.write("state", ("o",), {"a": {"y": 2}}, OutputMethod.MERGE, "c2")
    store.write("state", ("o",), {"b": 3}, OutputMethod.ASSIGN, "c3")
    store.write("state", ("l",), [1], OutputMethod.SET, "c4")
    store.write("state", ("l",), [2, 3], OutputMethod.CONCAT, "c5")
    store.write("state", ("l",), [4], OutputMethod.PUSH, "c6")
    assert store.get("state", ("o",)) == {"a": {"x": 1, "y": 2}, "b": 3}
    assert store.get("state", ("l",)) == [1, 2, 3, [4]]


def test_resolved_and_snapshot_report_the_log(subject):
    needs(subject, "log")
    store = subject.store
    store.write("input", (), {"q": 1})
    store.write("state", ("a",), 1, OutputMethod.SET, "c1")
    store.write("state", ("b",), 2, OutputMethod.SET, "c2")
    assert store.resolved() == {"input": {"q": 1}, "state": {"a": 1, "b": 2}}
    assert store.resolved(exclude=("input",)) == {"state": {"a": 1, "b": 2}}
    log = store.snapshot().to_json()
    assert [(m["kind"], m["call"]) for m in log] == [("input", None), ("state", "c1"), ("state", "c2")]


# -- records (required) ------------------------------------------------------------------

def test_records_are_kept_in_call_order_and_accept_changes(subject):
    needs(subject, "records")
    store = subject.store

    async def go() -> None:  # (a durable store commits a completion on the running loop)
        for i, cid in enumerate(("c1", "c2")):
            store.add_record(new_record(cid, "echo", i))
        rec = store.records[0]
        rec.status = "running"
        store.record_started(rec)
        store.write("state", ("a",), 1, OutputMethod.SET, "c1")
        rec.status = "succeeded"
        rec.output = 1
        store.record_ended(rec)
        if subject.flush is not None:
            await subject.flush()

    asyncio.run(go())
    assert [r.id for r in store.records] == ["c1", "c2"]
    assert [r.index for r in store.records] == [0, 1]


def _run(subject: Subject, text: str = PLAN) -> Any:
    sched = Scheduler(loads(text, format="dsl"), TOOLS, store=subject.store, input={"q": "x"})
    subject.attach(sched)

    async def go() -> Any:
        result = await sched.run()
        if subject.flush is not None:
            await subject.flush()
        return result

    return asyncio.run(go())


def test_a_plan_runs_on_the_store_as_on_the_default_one(subject):
    needs(subject, "records")
    result = _run(subject)
    reference = asyncio.run(Scheduler(loads(PLAN, format="dsl"), TOOLS, input={"q": "x"}).run())
    assert result.status == reference.status == "succeeded"
    assert result.state == reference.state
    assert sorted(result.state["state"]["items"]) == [1, 2, 3] and result.state["state"]["b"] == 1
    assert [(m["kind"], m["path"], m["value"], m["call"]) for m in result.log] == \
        [(m["kind"], m["path"], m["value"], m["call"]) for m in reference.log]
    assert [(r.id, r.status) for r in result.calls] == [(r.id, r.status) for r in reference.calls]


def test_each_attempt_of_a_retried_call_round_trips(retry_subject):
    """A call that failed twice and then succeeded: its three attempts on the run's record,
    and on a durable store in its committed record (what `runs show` and the dashboard read)
    and, from its first retry on, in the attempts kept while it runs."""
    subject = retry_subject
    needs(subject, "records")
    result = _run(subject, RETRY_PLAN)
    assert result.status == "succeeded"
    rec = result.call("r")
    assert [(a.attempt, a.status, a.error.error if a.error else None) for a in rec.attempt_log] == [
        (1, "failed", "Net.Flaky"), (2, "failed", "Net.Flaky"), (3, "succeeded", None)]
    if subject.records is None:
        return
    stored = subject.records()["r"]
    assert stored["attempts"] == 3
    assert stored["attempt_log"] == [a.stored() for a in rec.attempt_log]  # times to the bit
    # what the dashboard saw before the call ended: the attempts up to the last failure
    live = subject.live_attempts()["r"]
    assert [(a["attempt"], a["status"]) for a in live] == [(1, "failed"), (2, "failed")]
    assert live == stored["attempt_log"][:2]


# -- commit_barrier (optional) -----------------------------------------------------------

def test_the_committed_log_is_the_run_log_and_intents_precede_tools(subject):
    needs(subject, "commit_barrier")
    result = _run(subject)
    committed = [(e["kind"], e["path"], e["value"], e["call"]) for e in subject.committed()]
    assert committed == [(m["kind"], m["path"], m["value"], m["call"]) for m in result.log]
    # echo is not idempotent: its calls' intents were committed; pure's need none
    assert sorted(subject.intents()) == ["a", "d"]


def test_dependents_are_examined_once_the_completion_is_committed(subject):
    needs(subject, "commit_barrier")
    store = subject.store
    calls = loads("a: $state.a = pure(value=1)", format="dsl").calls
    events: list = []

    async def go() -> None:
        landed = asyncio.Event()

        def committed(i: int) -> None:
            events.append(("committed", i))
            landed.set()

        store.connect(CommitListener(committed, lambda starts: events.append(("intents", starts)),
                                     lambda: events.append("failed"), calls))
        store.add_record(new_record("a", "pure", 0))
        rec = store.records[0]
        store.write("state", ("a",), 1, OutputMethod.SET, "a")
        rec.status = "succeeded"
        store.record_ended(rec)
        store.settle_after_commit(0)
        assert events == []  # not before the transaction lands
        await asyncio.wait_for(landed.wait(), 60)  # (a hang guard, not a timing assertion)

    asyncio.run(go())
    assert events == [("committed", 0)]
    assert [(e["path"], e["value"], e["call"]) for e in subject.committed()] == [(["a"], 1, "a")]


def test_dependents_examined_before_the_commit_start_after_it(subject):
    """With ``on_ended``, the barrier examines a call's dependents at once, while its
    completion waits in the batch being gathered; a dependent held then (``hold``) is handed
    back to start only once that completion is committed."""
    needs(subject, "commit_barrier")
    store = subject.store
    calls = loads("a: $state.a = pure(value=1)\nb: $state.b = pure(value=$state.a)", format="dsl").calls
    events: list = []
    seen_at_start: list = []

    async def go() -> None:
        started = asyncio.Event()

        def ended(i: int) -> None:
            events.append(("ended", i))
            store.hold(1, {"value": 1}, None, intent=False)

        def starts(entries) -> None:
            events.append(("start", [e[0] for e in entries]))
            seen_at_start.extend((e["path"], e["value"]) for e in subject.committed())
            started.set()

        store.connect(CommitListener(lambda i: events.append(("committed", i)), starts,
                                     lambda: events.append("failed"), calls, ended))
        store.add_record(new_record("a", "pure", 0))
        store.add_record(new_record("b", "pure", 1))
        rec = store.records[0]
        store.write("state", ("a",), 1, OutputMethod.SET, "a")
        rec.status = "succeeded"
        store.record_ended(rec)
        store.settle_after_commit(0)
        assert events == [("ended", 0)]  # examined now; b is held, not started
        await asyncio.wait_for(started.wait(), 60)  # (a hang guard, not a timing assertion)

    asyncio.run(go())
    assert events == [("ended", 0), ("start", [1])]
    assert seen_at_start == [(["a"], 1)]  # b starts with a's completion committed


# -- sampled_reads (optional) ------------------------------------------------------------

def test_a_read_below_a_sampled_value_finds_a_reported_placeholder(subject):
    needs(subject, "sampled_reads")
    store = subject.store
    store.samples.answer("c1", "echo")  # call c1's result came from a sample
    store.write("state", ("r",), {"k": 1}, OutputMethod.SET, "c1")
    assert store.get("state", ("r", "k")) == 1
    assert store.get("state", ("r", "missing")) == "<unknown sample: †state.r.missing>"
    store.get("state", ("r", "missing"))
    assert [u["ref"] for u in store.samples.unknown] == ["†state.r.missing"]
    assert store.get("state", ("elsewhere",)) is MISSING  # not below a sampled write
