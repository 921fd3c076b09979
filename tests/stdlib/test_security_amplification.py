"""Issue 17, High 4: result sizes are bounded per call and per run (Result.TooLarge).

Hang guards join a worker thread with a generous limit; memory guards read tracemalloc's
peak: on the code before the fix these plans ran for minutes or allocated gigabytes.
"""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path
from typing import Any

import sophon_dsl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hang_guard import finishes


def _bounded(fn: Any, limit: float = 60.0) -> tuple[Any, int]:
    """``fn()`` under the hang guard, and tracemalloc's peak while it ran."""
    tracemalloc.start()
    try:
        value = finishes(fn, limit, "still running: the result was not bounded")
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _error(result: Any, cid: str) -> str | None:
    rec = next(c for c in result.calls if c.id == cid)
    return rec.error.error if rec.error else None


def test_data_query_repeating_its_input_is_refused():
    expression = "[@,@,@,@,@,@,@,@,@,@]|" * 9 + "@"
    plan = f'†state.x = data.query(value=[1, 2, 3], expression="{expression}")\n'
    result, peak = _bounded(lambda: sophon_dsl.run(plan))
    assert result.status == "failed" and _error(result, "c1") == "Result.TooLarge"
    assert peak < 64 << 20


def test_data_query_flattening_its_input_is_refused():
    expression = "[@,@,@,@,@,@,@,@,@,@][]|" * 9 + "length(@)"
    plan = f'†state.x = data.query(value=[1, 2, 3], expression="{expression}")\n'
    result, peak = _bounded(lambda: sophon_dsl.run(plan))
    assert result.status == "failed" and _error(result, "c1") == "Data.QueryTooExpensive"
    assert peak < 128 << 20


def test_data_query_still_answers():
    plan = ('†state.x = data.query(value={"items": [{"name": "a", "price": 5}, {"name": "b", "price": 50}]}, '
            'expression="items[?price < `10`].name")\n')
    result = sophon_dsl.run(plan)
    assert result.status == "succeeded" and result.state["state"]["x"] == ["a"]


def test_chained_text_join_stops_before_allocating():
    fifty = lambda ref: "[" + ", ".join([ref] * 50) + "]"
    plan = (f'†state.a = text.join(items={fifty(chr(34) + "x" * 100 + chr(34))})\n'
            f'†state.b = text.join(items={fifty("†state.a")})\n'
            f'†state.c = text.join(items={fifty("†state.b")})\n'
            f'†state.d = text.join(items={fifty("†state.c")})\n'
            f'†state.e = text.join(items={fifty("†state.d")})\n')
    result, peak = _bounded(lambda: sophon_dsl.run(plan))
    assert [c.status for c in result.calls] == ["succeeded", "succeeded", "succeeded", "failed", "skipped"]
    assert _error(result, "c4") == "Result.TooLarge"
    assert peak < 200 << 20


def test_text_template_repeating_a_value_is_refused():
    plan = ('†state.big = text.join(items=["' + "y" * 1000 + '"], separator="")\n'
            '†state.t = text.template(template="' + "{v}" * 600 + '", values={"v": †state.big})\n'
            '†state.u = text.template(template="' + "{v}" * 600 + '", values={"v": †state.t})\n')
    result, _ = _bounded(lambda: sophon_dsl.run(plan))
    assert _error(result, "c3") == "Result.TooLarge"


def test_a_result_shaped_as_a_bomb_is_refused_by_the_runtime():
    @sophon_dsl.tool(name="bomb")
    def bomb() -> Any:
        value: Any = [1, 2, 3]
        for _ in range(12):
            value = [value] * 10
        return value

    result, peak = _bounded(lambda: sophon_dsl.run("†state.x = bomb()\n", [bomb]))
    assert result.status == "failed" and _error(result, "c1") == "Result.TooLarge"
    assert peak < 64 << 20


def test_per_call_and_per_run_bounds_are_options():
    @sophon_dsl.tool(name="blob")
    def blob(n: int) -> str:
        return "z" * n

    plan = "†state.a = blob(n=400)\n†state.b = blob(n=400)\n†state.c = blob(n=400)\n"
    result = sophon_dsl.run(plan, [blob], max_run_result_bytes=1000)
    statuses = sorted(c.status for c in result.calls)
    assert statuses == ["failed", "succeeded", "succeeded"]
    assert "max_run_result_bytes" in next(c.error.cause for c in result.calls if c.error)
    result = sophon_dsl.run("†state.a = blob(n=5000)\n", [blob], max_result_bytes=1000)
    assert _error(result, "c1") == "Result.TooLarge"
    assert sophon_dsl.run(plan, [blob]).status == "succeeded"
