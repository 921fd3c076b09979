"""The executor seam, proved by adding an engine: a thread-pool :class:`ToolExecutor` in this
file plus one entry in the table of executor specs (``runtime/executors.py``), run through
the public API and the CLI, with no change to the scheduler.

The engine: sync tools with a Python function run in its own pool (threads named
``pool-tool``); everything else goes to the run's local invoker.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.runtime.executors import EXECUTORS, ExecutorConfigError, ExecutorFactory, bad_spec, executor_from_spec
from sophon_dsl.runtime.invoker import Invocation, Invoker, RunInfo, ToolExecutor
from sophon_dsl.tools import ToolSpec, tool


class PoolRun:
    """One run's invoker: what :meth:`PoolExecutor.invoker_for` makes."""

    def __init__(self, owner: "PoolExecutor", run: RunInfo, local: Invoker) -> None:
        self.owner, self.run, self.local = owner, run, local
        self.pool: ThreadPoolExecutor | None = None

    def direct(self, call: Any, spec: ToolSpec | None) -> Callable[..., Any] | None:
        return self.local.direct(call, spec)  # async tools are awaited here, as in a local run

    async def open(self) -> None:
        self.pool = ThreadPoolExecutor(self.owner.workers, thread_name_prefix="pool-tool")
        self.owner.events.append(("open", len(self.run.calls)))

    async def invoke(self, inv: Invocation) -> Any:
        spec = inv.spec
        if spec is None or spec.func is None or spec.is_async or inv.call.inline_output is not None:
            return await self.local.invoke(inv)
        self.owner.events.append(("call", inv.call_id))
        return await asyncio.get_running_loop().run_in_executor(self.pool, lambda: spec.func(**inv.args))

    def close(self) -> None:
        self.local.close()

    async def aclose(self) -> None:
        assert self.pool is not None
        self.pool.shutdown(wait=True)
        self.owner.events.append(("aclose",))


class PoolExecutor:
    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.events: list[tuple] = []
        self.closed = False

    def invoker_for(self, run: RunInfo, local: Invoker) -> Invoker:
        return PoolRun(self, run, local)

    def close(self) -> None:
        self.closed = True


def pool_from_spec(spec: str, config: str | None) -> PoolExecutor:
    """``pool:N``: the factory the table calls with the whole spec."""
    _, _, n = spec.partition(":")
    if not n.isdigit() or int(n) < 1:
        raise bad_spec(spec, "the pool needs a number of threads (pool:4)")
    return PoolExecutor(int(n))


@pytest.fixture
def pool_engine(monkeypatch):
    monkeypatch.setitem(EXECUTORS, "pool", ExecutorFactory(("pool:N",), pool_from_spec))  # the one line


@tool
def where(x: int) -> dict:
    return {"x": x, "thread": threading.current_thread().name}


@tool
async def here(v: Any = None) -> Any:
    return v


PLAN = "a: $state.a = where(x=1)\nb: $state.b = here(v=$state.a.x)\nc: $state.c = where(x=$state.b)\n"


def test_a_new_engine_is_a_module_and_one_line(pool_engine):
    executor = executor_from_spec("pool:2")
    assert isinstance(executor, ToolExecutor)
    result = sophon_dsl.run(PLAN, [where, here], tool_executor=executor)
    assert result.ok, result.error
    assert result.state["state"]["a"]["thread"].startswith("pool-tool")
    assert result.state["state"]["c"] == {"x": 1, "thread": result.state["state"]["c"]["thread"]}
    assert result.state["state"]["c"]["thread"].startswith("pool-tool")
    # opened before the first call (it saw the plan's three calls), closed after the last
    assert executor.events == [("open", 3), ("call", "a"), ("call", "c"), ("aclose",)]


def test_the_cli_resolves_the_new_prefix(pool_engine, tmp_path, capsys):
    tools = tmp_path / "tools.py"
    tools.write_text("import threading\nfrom sophon_dsl import tool\n\n@tool\ndef where(x: int) -> str:\n"
                     "    return threading.current_thread().name\n")
    plan = tmp_path / "p.sophon"
    plan.write_text("$state.a = where(x=1)\n")
    code = main(["run", str(plan), "--tools", str(tools), "--no-stdlib", "--no-store", "--executor", "pool:1",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["state"]["state"]["a"].startswith("pool-tool")


def test_specs_the_table_does_not_know_are_refused_with_e701(pool_engine, capsys):
    with pytest.raises(ExecutorConfigError) as info:
        executor_from_spec("ray:auto")
    assert [d.code for d in info.value.diagnostics] == ["E701"]
    assert "pool:N" in str(info.value) and "dask:local" in str(info.value)  # the known forms, new one too
    with pytest.raises(ExecutorConfigError) as info:
        executor_from_spec("pool:none")
    assert [d.code for d in info.value.diagnostics] == ["E701"]
    assert executor_from_spec("local") is None and executor_from_spec(None) is None
