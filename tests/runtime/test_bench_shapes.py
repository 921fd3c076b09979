"""The benchmark shapes (``benchmarks/_shapes.py``) and their bare-asyncio floor run.

Issue 30 item 9 compares every shape's CPU per call with the same graph in bare asyncio:
both sides must run the graph they claim to (every call once, every result passed on), or
the figures in docs/performance.md compare different work.  No timings here.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import _shapes  # the benchmarks' own module, found through the path above

from sophon_dsl.runtime import arun

N = 40


@pytest.mark.parametrize("name", _shapes.ALL_SHAPES)
def test_every_shape_runs_once_per_call_in_the_runtime(name: str) -> None:
    shape = _shapes.build(name, N)
    result = asyncio.run(arun(shape.plan, [_shapes.noop], input=shape.input))
    assert result.status == "succeeded", result.error
    work = [r for r in result.calls if r.tool == _shapes.TOOL]
    assert len(work) == N  # (a map's items; the map call itself calls another tool)
    assert all(r.status == "succeeded" for r in work)


@pytest.mark.parametrize("name", _shapes.ALL_SHAPES)
def test_the_floor_calls_the_tool_once_per_call_with_its_parents_results(name: str) -> None:
    shape = _shapes.build(name, N)
    seen: list[tuple[int, object]] = []
    real = _shapes.noop.func

    async def counting(key: int, inputs: list | None = None, deps: object = None) -> int:
        seen.append((key, deps))
        return await real(key, inputs, deps)

    _shapes.floor(shape, counting)
    assert sorted(k for k, _ in seen) == (sorted(shape.input["items"]) if name == "map" else list(range(N)))
    if name != "map":
        args = dict(seen)
        for i, parents in enumerate(shape.parents):
            got = args[i]
            values = sorted(got.values()) if isinstance(got, dict) else sorted(got or [])
            assert values == sorted(parents)  # each parent's result (its key) passed on
