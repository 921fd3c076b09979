"""A map's @timeout (issue 12): the whole map's time, from its start to its last item's end.

When it elapses the map fails with Map.Timeout (caught by a branching output like any
failure), no further item starts and the calls of the items in flight are cancelled.
Tools here wait on an event nobody sets, so a call the timeout failed to cancel would
hold the run: each run goes through the hang guard.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from sophon_dsl import tool
from sophon_dsl.loader import loads
from sophon_dsl.runtime import run

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from hang_guard import finishes

FOREVER = "forever"


def _tools(log: list):
    @tool(name="work")
    async def work(v: object = None) -> object:
        log.append(("start", v))
        try:
            if v == FOREVER:
                await asyncio.Event().wait()
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            log.append(("cancelled", v))
            raise
        log.append(("end", v))
        return v

    @tool(name="slow")
    async def slow(v: object = None, s: float = 0.0) -> object:
        await asyncio.sleep(s)
        return v

    return [work, slow]


def _run(text: str, items: list, log: list, **kw):
    return finishes(lambda: run(loads(text), tools=_tools(log), input={"xs": items}, **kw), 30,
                    "the map's timeout did not end the run")


def test_a_map_over_its_timeout_fails_and_cancels_its_items_in_flight():
    log: list = []
    res = _run("@timeout(0.2) $state.out = map($input.xs) { $local.r = work(v=$item) }",
               ["a", FOREVER, "c"], log)
    assert res.status == "failed"
    calls = {r.id: r for r in res.calls}
    assert calls["c1"].status == "failed"
    assert calls["c1"].error.error == "Map.Timeout"
    assert "map c1 did not finish within 0.2 s (2 of 3 items ended)" in calls["c1"].reason
    assert calls["c1[1].work"].status == "cancelled"
    assert calls["c1[1].work"].error.error == "Map.Timeout"
    assert calls["c1[0].work"].status == calls["c1[2].work"].status == "succeeded"
    assert ("cancelled", FOREVER) in log


def test_a_branching_output_catches_the_timeout_and_readers_of_the_result_are_skipped():
    log: list = []
    res = _run("@timeout(0.1) $state.out || $state.err = map($input.xs) { work(v=$item) }\n"
               "work(v=$state.out)\nwork(v=$state.err.error)", [FOREVER], log)
    assert res.status == "succeeded"
    assert res.state["state"]["err"]["error"] == "Map.Timeout"
    calls = {r.id: r.status for r in res.calls}
    assert calls["c2"] == "skipped" and calls["c3"] == "succeeded"
    assert ("end", "Map.Timeout") in log


def test_no_item_starts_after_the_timeout():
    log: list = []
    res = _run("@timeout(0.1) map($input.xs, concurrency=1) { work(v=$item) }", [FOREVER, "b", "c"], log)
    assert res.status == "failed"
    assert [v for kind, v in log if kind == "start"] == [FOREVER]
    assert [r.id for r in res.calls] == ["c1", "c1[0].work"]


def test_calls_waiting_inside_an_item_are_cancelled_with_it():
    log: list = []
    res = _run("@timeout(0.1) map($input.xs) {\n  $local.a = work(v=$item)\n  $local.b = work(v=$local.a)\n}",
               [FOREVER], log)
    calls = {r.id: r for r in res.calls}
    assert calls["c1[0].work"].status == calls["c1[0].work_2"].status == "cancelled"
    assert calls["c1[0].work_2"].error.error == "Map.Timeout"
    assert "cancelled: map c1 did not finish within 0.1 s" in calls["c1[0].work_2"].reason


def test_a_nested_map_in_flight_is_cancelled_with_its_items():
    log: list = []
    res = _run("@timeout(0.1) $state.out || $state.err = map($input.xs, as=row) {\n"
               "  $local.r = map($row) { work(v=$item) }\n}", [["a", FOREVER]], log)
    assert res.status == "succeeded"
    assert res.state["state"]["err"]["error"] == "Map.Timeout"
    calls = {r.id: r.status for r in res.calls}
    assert calls["c1[0].map"] == "cancelled"
    assert calls["c1[0].map[0].work"] == "succeeded"
    assert calls["c1[0].map[1].work"] == "cancelled"
    assert ("cancelled", FOREVER) in log


def test_a_map_that_ends_in_time_is_not_affected():
    log: list = []
    res = _run("@timeout(30) $state.out = map($input.xs) { work(v=$item) }", ["a", "b"], log)
    assert res.status == "succeeded"
    assert res.state["state"]["out"] == [{}, {}]


def test_the_runs_per_call_timeout_applies_to_the_items_calls_not_to_the_whole_map():
    # four items one after the other, 0.2 s each: the map takes longer than the run's
    # default per-call timeout (0.5 s), each item's call does not
    res = finishes(lambda: run(loads("$state.out = map($input.xs, concurrency=1) { $local.v = slow(v=$item, s=0.2) }"),
                               tools=_tools([]), input={"xs": [1, 2, 3, 4]}, timeout=0.5), 30)
    assert res.status == "succeeded", res.error
    stuck = finishes(lambda: run(loads("map($input.xs) { slow(v=$item, s=5) }"), tools=_tools([]),
                                 input={"xs": [1]}, timeout=0.1), 30)
    assert {r.id: r.error.error if r.error else None for r in stuck.calls}["c1[0].slow"] == "Tool.Timeout"
