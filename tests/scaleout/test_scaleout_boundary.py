"""Tool calls on a Dask cluster of worker processes: what crosses the process boundary."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

import sophon_dsl
from sophon_dsl.runtime.errors import PlanInvalid
from sophon_dsl.scaleout import DaskExecutor
from sophon_dsl.toolsource import load_tool_source

from conftest import scheduler_keys

TOOLS_FILE = str(Path(__file__).with_name("remote_tools.py"))


@pytest.fixture(scope="module")
def tools():
    specs, diags = load_tool_source(TOOLS_FILE)
    assert not diags
    return specs


def _ex(cluster, **kw) -> DaskExecutor:
    return DaskExecutor(cluster.scheduler_address, **kw)


BOUNDARY = '''
†state.pid = where()
†state.local_pid = where_local()
†state.apid = where_async(n=2)
†state.ok || †state.err = named_error(x=7)
†state.g || †state.gerr = generic_error()
†state.e || †state.eerr = exits()
†state.ea || †state.eaerr = exits_async()
†state.first || †state.second = picks(which=1)
†state.report = report(label="r")
†state.nj || †state.njerr = not_json()
'''


def _comparable(state: dict) -> dict:
    out = dict(state["state"])
    for k in ("pid", "local_pid"):
        out.pop(k)
    out["apid"] = out["apid"]["n"]
    out["report"] = out["report"]["label"]
    return out


def test_a_tools_file_runs_in_worker_processes_and_everything_comes_back_as_locally(proc_cluster, tools):
    remote = sophon_dsl.run(BOUNDARY, tools, tool_executor=_ex(proc_cluster))
    local = sophon_dsl.run(BOUNDARY, tools)
    me = os.getpid()
    workers = proc_cluster.scheduler_info["workers"]
    worker_pids = set(workers[w]["pid"] for w in workers) if "pid" in next(iter(workers.values())) else None
    st = remote.state["state"]
    assert st["pid"] != me and st["apid"]["pid"] != me and st["report"]["pid"] != me
    if worker_pids:
        assert st["pid"] in worker_pids
    assert st["local_pid"] == me  # placement="local": in the coordinator
    assert remote.status == local.status
    assert _comparable(remote.state) == _comparable(local.state)
    assert [(c.id, c.status, c.attempts, c.error) for c in remote.calls] == \
        [(c.id, c.status, c.attempts, c.error) for c in local.calls]
    errors = {c.id: c.error for c in remote.calls if c.error}
    assert errors["c4"].error == "Payment.Declined" and errors["c4"].cause == "card 7 expired"
    assert errors["c5"].error == "Tool.Failed" and "ValueError: bad value" in errors["c5"].cause
    assert "SystemExit(3)" in errors["c6"].cause and "SystemExit(4)" in errors["c7"].cause
    assert st["second"] == {"picked": 1} and "first" not in st
    assert errors["c10"].error == "Tool.OutputInvalid"


def test_retries_get_distinct_keys(proc_cluster, tools, tmp_path):
    ex = _ex(proc_cluster)
    counter = tmp_path / "n"
    plan = f'@retry(max_attempts=3, interval=0) †state.n = flaky(path="{counter}", failures=2)'
    result = sophon_dsl.run(plan, tools, tool_executor=ex)
    assert result.status == "succeeded" and result.state["state"]["n"] == 3
    assert result.calls[0].attempts == 3
    keys = ex.last_keys
    assert len(keys) == 3 and len(set(keys)) == 3
    run_id = keys[0].split("/")[0]
    assert keys == [f"{run_id}/c1/1", f"{run_id}/c1/2", f"{run_id}/c1/3"]


def _gone(cluster, prefix: str) -> list[str]:
    """Keys left under ``prefix``, after giving the scheduler a moment to forget them."""
    for _ in range(100):
        left = scheduler_keys(cluster, prefix)
        if not left:
            return left
        time.sleep(0.05)
    return left


def test_a_timeout_cancels_the_remote_future(proc_cluster, tools, tmp_path):
    ex = _ex(proc_cluster)
    release = tmp_path / "release"
    result = sophon_dsl.run(f'@timeout(0.5) †state.s = blocks(path="{release}")', tools, tool_executor=ex)
    release.touch()
    assert result.calls[0].error.error == "Tool.Timeout"
    run_id = ex.last_keys[0].split("/")[0]
    assert _gone(proc_cluster, run_id) == []


def test_cancel_leaves_no_keys(proc_cluster, tools, tmp_path):
    ex = _ex(proc_cluster)
    release = tmp_path / "release"

    async def go():
        handle = sophon_dsl.start(f'†state.a = blocks(path="{release}")\n†state.b = blocks(path="{release}")',
                                  tools, tool_executor=ex)
        async for ev in handle.events():
            if ev.type == "plan_step_start":
                break
        for _ in range(2000):  # both calls were submitted (bounded: a failure must not hang the suite)
            if len(ex.last_keys) >= 2:
                break
            await asyncio.sleep(0.01)
        handle.cancel()
        return await handle.result()

    result = asyncio.run(go())
    release.touch()
    assert result.status == "cancelled"
    run_id = ex.last_keys[0].split("/")[0]
    assert _gone(proc_cluster, run_id) == []


def test_a_lost_worker_is_a_named_retryable_error(proc_cluster, tools):
    result = sophon_dsl.run("†state.x || †state.err = dies()", tools, tool_executor=_ex(proc_cluster))
    assert result.calls[0].error.error == "Executor.Lost"
    assert result.state["state"]["err"]["error"] == "Executor.Lost"
    from sophon_dsl.runtime.errors import matches

    assert matches("Executor.Lost", ())  # a retry policy's default filter retries it
    for _ in range(300):  # the nanny restarts the worker: leave the cluster whole for the next test
        if len(proc_cluster.scheduler.workers) >= 2:
            break
        time.sleep(0.05)


def test_an_unpicklable_tool_is_refused_at_preflight(proc_cluster):
    import threading

    lock = threading.Lock()

    @sophon_dsl.tool
    def guarded() -> int:
        with lock:
            return 1

    with pytest.raises(PlanInvalid) as info:
        sophon_dsl.run("†state.x = guarded()", [guarded], tool_executor=_ex(proc_cluster))
    [diag] = info.value.diagnostics
    assert diag.code == "E704" and "guarded" in diag.message and "pickled" in diag.message


def test_a_tool_that_does_not_unpickle_on_the_workers_is_refused(proc_cluster, tmp_path, monkeypatch):
    pkg = tmp_path / "only_here_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    mod = importlib.import_module("only_here_pkg")
    from sophon_dsl.scaleout import ship as ship_mod

    monkeypatch.setattr(ship_mod, "by_value", lambda name: False)  # as if it were installed here
    spec = sophon_dsl.tool(mod.f, name="only_here")
    with pytest.raises(PlanInvalid) as info:
        sophon_dsl.run("†state.x = only_here()", [spec], tool_executor=_ex(proc_cluster))
    [diag] = info.value.diagnostics
    assert diag.code == "E704" and "cannot load it" in diag.message and "only_here_pkg" in diag.message


def test_the_idempotency_key_is_the_runs_on_the_worker_too(proc_cluster, tools):
    ex = _ex(proc_cluster)
    result = sophon_dsl.run("†state.k = idempotency_key()", tools, tool_executor=ex)
    run_id = ex.last_keys[0].split("/")[0]
    assert result.state["state"]["k"] == {"key": f"{run_id}:c1", "attempt": 1}
    if getattr(result, "run_id", None):  # durable runs mint the run id; the keys use it
        assert run_id == result.run_id


def test_typed_arguments_are_converted_on_the_worker_even_after_a_local_call(proc_cluster, tools):
    plan = '†state.n = norm1(p={"x": 3, "y": -4})'
    assert sophon_dsl.run(plan, tools).state["state"]["n"] == 7  # builds the converter's adapters here
    result = sophon_dsl.run(plan, tools, tool_executor=_ex(proc_cluster))
    assert result.status == "succeeded" and result.state["state"]["n"] == 7
