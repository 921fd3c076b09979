"""Scheduler benchmark (issue 3).

(a) Makespan on a random 1,000-call DAG of 1-50 ms async sleeps: ours vs the
    critical path (taken over the durations the tools really had, since asyncio
    rounds sleeps to its clock) vs Kahn-wave execution of the same durations
    (each wave waits for its slowest member).
(b) Framework overhead per call on 10,000 no-op async calls: total wall time of
    ``arun`` (loading nothing: the plan is built in Python; checking, wiring,
    scheduling, events, state log, output validation, result) divided by the
    number of calls, for three graph shapes:
      wide   - no dependencies at all (every call is ready at once),
      chain  - each call reads the previous call's output (one long path),
      random - each call reads at most one of the 20 calls before it.
    "checked" starts from a Plan (compile + run, what ``run(plan)`` costs);
    "precompiled" passes a CompiledPlan whose checks are reused (run only).
(c) The same no-op graphs as LangGraph StateGraphs (nodes = calls, edges =
    dependencies, async no-op nodes, one ``operator.add`` counter channel as the
    reducer so fan-out writes are legal and the state stays O(1)), run with
    ``ainvoke``; per-call overhead and the ratio to ours, in the same process.
    Skipped with a message when langgraph is not installed
    (``pip install -e '.[bench]'``).  If a LangGraph run would take over 60 s,
    the largest size from 10,000 / 5,000 / 2,000 / 1,000 predicted to finish
    in time is used for both sides, and the output says so.

Timings are the best of ``--repeat`` runs (default 3; median also shown), each
after a warm-up; the machine's load inflates wall time, so compare within a run.

Run: python benchmarks/bench_scheduler.py [--calls 1000] [--noop 10000] [--seed 1]
                                          [--repeat 3] [--shapes wide,chain,random]
                                          [--no-langgraph]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import operator
import random
import statistics
import time
from typing import Annotated, Callable, TypedDict

from sophon_dsl.compiler import compile_plan
from sophon_dsl.model import Call, Literal, ListValue, OutputTarget, Param, Plan, Reference
from sophon_dsl.runtime import arun
from sophon_dsl.tools import tool

LANGGRAPH_BUDGET_S = 60.0


def random_dag(n: int, rng: random.Random, max_inputs: int = 3, window: int = 60) -> tuple[Plan, list[list[int]]]:
    calls, parents = [], []
    for i in range(n):
        k = rng.randint(0, min(max_inputs, i))
        ps = sorted(rng.sample(range(max(0, i - window), i), min(k, i - max(0, i - window)))) if i else []
        parents.append(ps)
        calls.append(_call(i, ps))
    return Plan(tuple(calls)), parents


def _call(i: int, ps: list[int]) -> Call:
    inputs = ListValue(tuple(Reference("state", (f"n{j}",)) for j in ps))
    return Call("work", (Param("key", Literal(i)), Param("inputs", inputs)),
                OutputTarget((Reference("state", (f"n{i}",)),)))


def shape_dag(shape: str, n: int, seed: int) -> tuple[Plan, list[list[int]]]:
    if shape == "random":
        return random_dag(n, random.Random(seed), max_inputs=1, window=20)
    if shape == "wide":
        parents: list[list[int]] = [[] for _ in range(n)]
    elif shape == "chain":
        parents = [[i - 1] if i else [] for i in range(n)]
    else:
        raise ValueError(shape)
    return Plan(tuple(_call(i, ps) for i, ps in enumerate(parents))), parents


def longest_path(parents: list[list[int]], dur: list[float]) -> float:
    finish = [0.0] * len(parents)
    for i, ps in enumerate(parents):  # parents precede children
        finish[i] = max((finish[j] for j in ps), default=0.0) + dur[i]
    return max(finish, default=0.0)


def kahn_waves(parents: list[list[int]], dur: list[float]) -> float:
    level = [0] * len(parents)
    for i, ps in enumerate(parents):
        level[i] = max((level[j] + 1 for j in ps), default=0)
    waves: dict[int, float] = {}
    for i, lv in enumerate(level):
        waves[lv] = max(waves.get(lv, 0.0), dur[i])
    return sum(waves.values())


async def bench_makespan(n: int, seed: int) -> None:
    rng = random.Random(seed)
    plan, parents = random_dag(n, rng)
    sleep_for = [rng.uniform(0.001, 0.050) for _ in range(n)]
    started = [0.0] * n
    ended = [0.0] * n

    @tool(name="work")
    async def work(key: int, inputs: list) -> int:
        started[key] = time.perf_counter()
        await asyncio.sleep(sleep_for[key])
        ended[key] = time.perf_counter()
        return key

    t0 = time.perf_counter()
    result = await arun(plan, [work], validate_input=False)
    wall = time.perf_counter() - t0
    assert result.status == "succeeded", result.status
    dur = [e - s for s, e in zip(started, ended)]
    cp = longest_path(parents, dur)
    kahn = kahn_waves(parents, dur)
    span = max(ended) - min(started)
    print(f"(a) random DAG, {n} calls of 1-50 ms (seed {seed})")
    print(f"    critical path (real durations) {cp * 1000:8.1f} ms")
    print(f"    ours: makespan                 {span * 1000:8.1f} ms  -> {span / cp:.3f}x critical path"
          f"  (wall incl. setup {wall * 1000:.1f} ms = {wall / cp:.3f}x)")
    print(f"    Kahn waves, same durations     {kahn * 1000:8.1f} ms  -> {kahn / cp:.3f}x critical path")


@tool(name="work")
async def _noop(key: int, inputs: list) -> int:
    return key


def _timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        gc.collect()  # start each run from the same heap
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _fmt(times: list[float], n: int) -> str:
    best, med = min(times) / n * 1e6, statistics.median(times) / n * 1e6
    return f"{best:6.1f} us/call (median {med:.1f})"


def ours_overhead(shape: str, n: int, seed: int, repeat: int) -> tuple[float, float]:
    """(best checked us/call, best precompiled us/call) for ``arun`` on the no-op graph."""
    plan, _ = shape_dag(shape, n, seed)

    def checked() -> None:
        r = asyncio.run(arun(plan, [_noop], validate_input=False))
        assert r.status == "succeeded", r.status

    compiled = compile_plan(plan, [_noop])
    assert compiled.ok

    def precompiled() -> None:
        r = asyncio.run(arun(compiled, validate_input=False))
        assert r.status == "succeeded", r.status

    asyncio.run(arun(shape_dag(shape, 200, seed)[0], [_noop], validate_input=False))  # warm-up
    t_checked = _timed(checked, repeat)
    t_pre = _timed(precompiled, repeat)
    print(f"    {shape:<6} checked     {_fmt(t_checked, n)}   precompiled {_fmt(t_pre, n)}")
    return min(t_checked) / n * 1e6, min(t_pre) / n * 1e6


class _LGState(TypedDict):
    done: Annotated[int, operator.add]  # a counter: each node adds 1 (O(1) reducer)


def langgraph_app(parents: list[list[int]]):
    from langgraph.graph import START, StateGraph

    async def node(_state: _LGState) -> dict:
        return {"done": 1}

    g = StateGraph(_LGState)
    for i in range(len(parents)):
        g.add_node(f"n{i}", node)
    for i, ps in enumerate(parents):
        if ps:
            if len(ps) == 1:
                g.add_edge(f"n{ps[0]}", f"n{i}")
            else:
                g.add_edge([f"n{j}" for j in ps], f"n{i}")  # fan-in: wait for all
        else:
            g.add_edge(START, f"n{i}")
    return g.compile()


def langgraph_once(parents: list[list[int]]) -> float:
    """Wall time of building, compiling and running the graph once (the same scope as
    ours, whose time includes checking and wiring the plan)."""
    t0 = time.perf_counter()
    app = langgraph_app(parents)
    out = asyncio.run(app.ainvoke({"done": 0}, {"recursion_limit": len(parents) + 10}))
    wall = time.perf_counter() - t0
    assert out["done"] == len(parents), out
    return wall


def bench_langgraph(shapes: list[str], n: int, seed: int, repeat: int, ours: dict) -> None:
    try:
        import langgraph  # noqa: F401
    except ImportError:
        print("(c) LangGraph: not installed; skipped (pip install -e '.[bench]' or pip install langgraph)")
        return
    from importlib.metadata import version

    print(f"(c) LangGraph {version('langgraph')} on the same no-op graphs (async nodes, ainvoke; "
          f"build + compile + run, like ours 'checked')")
    for shape in shapes:
        size = n
        probe_n = min(n, 1000)
        probe = langgraph_once(shape_dag(shape, probe_n, seed)[1]) / probe_n
        if probe * n > LANGGRAPH_BUDGET_S:
            fits = [s for s in (10000, 5000, 2000, 1000) if s <= n and probe * s <= LANGGRAPH_BUDGET_S]
            size = fits[0] if fits else probe_n
            print(f"    {shape}: {n} nodes would take ~{probe * n:.0f} s in LangGraph; using {size}")
        parents = shape_dag(shape, size, seed)[1]
        times = [langgraph_once(parents) for _ in range(max(1, repeat if probe * size < 20 else 1))]
        lg = min(times) / size * 1e6
        mine = ours[shape][0] if size == n else ours_overhead(shape, size, seed, repeat)[0]
        print(f"    {shape:<6} LangGraph {lg:8.1f} us/call  vs ours (checked) {mine:6.1f} us/call"
              f"  -> ours has {lg / mine:5.1f}x less overhead ({size} calls)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--noop", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shapes", default="wide,chain,random")
    ap.add_argument("--no-langgraph", action="store_true")
    a = ap.parse_args()
    shapes = [s for s in a.shapes.split(",") if s]
    asyncio.run(bench_makespan(a.calls, a.seed))
    print(f"(b) overhead on {a.noop} no-op async calls: wall time of arun / calls, best of {a.repeat}")
    ours = {shape: ours_overhead(shape, a.noop, a.seed, a.repeat) for shape in shapes}
    if a.no_langgraph:
        print("(c) LangGraph: skipped (--no-langgraph)")
    else:
        bench_langgraph(shapes, a.noop, a.seed, a.repeat, ours)


if __name__ == "__main__":
    main()
