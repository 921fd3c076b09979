"""Cancellation by id (seed 000 ``TryCancelPlan(planId)``, issue 26 item 10): ``sophon-dsl
cancel RUN_ID`` cancels a run another process holds, through the store (SQLite and
PostgreSQL): the holder ends it ``cancelled`` and records its summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sophon_dsl.cli import main
from sophon_dsl.durable import open_store

ROOT = Path(__file__).resolve().parents[2]

TOOLS = '''
import asyncio
from sophon_dsl.tools import tool

@tool(name="quick", risk="none")
def quick(n: int) -> int:
    return n

@tool(name="slow", risk="none")
async def slow(n: int) -> int:
    await asyncio.sleep(120)     # cancelled long before
    return n
'''

PLAN = """
$state.a = quick(n=1)
$state.b = slow(n=$state.a)
$state.c = quick(n=$state.b)
"""


def _holder(tmp_path: Path, url: str) -> tuple[subprocess.Popen, str]:
    """`sophon-dsl run --store URL` of a slow plan in a process of its own, once its slow call runs."""
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "slow.plan").write_text(PLAN, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "sophon_dsl", "run", str(tmp_path / "slow.plan"), "--tools",
                             str(tmp_path / "tools.py"), "--store", url, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    line = proc.stderr.readline()
    assert line.startswith("run id: "), line + proc.stderr.read()
    run_id = line.split(":", 1)[1].strip()
    with open_store(url) as store:
        for _ in range(600):  # the slow call has started (its predecessor is committed)
            if "c1" in store.load_calls(run_id):
                break
            time.sleep(0.05)
    return proc, run_id


def test_cancel_a_run_another_process_holds(tmp_path, store_url, capsys):
    proc, run_id = _holder(tmp_path, store_url)
    try:
        code = main(["cancel", run_id, "--store", store_url, "--reason", "not needed", "--wait", "60"])
        err = capsys.readouterr().err
        assert code == 0, err
        assert f"run {run_id} ended cancelled" in err
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    result = json.loads(out)
    assert result["status"] == "cancelled"
    assert [c["status"] for c in result["calls"]] == ["succeeded", "cancelled", "cancelled"]
    with open_store(store_url) as store:
        row = store.get_run(run_id)
        assert row["status"] == "cancelled" and row["summary"]["status"] == "cancelled"
        assert row["lease_owner"] is None
        assert store.cancel_requested(run_id)["reason"] == "not needed"
    # a run that ended is not cancelled again
    assert main(["cancel", run_id, "--store", store_url]) == 1
    assert "already ended (cancelled)" in capsys.readouterr().err


def test_cancel_a_waiting_run_nobody_holds_and_unknown_ids(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    import sophon_dsl
    from sophon_dsl.tools import tool

    @tool(name="send", risk="high")
    def send(to: str) -> str:
        return to

    result = sophon_dsl.run('$state.r = send(to="team")\n', [send], store=url, approve="wait")
    assert result.status == "waiting"
    assert main(["cancel", result.run_id, "--store", url]) == 0
    with open_store(url) as store:
        row = store.get_run(result.run_id)
    assert row["status"] == "cancelled" and row["summary"]["error"]["error"] == "Plan.Cancelled"
    assert main(["cancel", "nosuch", "--store", url]) == 2


def test_in_process_cancel_stays_on_the_handle():
    import asyncio

    import sophon_dsl
    from sophon_dsl.runtime import start
    from sophon_dsl.tools import tool

    @tool(name="wait", risk="none")
    async def wait() -> int:
        await asyncio.sleep(60)
        return 1

    async def go():
        handle = start('$state.w = wait()\n', [wait])
        await asyncio.sleep(0.05)
        handle.cancel()
        return await handle.result()

    assert asyncio.run(go()).status == "cancelled"
    assert sophon_dsl.run  # (the module-level API is unchanged)


@pytest.mark.parametrize("requests", [0, 1])
def test_watch_cancel_calls_back_once_the_request_is_stored(tmp_path, requests):
    import asyncio

    from sophon_dsl.durable.session import watch_cancel

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    called = []
    with open_store(url) as store:
        store.create_run("r1", plan_id="p", goal=None, spec={}, plan_hash="h").result()
        if requests:
            store.request_cancel("r1", {"reason": "x"}).result()

        async def go():
            watcher = asyncio.ensure_future(watch_cancel(store, "r1", lambda: called.append(1), every=0.01))
            await asyncio.sleep(0.1)
            if not watcher.done():
                watcher.cancel()
                return None
            return watcher.result()

        got = asyncio.run(go())
    assert (got, called) == (({"reason": "x"}, [1]) if requests else (None, []))


def test_a_durable_agent_run_is_cancelled_through_its_store(tmp_path):
    import asyncio

    from sophon_dsl.llm.agent import Agent
    from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
    from sophon_dsl.tools import tool

    url = f"sqlite:///{tmp_path / 'runs.db'}"

    @tool(name="slow", risk="none")
    async def slow() -> int:
        with open_store(url) as store:  # another process asks while the call runs
            store.request_cancel("ag1", {"reason": "stop"}).result()
        await asyncio.sleep(60)
        return 1

    provider = ScriptedProvider(keyed=[KeyedReply("Request: ", "$state.s = slow()\nreturn $state.s\n")])
    agent = Agent(provider, tools=[slow], stdlib=False, store=url, run_id="ag1")

    async def go():
        try:
            await agent.arun("wait")
        except asyncio.CancelledError:
            return "cancelled"

    assert asyncio.run(go()) == "cancelled"
    with open_store(url) as store:
        row = store.get_run("ag1")
    assert row["status"] == "cancelled" and row["summary"]["status"] == "cancelled"


def test_closing_the_cancel_reader_during_a_read_never_crashes(tmp_path):
    """The watcher's task can be cancelled while its read runs in a thread; closing the reader
    then must not close the SQLite connection under that read (it crashed the process).  Run in
    a child process so that a crash is a failed test, not a dead test session."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(f"""
        import threading
        from sophon_dsl.durable import open_store
        store = open_store("sqlite:///{tmp_path / 'r.db'}")
        for k in range(300):
            read = store.cancel_reader()
            t = threading.Thread(target=lambda: [read("nobody") for _ in range(20)])
            t.start()
            read.close()            # mid-read, most of the time
            t.join()
            assert read("nobody") is None  # a closed reader answers nothing
        store.close()
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
