"""Issue 24, item 7: every run ends at its time limit (``max_time``, then one second to
stop) and within the memory budget the user sets (``max_memory`` / ``--max-memory``),
whatever runs: a map expanding, a sync tool in a thread that never returns, an async tool
that ignores its cancellation, a tool growing the process.

Runs go through a worker thread joined with a generous limit (a hang guard, not a timing
assertion): before the fix a nested map ran 43.8 s past ``max_time=10`` and a blocked tool
or a stubborn coroutine kept the run from ever returning.  Outcomes are asserted instead:
``Plan.Timeout`` / ``Plan.MemoryExceeded``, which calls were cancelled, that the tool was
still running when the result came back.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from typing import Any

import pytest

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.runtime.watchdog import Watchdog, parse_size

from hang_guard import finishes


def _ends(fn: Any, limit: float = 90.0) -> Any:
    return finishes(fn, limit, "the run never ended")


@sophon_dsl.tool(name="make")
def make(n: int) -> list:
    return list(range(n))


@sophon_dsl.tool(name="echo")
async def echo(v: Any) -> Any:
    return v


NESTED = """†state.xs = make(n={n})
†state.r = map(†state.xs, as=x) {{
  †local.inner = map(†state.xs, as=y) {{
    †local.c = echo(v=†y)
  }}
}}
"""


# --------------------------------------------------------------------------- time

def test_a_sync_tool_that_never_returns_is_abandoned_at_max_time():
    release = threading.Event()
    entered = threading.Event()

    @sophon_dsl.tool(name="block")
    def block() -> str:
        entered.set()
        release.wait(120)  # a tool that never returns (released when the test ends)
        return "late"

    try:
        result = _ends(lambda: sophon_dsl.run("†state.b = block()\n†state.e = echo(v=1)\n", [block, echo],
                                              max_time=0.5))
        assert entered.is_set() and not release.is_set()  # the tool was still blocked when the run returned
        assert result.status == "failed" and result.error.error == "Plan.Timeout"
        rec = result.calls[0]
        assert rec.status == "cancelled" and rec.error.error == "Plan.Timeout"
        assert result.calls[1].status == "succeeded"
    finally:
        release.set()


def test_an_async_tool_that_ignores_its_cancellation_is_abandoned():
    stop = threading.Event()
    state = {"finished": False}

    @sophon_dsl.tool(name="stubborn")
    async def stubborn() -> str:
        try:
            while not stop.is_set():
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:
                    pass  # swallowed: the run must not wait for this tool
            return "done"
        finally:
            state["finished"] = True

    async def go() -> Any:
        result = await sophon_dsl.arun("†state.s = stubborn()\n", [stubborn], max_time=0.5)
        still_running = not state["finished"]
        stop.set()  # let it end, so this loop closes cleanly
        while not state["finished"]:
            await asyncio.sleep(0.01)
        return result, still_running

    try:
        result, still_running = _ends(lambda: asyncio.run(go()))
    finally:
        stop.set()
    assert still_running
    assert result.status == "failed" and result.error.error == "Plan.Timeout"
    assert result.calls[0].status == "cancelled" and result.calls[0].error.error == "Plan.Timeout"


def test_the_sync_entry_point_returns_too():
    """``sophon_dsl.run`` (asyncio.run underneath) returns although the abandoned task of a
    stubborn tool is still running (asyncio.run would wait for it without end)."""
    stop = threading.Event()

    @sophon_dsl.tool(name="stubborn")
    async def stubborn() -> str:
        while not stop.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                pass
        return "done"

    try:
        result = _ends(lambda: sophon_dsl.run("†state.s = stubborn()\n", [stubborn], max_time=0.5))
    finally:
        stop.set()
    assert result.status == "failed" and result.error.error == "Plan.Timeout"
    assert result.calls[0].status == "cancelled"


def test_a_map_expanding_stops_at_max_time():
    # 1,000 x 1,000 item calls: unbounded, minutes and gigabytes
    result = _ends(lambda: sophon_dsl.run(NESTED.format(n=1000), [make, echo], max_time=1))
    assert result.status == "failed" and result.error.error == "Plan.Timeout"
    statuses = Counter(c.status for c in result.calls)
    assert statuses["cancelled"] > 0 and statuses["succeeded"] < 1_000_000
    assert all(c.error.error == "Plan.Timeout" for c in result.calls if c.status == "cancelled")


def test_max_time_through_the_cli(tmp_path, capsys):
    plan = tmp_path / "nested.plan"
    plan.write_text(NESTED.format(n=1000), encoding="utf-8")
    tools = tmp_path / "t.py"
    tools.write_text("import sophon_dsl\n\n@sophon_dsl.tool(name='make')\ndef make(n: int) -> list:\n"
                     "    return list(range(n))\n\n@sophon_dsl.tool(name='echo')\nasync def echo(v: int) -> int:\n"
                     "    return v\n", encoding="utf-8")
    capsys.readouterr()
    code = _ends(lambda: main(["run", str(plan), "--tools", str(tools), "--no-store", "--max-time", "1"]))
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and "plan failed" in err


# --------------------------------------------------------------------------- memory

def test_max_memory_stops_a_map_growing_the_process():
    result = _ends(lambda: sophon_dsl.run(NESTED.format(n=1000), [make, echo], max_memory=64 << 20))
    assert result.status == "failed" and result.error.error == "Plan.MemoryExceeded"
    assert "max_memory" in result.error.cause
    cancelled = [c for c in result.calls if c.status == "cancelled"]
    assert cancelled and all(c.error.error == "Plan.MemoryExceeded" for c in cancelled)


def test_max_memory_stops_a_tool_growing_the_process():
    stop = threading.Event()
    held: list[bytearray] = []

    @sophon_dsl.tool(name="hog")
    def hog() -> int:
        while not stop.is_set() and len(held) < 64:  # at most 1 GiB, 16 MiB at a time
            held.append(bytearray(16 << 20))
            time.sleep(0.01)
        return len(held)

    try:
        result = _ends(lambda: sophon_dsl.run("†state.h = hog()\n", [hog], max_memory=128 << 20))
    finally:
        stop.set()
    assert result.status == "failed" and result.error.error == "Plan.MemoryExceeded"
    assert result.calls[0].status == "cancelled" and result.calls[0].error.error == "Plan.MemoryExceeded"
    time.sleep(0.1)
    held.clear()


def test_max_memory_through_the_cli(tmp_path, capsys):
    plan = tmp_path / "nested.plan"
    plan.write_text(NESTED.format(n=1000), encoding="utf-8")
    tools = tmp_path / "t.py"
    tools.write_text("import sophon_dsl\n\n@sophon_dsl.tool(name='make')\ndef make(n: int) -> list:\n"
                     "    return list(range(n))\n\n@sophon_dsl.tool(name='echo')\nasync def echo(v: int) -> int:\n"
                     "    return v\n", encoding="utf-8")
    capsys.readouterr()
    code = _ends(lambda: main(["run", str(plan), "--tools", str(tools), "--no-store", "--max-memory", "64M"]))
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and "plan failed" in err


def test_a_run_within_its_bounds_is_unaffected():
    result = sophon_dsl.run(NESTED.format(n=20), [make, echo], max_time=60, max_memory=2 << 30)
    assert result.status == "succeeded" and len(result.state["state"]["r"]) == 20
    deadline = time.monotonic() + 10
    while any(t.name == "sophon-watchdog" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == "sophon-watchdog" for t in threading.enumerate())  # it ended with the run


def test_the_watchdog_trips_once_and_not_after_stop():
    tripped: list[str] = []
    dog = Watchdog(tripped.append, deadline=time.monotonic() + 0.05)
    dog.start()
    deadline = time.monotonic() + 10
    while not tripped and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tripped == ["timeout"]
    quiet: list[str] = []
    dog = Watchdog(quiet.append, deadline=time.monotonic() + 0.2)
    dog.start()
    dog.stop()
    time.sleep(0.4)
    assert quiet == []


# --------------------------------------------------------------------------- the options

@pytest.mark.parametrize("bad", [0, -1, 1.5, "2G", True])
def test_max_memory_must_be_a_positive_number_of_bytes(bad):
    with pytest.raises(ValueError, match="max_memory"):
        sophon_dsl.run("†state.x = echo(v=1)\n", [echo], max_memory=bad)


@pytest.mark.parametrize("text, size", [("2G", 2 << 30), ("512M", 512 << 20), ("64KiB", 64 << 10), ("1000", 1000),
                                        ("1.5k", 1536), ("2 GB", 2 << 30)])
def test_sizes_read(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "", "G", "-1G", "0", "1X"])
def test_bad_sizes_are_refused(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_a_bad_max_memory_flag_is_a_usage_error(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text('†state.x = data.set(value={}, path="a", new=1)\n', encoding="utf-8")
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(["run", str(plan), "--no-store", "--max-memory", "lots"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "--max-memory" in err and "not a size" in err and "Traceback" not in err
    assert main(["run", str(plan), "--no-store", "--max-memory", "2G", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "succeeded"
