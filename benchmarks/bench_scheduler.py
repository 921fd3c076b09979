"""Scheduler benchmark (issues 3 and 9).

(a) Makespan on random 1,000-call DAGs of 1-50 ms async sleeps: ours vs the critical
    path (taken over the durations the tools really had, since asyncio rounds sleeps to
    its clock) vs Kahn-wave execution of the same durations (each wave waits for its
    slowest member).  Two graphs: issue 3's (0-3 parents among the 60 calls before,
    read through ``inputs=[...]``) and issue 9's (every call but the first reads 1-3
    parents through ``deps=[...]``, the ``random-list`` shape).  Target <= 1.03x.
(b) Framework overhead per call on 10,000 no-op async calls: wall time of one ``arun``
    divided by the number of calls, for the shapes of ``_shapes.py`` (wide, chain,
    random; random-list, random-obj, fanin, prefix; map: its calls are a map's items).
    The plan is built in Python, so loading is not included; checking, wiring, scheduling, events, the state log,
    validation and the result are.  "checked" starts from a Plan (compile + run, what
    ``run(plan)`` costs); "precompiled" passes a CompiledPlan whose checks are reused.
    Target <= 20 us/call, checked.
(c) The same no-op graphs as LangGraph StateGraphs (nodes = calls, edges =
    dependencies, async no-op nodes, one ``operator.add`` counter channel as the
    reducer so fan-out writes are legal and the state stays O(1)), run with
    ``ainvoke``; per-call overhead and the ratio to ours, in the same process.
    Skipped with a message when langgraph is not installed
    (``pip install -e '.[bench]'``).  If a LangGraph run would take over 60 s,
    the largest size from 10,000 / 5,000 / 2,000 / 1,000 predicted to finish
    in time is used for both sides, and the output says so.

``--old TREE`` runs instead: CPU time (``time.process_time``) per call of (b), checked and
precompiled, and of compiling alone, on this checkout and on ``TREE`` (a checkout of an
older commit, e.g. ``git worktree add /tmp/old REV``), beside the same graph run in bare
asyncio (``_shapes.floor``: issue 30 item 9's floor), in fresh processes alternated
``--rounds`` times, best of ``--repeat`` per process and best over the rounds, with the
ratios new / old (``--with-garbage``: each run timed together with a ``gc.collect()`` right
after it, the reference cycles it left for the process's collector).  CPU time is less
sensitive than wall time to the other core's load, but a whole process still runs slower now
and then: compare within one run.

``--scaling`` runs instead: ``arun`` (checked) at 1k / 10k / 100k calls (``--sizes``)
per shape, with the log-log slope between sizes (target <= 1.1) and the tracemalloc
peak during the run (the plan itself is built before tracing starts).

Every measurement has a time budget (``--budget``, seconds): sizes are climbed by
doubling from 125 calls and a size predicted to exceed the budget (from the last two
sizes' growth) is skipped, with a message.  Timings are the best of ``--repeat`` runs
(median also shown), each after a warm-up; the machine's load inflates wall time, so
compare within a run.

Run: python benchmarks/bench_scheduler.py [--calls 1000] [--noop 10000] [--seed 1]
        [--repeat 3] [--shapes all|old|new|wide,chain,...] [--parts abc] [--no-langgraph]
        [--budget 60] [--validate-input default|on|off]
     python benchmarks/bench_scheduler.py --scaling [--sizes 1k,10k,100k] [--no-memory]
     python benchmarks/bench_scheduler.py --old /tmp/old_tree [--rounds 3] [--repeat 3] [--shapes ...]
        [--with-garbage]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import operator
import os
import random
import statistics
import subprocess
import sys
import time
from typing import Annotated, Any, Callable, TypedDict

from _shapes import (ALL_SHAPES, SLOPE_TARGET, Ladder, Shape, build, climb, floor, noop, parse_shapes,
                     parse_sizes, random_parents, say, scaling_table, traced_peak)

from sophon_dsl.compiler import compile_plan
from sophon_dsl.model import Call, ListValue, Literal, OutputTarget, Param, Plan, Reference
from sophon_dsl.runtime import arun
from sophon_dsl.tools import tool

LANGGRAPH_BUDGET_S = 60.0
OVERHEAD_TARGET_US = 20.0
MAKESPAN_TARGET = 1.03
RUN_OPTIONS: dict[str, Any] = {}  # validate_input, from --validate-input


# ---------------------------------------------------------------------------
# (a) makespan


def issue3_dag(n: int, rng: random.Random, max_inputs: int = 3, window: int = 60) -> tuple[Plan, list[list[int]]]:
    """Issue 3's graph, unchanged so its figures stay comparable: 0-3 parents."""
    calls, parents = [], []
    for i in range(n):
        k = rng.randint(0, min(max_inputs, i))
        ps = sorted(rng.sample(range(max(0, i - window), i), min(k, i - max(0, i - window)))) if i else []
        parents.append(ps)
        inputs = ListValue(tuple(Reference("state", (f"n{j}",)) for j in ps))
        calls.append(Call("work", (Param("key", Literal(i)), Param("inputs", inputs)),
                          OutputTarget((Reference("state", (f"n{i}",)),))))
    return Plan(tuple(calls)), parents


def issue9_dag(n: int, rng: random.Random) -> tuple[Plan, list[list[int]]]:
    """Issue 9's graph: every call but the first reads 1-3 parents through ``deps=[...]``."""
    parents = random_parents(n, rng, 1, 3, 60)
    calls = []
    for i, ps in enumerate(parents):
        deps = ListValue(tuple(Reference("state", (f"n{j}",)) for j in ps))
        calls.append(Call("work", (Param("key", Literal(i)), Param("deps", deps)),
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


async def bench_makespan(label: str, plan: Plan, parents: list[list[int]], rng: random.Random) -> None:
    n = len(parents)
    sleep_for = [rng.uniform(0.001, 0.050) for _ in range(n)]
    started = [0.0] * n
    ended = [0.0] * n

    @tool(name="work")
    async def work(key: int, inputs: list | None = None, deps: Any = None) -> int:
        started[key] = time.perf_counter()
        await asyncio.sleep(sleep_for[key])
        ended[key] = time.perf_counter()
        return key

    t0 = time.perf_counter()
    result = await arun(plan, [work], **RUN_OPTIONS)
    wall = time.perf_counter() - t0
    assert result.status == "succeeded", result.status
    dur = [e - s for s, e in zip(started, ended)]
    cp = longest_path(parents, dur)
    kahn = kahn_waves(parents, dur)
    span = max(ended) - min(started)
    verdict = "meets" if span / cp <= MAKESPAN_TARGET else "MISSES"
    say(f"    {label}")
    say(f"      critical path (real durations) {cp * 1000:8.1f} ms")
    say(f"      ours: makespan                 {span * 1000:8.1f} ms  -> {span / cp:.3f}x critical path"
        f"  (wall incl. setup {wall * 1000:.1f} ms = {wall / cp:.3f}x)  {verdict} <= {MAKESPAN_TARGET}x")
    say(f"      Kahn waves, same durations     {kahn * 1000:8.1f} ms  -> {kahn / cp:.3f}x critical path")


def part_a(n: int, seed: int) -> None:
    say(f"(a) makespan, random DAGs of {n} calls of 1-50 ms (seed {seed})")
    rng = random.Random(seed)
    plan, parents = issue3_dag(n, rng)
    asyncio.run(bench_makespan("issue 3 graph: 0-3 parents, inputs=[...]", plan, parents, rng))
    rng = random.Random(seed)
    plan, parents = issue9_dag(n, rng)
    asyncio.run(bench_makespan("issue 9 graph: 1-3 parents, deps=[...] (random-list)", plan, parents, rng))


# ---------------------------------------------------------------------------
# (b) overhead


def run_checked(plan: Plan) -> None:
    r = asyncio.run(arun(plan, [noop], **RUN_OPTIONS))
    assert r.status == "succeeded", r.status


def run_precompiled(compiled: Any, input: Any = None) -> None:
    r = asyncio.run(arun(compiled, input=input, **RUN_OPTIONS))
    assert r.status == "succeeded", r.status


def run_shape(shape: Shape) -> None:
    """A checked run of ``shape`` (with its input: a map's items)."""
    r = asyncio.run(arun(shape.plan, [noop], input=shape.input, **RUN_OPTIONS))
    assert r.status == "succeeded", r.status


def timed(fn: Callable[[], object]) -> float:
    gc.collect()  # start each run from the same heap
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def checked_once(shape: str, seed: int) -> Callable[[int], float]:
    """Seconds of one checked run of ``shape`` at ``n`` calls (a fresh Plan each time, so
    nothing the runtime might remember about a plan object is reused)."""
    def once(n: int) -> float:
        s = build(shape, n, seed)
        return timed(lambda: run_shape(s))
    return once


def us(times: list[float], n: int) -> tuple[float, float]:
    return min(times) / n * 1e6, statistics.median(times) / n * 1e6


def overhead_row(shape: str, n: int, seed: int, repeat: int, budget: float) -> tuple[float, float] | None:
    """(best checked us/call, best precompiled us/call), or None when ``n`` does not fit."""
    run_shape(build(shape, 200, seed))  # warm-up
    ladder = Ladder(budget)
    once = checked_once(shape, seed)
    if not climb(ladder, n, once):
        m, t = ladder.points[-1]
        say(f"    {shape:<11} {n:,} calls {ladder.why_not(n)}; at {m:,} calls: {t / m * 1e6:,.1f} us/call")
        return None
    t_checked = [once(n) for _ in range(repeat)]
    t_pre = []
    for _ in range(repeat):
        s = build(shape, n, seed)
        compiled = compile_plan(s.plan, [noop])
        assert compiled.ok, compiled.diagnostics[:3]
        t_pre.append(timed(lambda: run_precompiled(compiled, s.input)))
    (cb, cm), (pb, pm) = us(t_checked, n), us(t_pre, n)
    verdict = "meets" if cb <= OVERHEAD_TARGET_US else "MISSES"
    say(f"    {shape:<11} {cb:8.1f} ({cm:7.1f})  {pb:8.1f} ({pm:7.1f})   {verdict}")
    return cb, pb


def part_b(shapes: list[str], n: int, seed: int, repeat: int, budget: float) -> dict[str, tuple[float, float]]:
    say(f"(b) overhead on {n:,} no-op async calls: wall time of arun / calls, best of {repeat} "
        f"(median); target <= {OVERHEAD_TARGET_US:g} us/call checked")
    say(f"    {'shape':<11} {'checked (median)':>19}  {'precompiled (median)':>20} target")
    out = {}
    for shape in shapes:
        row = overhead_row(shape, n, seed, repeat, budget)
        if row is not None:
            out[shape] = row
    return out


# ---------------------------------------------------------------------------
# (c) LangGraph


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


def part_c(shapes: list[str], n: int, seed: int, repeat: int, ours: dict, budget: float) -> None:
    try:
        import langgraph  # noqa: F401
    except ImportError:
        say("(c) LangGraph: not installed; skipped (pip install -e '.[bench]' or pip install langgraph)")
        return
    from importlib.metadata import version

    say(f"(c) LangGraph {version('langgraph')} on the same no-op graphs (async nodes, ainvoke; "
        f"build + compile + run, like ours 'checked')")
    for shape in shapes:
        size = n
        probe_n = min(n, 1000)
        probe = langgraph_once(build(shape, probe_n, seed).parents) / probe_n
        if probe * n > LANGGRAPH_BUDGET_S:
            fits = [s for s in (10000, 5000, 2000, 1000) if s <= n and probe * s <= LANGGRAPH_BUDGET_S]
            size = fits[0] if fits else probe_n
            say(f"    {shape}: {n} nodes would take ~{probe * n:.0f} s in LangGraph; using {size}")
        parents = build(shape, size, seed).parents
        times = [langgraph_once(parents) for _ in range(max(1, repeat if probe * size < 20 else 1))]
        lg = min(times) / size * 1e6
        if size == n and shape in ours:
            mine: float | None = ours[shape][0]
        else:
            row = overhead_row(shape, size, seed, repeat, budget)
            mine = row[0] if row else None
        if mine is None:
            say(f"    {shape:<11} LangGraph {lg:8.1f} us/call  vs ours: skipped (over budget; {size} calls)")
            continue
        say(f"    {shape:<11} LangGraph {lg:8.1f} us/call  vs ours (checked) {mine:6.1f} us/call"
            f"  -> ours has {lg / mine:5.1f}x less overhead ({size} calls)")


# ---------------------------------------------------------------------------
# --scaling


def scaling(shapes: list[str], sizes: list[int], seed: int, repeat: int, budget: float, memory: bool) -> None:
    say(f"--scaling: arun (checked, from a Plan) of no-op calls; slope = log-log growth between "
        f"sizes (target <= {SLOPE_TARGET}); budget {budget:g} s per measurement")
    run_checked(build("wide", 200, seed).plan)  # warm-up

    for shape in shapes:
        def peak(n: int, shape: str = shape) -> int:
            s = build(shape, n, seed)
            return traced_peak(lambda: run_shape(s))

        scaling_table(shape, sizes, budget, repeat, memory, checked_once(shape, seed), peak)


# ---------------------------------------------------------------------------
# --old: CPU time per call, this tree vs an older one


WITH_GARBAGE = [False]  # --with-garbage: the collection of what a run leaves is timed with it


def cpu_seconds(fn: Callable[[], object]) -> float:
    gc.collect()  # start each run from the same heap
    t0 = time.process_time()
    fn()
    if WITH_GARBAGE[0]:  # what the run left to the cyclic collector, which the process pays later
        gc.collect()
    return time.process_time() - t0


def cpu_rows(shapes: list[str], n: int, seed: int, repeat: int) -> dict[str, list[float]]:
    """{shape: [checked, precompiled, compile only, bare asyncio]} in CPU us per call, best
    of ``repeat`` (the floor: ``_shapes.floor``, the same graph in bare asyncio)."""
    run_checked(build("chain", 300, seed).plan)  # warm-up: imports, schemas
    out = {}
    for shape in shapes:
        best = [float("inf")] * 4
        for _ in range(repeat):
            s = build(shape, n, seed)
            best[0] = min(best[0], cpu_seconds(lambda: run_shape(s)))
            s = build(shape, n, seed)
            box: list[Any] = []
            best[2] = min(best[2], cpu_seconds(lambda: box.append(compile_plan(s.plan, [noop],
                                                                               require_implementations=True))))
            best[1] = min(best[1], cpu_seconds(lambda: run_precompiled(box[0], s.input)))
            best[3] = min(best[3], cpu_seconds(lambda: floor(s)))
        out[shape] = [t / n * 1e6 for t in best]
    return out


def compare_trees(old: str, shapes: list[str], n: int, seed: int, repeat: int, rounds: int,
                  garbage: bool = False) -> None:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    best: dict[str, dict[str, list[float]]] = {"new": {}, "old": {}}
    for _ in range(rounds):
        for name, tree in (("old", old), ("new", here)):  # this script measures both trees
            env = dict(os.environ, PYTHONPATH=tree)
            cmd = [sys.executable, os.path.abspath(__file__), "--cpu-child", "--shapes", ",".join(shapes),
                   "--noop", str(n), "--seed", str(seed), "--repeat", str(repeat)]
            if garbage:
                cmd.append("--with-garbage")
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            for shape, row in json.loads(proc.stdout.splitlines()[-1]).items():
                prev = best[name].get(shape, [float("inf")] * 4)
                best[name][shape] = [min(a, b) for a, b in zip(prev, row)]
    say(f"CPU us per call on {n:,} no-op calls, best of {repeat} runs x {rounds} alternated processes; "
        f"old = {old}; floor: the same graph in bare asyncio (both processes, best)"
        + ("; each run timed with the collection of the garbage it left" if garbage else ""))
    say(f"    {'shape':<11} {'checked old -> new':>24} {'precompiled old -> new':>26} {'compile old -> new':>24}"
        f" {'floor':>6} {'new/floor':>9}")
    for shape in shapes:
        o, w = best["old"][shape], best["new"][shape]
        cols = [f"{a:6.1f} -> {b:5.1f} ({b / a:.2f})" for a, b in zip(o, w)]
        fl = min(o[3], w[3])
        say(f"    {shape:<11} {cols[0]:>24} {cols[1]:>26} {cols[2]:>24} {fl:6.1f} {w[0] / fl:9.2f}")


# ---------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="makespan DAG size (a)")
    ap.add_argument("--noop", type=int, default=10000, help="no-op calls for (b) and (c)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="best of N (median also shown)")
    ap.add_argument("--shapes", default="all", help=f"comma-separated: {', '.join(ALL_SHAPES)}; "
                                                   "or all, old (issue 3's), new (issue 9's)")
    ap.add_argument("--parts", default="abc", help="which of (a) makespan, (b) overhead, (c) LangGraph")
    ap.add_argument("--no-langgraph", action="store_true", help="same as leaving c out of --parts")
    ap.add_argument("--budget", type=float, default=60.0,
                    help="seconds one measurement may take; larger sizes are skipped (default 60)")
    ap.add_argument("--validate-input", choices=("default", "on", "off"), default="default",
                    help="runtime input validation: the library's default (what run(plan) does), "
                         "forced on, or off (issue 3's published setting)")
    ap.add_argument("--scaling", action="store_true", help="time and memory at --sizes instead of (a)-(c)")
    ap.add_argument("--sizes", default="1k,10k,100k", help="--scaling sizes (default 1k,10k,100k)")
    ap.add_argument("--no-memory", action="store_true", help="--scaling without the tracemalloc run")
    ap.add_argument("--old", help="compare CPU time per call with this checkout of an older commit")
    ap.add_argument("--rounds", type=int, default=3, help="--old: alternated processes per tree")
    ap.add_argument("--with-garbage", action="store_true",
                    help="--old: time each run together with a gc.collect() right after it (the "
                         "reference cycles it left, which the process's collector pays later)")
    ap.add_argument("--cpu-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    shapes = parse_shapes(a.shapes)
    if a.validate_input != "default":
        RUN_OPTIONS["validate_input"] = a.validate_input == "on"
    say(f"python {sys.version.split()[0]}; input validation: {a.validate_input}; "
        f"budget {a.budget:g} s per measurement")
    WITH_GARBAGE[0] = a.with_garbage
    if a.cpu_child:  # one process of --old: JSON on the last line
        print(json.dumps(cpu_rows(shapes, a.noop, a.seed, a.repeat)))
        return
    if a.old:
        compare_trees(a.old, shapes, a.noop, a.seed, a.repeat, a.rounds, a.with_garbage)
        return
    if a.scaling:
        scaling(shapes, parse_sizes(a.sizes), a.seed, a.repeat, a.budget, not a.no_memory)
        return
    ours: dict[str, tuple[float, float]] = {}
    if "a" in a.parts:
        part_a(a.calls, a.seed)
    if "b" in a.parts:
        ours = part_b(shapes, a.noop, a.seed, a.repeat, a.budget)
    if "c" in a.parts:
        if a.no_langgraph:
            say("(c) LangGraph: skipped (--no-langgraph)")
        else:
            part_c(shapes, a.noop, a.seed, a.repeat, ours, a.budget)


if __name__ == "__main__":
    main()
