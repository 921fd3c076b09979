"""map at run time (issue 12): items inside the one scheduler, in order, limited, tolerated."""

from __future__ import annotations

import asyncio

from sophon_dsl import tool
from sophon_dsl.compiler import compile_plan
from sophon_dsl.graph import to_data, to_dot, to_mermaid
from sophon_dsl.loader import loads
from sophon_dsl.runtime import dry_run, run


def _tools(log: list, delays: dict | None = None):
    @tool(name="work")
    async def work(v: object = None) -> dict:
        log.append(("start", v))
        await asyncio.sleep((delays or {}).get(v, 0) if isinstance(v, (str, int)) else 0)
        log.append(("end", v))
        if v == "bad":
            raise ValueError("bad item")
        return {"v": v}

    return [work]


def test_results_are_in_item_order_whatever_order_items_end():
    log: list = []
    plan = loads("$state.out = map($input.xs) { $local.r = work(v=$item); return $local.r.v }")
    res = run(plan, tools=_tools(log, {"a": 0.03, "b": 0.0, "c": 0.01}), input={"xs": ["a", "b", "c"]})
    assert res.status == "succeeded"
    assert res.state == {"state": {"out": ["a", "b", "c"]}}
    assert [e for e in log if e[0] == "end"][0] == ("end", "b")  # b ended first
    ids = [r.id for r in res.calls]
    assert ids == ["c1", "c1[0].work", "c1[1].work", "c1[2].work"]


def test_concurrency_limits_the_items_in_flight():
    log: list = []
    plan = loads("map($input.xs, concurrency=2) { work(v=$item) }")
    res = run(plan, tools=_tools(log, dict.fromkeys(range(6), 0.005)), input={"xs": list(range(6))})
    assert res.status == "succeeded"
    running = peak = 0
    for kind, _ in log:
        running += 1 if kind == "start" else -1
        peak = max(peak, running)
    assert peak == 2


def test_tolerated_failures_and_the_map_failing_beyond_them():
    plan = "$state.out || $state.err = map($input.xs, tolerate=1) { $local.r = work(v=$item) }"
    ok = run(loads(plan), tools=_tools([]), input={"xs": ["a", "bad", "c"]})
    assert ok.status == "succeeded"
    assert ok.state["state"]["out"][1] == {"error": "Tool.Failed", "cause": "ValueError: bad item"}
    assert [r.status for r in ok.calls] == ["succeeded", "succeeded", "failed", "succeeded"]
    assert ok.calls[2].caught  # handled by the map
    over = run(loads(plan), tools=_tools([]), input={"xs": ["bad", "bad", "c"]})
    assert over.status == "succeeded"  # the map's error went to its catch
    assert over.state["state"]["err"]["error"] == "Map.Failed"
    uncaught = run(loads("map($input.xs) { work(v=$item) }"), tools=_tools([]), input={"xs": ["bad"]})
    assert uncaught.status == "failed" and uncaught.calls[0].error.error == "Map.Failed"


def test_a_map_waits_for_its_list_and_its_body_outer_reads():
    log: list = []
    plan = loads("$state.xs = work(v=1)\n$state.k = work(v=2)\n"
                 "$state.out = map(over=[$state.xs.v, 7]) { $local.r = work(v=[$item, $state.k.v]) }")
    res = run(plan, tools=_tools(log), input={})
    assert res.status == "succeeded"
    assert res.state["state"]["out"] == [{"r": {"v": [1, 2]}}, {"r": {"v": [7, 2]}}]


def test_events_per_item():
    events: list = []
    plan = loads("$state.out = map($input.xs, tolerate=1) { work(v=$item) }")
    run(plan, tools=_tools([]), input={"xs": ["a", "bad"]}, on_event=events.append)
    types = [(e.type, e.data) for e in events if e.type.startswith("map_")]
    assert ("map_start", {"items": 2}) in types
    assert ("map_item_complete", {"item": 0}) in types and ("map_item_failed", {"item": 1}) in types
    steps = {e.call_id for e in events if e.type == "plan_step_complete"}
    assert "c1[0].work" in steps


def test_a_thousand_items():
    plan = loads("$state.out = map($input.xs) { $local.a = work(v=$item); $local.b = work(v=$local.a) }")
    res = run(plan, tools=_tools([]), input={"xs": list(range(1000))})
    assert res.status == "succeeded"
    assert len(res.calls) == 2001 and len(res.state["state"]["out"]) == 1000
    assert res.state["state"]["out"][999] == {"a": {"v": 999}, "b": {"v": {"v": 999}}}
    assert list(res.state) == ["state"]  # the items' own kinds are not in the run's state


def test_dry_run_shows_the_expansion():
    report = dry_run("tool work = {\"output\": {\"type\": \"object\"}}\n"
                     "$state.out = map($input.xs, concurrency=1) { work(v=$item) }",
                     mocks={"work": {"result": {"ok": True}, "latency": 1}}, input={"xs": [1, 2]})
    assert report.status == "succeeded"
    (m,) = report.maps
    assert [c["id"] for item in m["items"] for c in item["calls"]] == ["c1[0].work", "c1[1].work"]
    assert report.makespan == 2.0 and "map c1: 2 item(s)" in report.to_text()


def test_graph_draws_the_body_once():
    compiled = compile_plan(loads("$state.out = map($input.xs) {\n  $local.a = work(v=$item)\n"
                                  "  $local.b = work(v=$local.a)\n}"), tools=_tools([]))
    mer = to_mermaid(compiled)
    assert "subgraph n0_body" in mer and 'n0_0 -->|"†local.a"| n0_1' in mer
    assert "subgraph cluster_n0" in to_dot(compiled)
    body = to_data(compiled)["nodes"][0]["map"]
    assert [c["id"] for c in body["calls"]] == ["c1[*].work", "c1[*].work_2"]


def test_a_broken_outer_read_skips_the_map_and_a_fallback_does_not():
    from sophon_dsl.runtime.reference import reference_run

    @tool(name="f")
    async def f(x: object = None) -> object:
        if x == "boom":
            raise ValueError("boom")
        return x

    plan = loads('$state.a = f(x="boom")\n$state.out = map(over=[1, 2]) { $local.r = f(x=[$item, $state.a]) }\n'
                 '$state.out2 = map(over=[1]) { $local.r = f(x=$state.a || $item) }')
    for result in (run(plan, tools=[f]), reference_run(plan, tools=[f])):
        assert [(c.id, c.status) for c in result.calls] == [
            ("c1", "failed"), ("c2", "skipped"), ("c3", "succeeded"), ("c3[0].f", "succeeded")]
        assert result.state == {"state": {"out2": [{"r": 1}]}}
