"""A finished run leaves nothing to the cyclic garbage collector (issue 30 item 9).

The scheduler, its run state, runner, input resolver, gate and map driver point at each
other; when those links outlived the run, its calls, records and data flow (~9 tracked
objects per call of a map) waited for the process's next full collection, which then
traversed them.  ``Scheduler.release`` drops the links when ``run`` / ``arun`` returns, so
reference counting frees them.  Read through ``gc.DEBUG_SAVEALL``: what a collection finds
unreachable is kept in ``gc.garbage`` instead of freed.  No timings here.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import _shapes  # the benchmarks' own module, found through the path above

from sophon_dsl.runtime import arun
from sophon_dsl.runtime.result import CallRecord

RUN_TYPES = {"Scheduler", "RunState", "CallRunner", "InputResolver", "MapDriver", "DataFlow", "CallRecord"}


def _garbage_after(run: object) -> set[str]:
    """Type names of what the cyclic collector finds unreachable after ``run()``."""
    gc.collect()
    was_on = gc.isenabled()
    gc.disable()  # (no collection in the middle: everything the run leaves is seen below)
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        found = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_on:
            gc.enable()
    return found


@pytest.mark.parametrize("name", ["map", "wide", "random-list", "prefix"])
def test_a_finished_run_leaves_no_cycle_holding_its_calls(name: str) -> None:
    shape = _shapes.build(name, 30)

    def run() -> None:
        result = asyncio.run(arun(shape.plan, [_shapes.noop], input=shape.input))
        assert result.status == "succeeded", result.error

    assert not (_garbage_after(run) & RUN_TYPES)


def test_the_result_keeps_its_records_after_the_release() -> None:
    shape = _shapes.build("map", 5)
    result = asyncio.run(arun(shape.plan, [_shapes.noop], input=shape.input))
    assert result.status == "succeeded"
    assert all(type(r) is CallRecord and r.status == "succeeded" for r in result.calls)
    assert len(result.calls) == 6  # the map call and its five items'
    assert [e.type for e in result.events].count("map_item_complete") == 5
