"""The seam between a durable run and the run it makes durable (issue 27, item 2).

A :class:`~sophon_dsl.durable.session.DurableRun` gets a
:class:`~sophon_dsl.runtime.runstate.DurableHost` in ``attach`` (the scheduler builds one:
``Scheduler.durable_host()``), never the scheduler itself.  These tests pin that: no module
of the durable package imports the scheduler, and a durable run resumes against a host
written by hand here, with no scheduler anywhere (the runs through the real scheduler are
in test_durable_runs.py, test_durable_maps.py and test_kill9.py)."""

from __future__ import annotations

import ast
import asyncio
import inspect
import uuid
from pathlib import Path
from typing import Any

import pytest

import sophon_dsl
from sophon_dsl import loads
from sophon_dsl.durable import open_store
from sophon_dsl.durable.journal import CALL_OUTCOME_UNKNOWN, BeforeStart, record_json
from sophon_dsl.durable.session import DurableRun
from sophon_dsl.model import OutputMethod
from sophon_dsl.runtime.result import new_record
from sophon_dsl.runtime.runstate import DurableHost
from sophon_dsl.tools import ToolRegistry, tool

DURABLE = Path(sophon_dsl.__file__).parent / "durable"


@tool
async def echo(value: Any = None) -> Any:
    return value


@tool(idempotent=True)
async def pure(value: Any = None) -> Any:
    return value


TOOLS = ToolRegistry([echo, pure])
PLAN = ("a: $state.a = echo(value=1)\n"
        "b: $state.b = echo(value=$state.a)\n"
        "c: $state.c = pure(value=2)\n")


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, top level, lazily or under TYPE_CHECKING (absolute names)."""
    here = "sophon_dsl.durable"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            mod = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
    return found


def test_no_durable_module_imports_the_scheduler():
    files = sorted(DURABLE.glob("*.py"))
    assert len(files) > 5  # (the walk found the package)
    for path in files:
        assert not any(m.startswith("sophon_dsl.runtime.scheduler") for m in _imported(path)), path.name
    # what attach takes is the declared host (a string: the module's annotations are postponed)
    assert inspect.signature(DurableRun.attach).parameters["host"].annotation == "DurableHost"


class Host:
    """A run written by hand: the three calls of PLAN, their records in the durable run's
    journal (the run's state store, as the scheduler's are), and what the durable run did."""

    def __init__(self, run: DurableRun) -> None:
        self.plan = loads(PLAN, format="dsl")
        self.calls = list(self.plan.calls)
        for i, c in enumerate(self.calls):
            run.journal.add_record(new_record(c.id, c.tool, i))
        self.records = run.journal.records
        self.run_ids: list[str] = []
        self.restored: list[tuple] = []
        self.events: list[tuple] = []
        self.cancelled: list[str] = []
        self.hidden: list[set] = []

    def view(self) -> DurableHost:
        index = {c.id: i for i, c in enumerate(self.calls)}
        return DurableHost(self.records, self.calls, "p", lambda: self.plan, index.get,
                           lambda i: TOOLS.get(self.calls[i].tool), TOOLS.get, self.run_ids.append,
                           lambda i, wrote: self.restored.append((i, wrote)),
                           lambda *args, **kw: self.events.append((args, kw)), self.cancelled.append,
                           lambda kinds: self.hidden.append(set(kinds)))


@pytest.fixture
def backend(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    yield store
    store.close()


def _resumed(backend: Any) -> DurableRun:
    """Run PLAN as an earlier process left it: ``a`` committed (it wrote $state.a), ``b``
    started (its intent committed, no result: in doubt), ``c`` never started."""
    done = new_record("a", "echo", 0)
    done.status, done.attempts = "succeeded", 1
    committed = {"a": record_json(done, (0,))}
    log = [{"kind": "state", "path": ["a"], "value": 1, "method": OutputMethod.SET.value, "call": "a",
            "date": 0.0}]
    return DurableRun(backend, uuid.uuid4().hex, committed=committed, log=log, intents={"a": "k-a", "b": "k-b"})


def test_a_durable_run_resumes_against_a_host_written_by_hand(backend):
    run = _resumed(backend)
    host = Host(run)
    run.attach(host.view())
    assert host.run_ids == [run.run_id]
    a_wrote = host.calls[0].output.paths[0]
    assert host.restored == [(0, (a_wrote,))]
    assert host.records[0].status == "succeeded" and host.records[1].status == "pending"
    assert host.hidden == [{"state"}]  # the replayed log's kinds
    [(args, kw)] = host.events
    assert args[:2] == ("plan_resumed", "running")
    assert kw["data"] == {"run_id": run.run_id, "restored": 1, "restored_items": 0, "in_doubt": 1, "rerun": 0}
    # b (echo, not idempotent) is in doubt: decided in its task; c (pure) needs nothing
    assert run.need_before_start(1) is BeforeStart.IN_TASK
    assert run.need_before_start(2) is BeforeStart.NOTHING


def test_a_call_in_doubt_is_decided_through_the_host(backend):
    run = _resumed(backend)
    host = Host(run)
    run.attach(host.view())
    host.events.clear()
    err = asyncio.run(run.before_start(1, host.calls[1], {"value": 1}))
    assert err is not None and err.error == CALL_OUTCOME_UNKNOWN
    [(args, kw)] = host.events
    assert args[:3] == ("plan_step_unknown", "fail", 1)
    assert kw["data"] == {"key": f"{run.run_id}:b", "decision": "fail"}
    assert host.cancelled == []


def test_a_fresh_run_only_takes_its_id(backend):
    run = DurableRun(backend, "r1")
    host = Host(run)
    run.attach(host.view())
    assert host.run_ids == ["r1"]
    assert host.restored == host.events == host.hidden == []
    assert run.restore_items(range(3)) == []  # (not a resumed run: nothing to restore)
