"""Scheduler benchmark (issue 3).

(a) Makespan on a random 1,000-call DAG of 1-50 ms async sleeps: ours vs the
    critical path (taken over the durations the tools really had, since asyncio
    rounds sleeps to its clock) vs Kahn-wave execution of the same durations
    (each wave waits for its slowest member).
(b) Framework overhead per call on 10,000 no-op calls.
(c) LangGraph on the same no-op graph, if langgraph is importable.

Run: python benchmarks/bench_scheduler.py [--calls 1000] [--noop 10000] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from sophon_dsl.model import Call, Literal, ListValue, OutputTarget, Param, Plan, Reference
from sophon_dsl.runtime import arun
from sophon_dsl.tools import tool


def random_dag(n: int, rng: random.Random, max_inputs: int = 3, window: int = 60) -> tuple[Plan, list[list[int]]]:
    calls, parents = [], []
    for i in range(n):
        k = rng.randint(0, min(max_inputs, i))
        ps = sorted(rng.sample(range(max(0, i - window), i), min(k, i - max(0, i - window)))) if i else []
        parents.append(ps)
        inputs = ListValue(tuple(Reference("state", (f"n{j}",)) for j in ps))
        calls.append(Call("work", (Param("key", Literal(i)), Param("inputs", inputs)),
                          OutputTarget((Reference("state", (f"n{i}",)),))))
    return Plan(tuple(calls)), parents


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


async def bench_overhead(n: int, seed: int) -> float:
    rng = random.Random(seed)
    plan, _ = random_dag(n, rng, max_inputs=1, window=20)

    @tool(name="work")
    async def work(key: int, inputs: list) -> int:
        return key

    await arun(random_dag(100, rng, 1)[0], [work], validate_input=False)  # warm-up
    t0 = time.perf_counter()
    result = await arun(plan, [work], validate_input=False)
    wall = time.perf_counter() - t0
    assert result.status == "succeeded"
    per = wall / n * 1e6
    print(f"(b) overhead: {n} no-op calls in {wall * 1000:.1f} ms -> {per:.1f} us per call "
          "(includes checking, events, log, output validation)")
    return per


def bench_langgraph(n: int, seed: int, ours_per_call: float) -> None:
    try:
        import langgraph  # noqa: F401
    except ImportError:
        print("(c) LangGraph: not installed (pip install langgraph to compare); skipped")
        return
    from typing import Annotated, TypedDict
    import operator

    from langgraph.graph import END, START, StateGraph

    rng = random.Random(seed)
    _, parents = random_dag(n, rng, max_inputs=1, window=20)

    class S(TypedDict):
        done: Annotated[list, operator.add]

    g = StateGraph(S)
    for i in range(n):
        g.add_node(f"n{i}", lambda s, i=i: {"done": [i]})
    for i, ps in enumerate(parents):
        if ps:
            for j in ps:
                g.add_edge(f"n{j}", f"n{i}")
        else:
            g.add_edge(START, f"n{i}")
    app = g.compile()
    t0 = time.perf_counter()
    app.invoke({"done": []}, {"recursion_limit": n + 10})
    wall = time.perf_counter() - t0
    per = wall / n * 1e6
    print(f"(c) LangGraph: {per:.1f} us per call -> ours is {per / ours_per_call:.1f}x less overhead")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--noop", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    asyncio.run(bench_makespan(a.calls, a.seed))
    per = asyncio.run(bench_overhead(a.noop, a.seed))
    bench_langgraph(a.noop, a.seed, per)


if __name__ == "__main__":
    main()
