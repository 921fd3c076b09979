"""Durable-run benchmark (issue 13): what recording a run in a store costs.

(a) No store: wall time per call of ``arun`` on N no-op calls (wide), the number to
    compare with the same figure of the previous commit (bench_scheduler part b is the
    issue's 2% gate; this is the quick look).
(b) SQLite, synchronous NORMAL, wide plan of N no-op calls: process CPU time (the writer
    thread included) with a store minus without, per call.  Tools that are not idempotent
    commit an intent before they start (two transactions per call), idempotent ones one;
    group commit batches the completions that end together.  Target <= 30 us per call.
    Also split by thread: the event loop's (``time.thread_time``, with minus without) and
    the store's writer thread.
(c) SQLite NORMAL, chain of M calls: added latency per dependency edge, at the median: for
    each edge, the time from a call's end to its dependent's start (the barrier waits for
    the commit in between), with a store minus without.  Target <= 0.5 ms.
(d) Resume of a finished K-call run (every call committed: the log and the records come
    back, nothing runs).  Target <= 1 s for 10,000 calls (wall time; the process CPU beside it).

``--postgres URL`` adds (b)-(d) against a PostgreSQL database.  Best of ``--repeat``.

Run: python benchmarks/bench_store.py [--calls 10000] [--chain 500] [--resume 10000] [--repeat 3]
        [--sync NORMAL|FULL] [--postgres postgresql://...]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from _shapes import build, say

import sophon_dsl
from sophon_dsl.model import Call, Literal, OutputTarget, Param, Plan, Reference
from sophon_dsl.runtime import arun
from sophon_dsl.tools import tool


@tool(name="work")
async def work(key: int, inputs: list | None = None, deps: Any = None) -> int:
    return key


@tool(name="work", idempotent=True)
async def work_idem(key: int, inputs: list | None = None, deps: Any = None) -> int:
    return key


def _run(plan: Plan, tools: list, store: Any = None) -> tuple[float, float, Any, float]:
    """Process CPU, wall time, the result, and the CPU of this (the event loop's) thread."""
    gc.collect()
    c0, w0, t0 = time.process_time(), time.perf_counter(), time.thread_time()
    result = asyncio.run(arun(plan, tools, store=store) if store is not None else arun(plan, tools))
    return time.process_time() - c0, time.perf_counter() - w0, result, time.thread_time() - t0


def _timed_writer(store: Any) -> list:
    """Count the CPU time of the store's writer thread in the returned one-item list."""
    spent = [0.0]
    run_batch = store._run_batch

    def timed(conn: Any, batch: list) -> None:
        t0 = time.thread_time()
        run_batch(conn, batch)
        spent[0] += time.thread_time() - t0

    store._run_batch = timed
    return spent


def _best(n: int, fn) -> tuple:
    runs = [fn() for _ in range(n)]
    return min(runs, key=lambda r: r[0])


def _sqlite(tmp: str, name: str, sync: str) -> Any:
    return sophon_dsl.open_store(f"sqlite:///{os.path.join(tmp, name)}?synchronous={sync}")


def part_a(n: int, repeat: int) -> None:
    plan = build("wide", n).plan
    cpu, wall, _, _ = _best(repeat, lambda: _run(plan, [work]))
    say(f"(a) no store, wide {n:,}: {wall / n * 1e6:.1f} us/call wall, {cpu / n * 1e6:.1f} us/call CPU")


def part_b(n: int, repeat: int, open_store: Any) -> None:
    plan = build("wide", n).plan
    base, _, _, base_loop = _best(repeat, lambda: _run(plan, [work]))
    for label, tools in (("not idempotent (intent + completion)", [work]), ("idempotent (completion)", [work_idem])):
        store = open_store()
        writer = _timed_writer(store)

        def one() -> tuple:
            writer[0] = 0.0
            return (*_run(plan, tools, store), writer[0])

        try:
            cpu, wall, result, loop, in_writer = _best(repeat, one)
            batches = store.transactions
        finally:
            store.close()
        assert result.ok
        added = (cpu - base) / n * 1e6
        say(f"(b) wide {n:,}, {label}: +{added:.1f} us CPU/call (target <= 30; event loop "
            f"+{(loop - base_loop) / n * 1e6:.1f}, writer thread {in_writer / n * 1e6:.1f}), "
            f"{wall / n * 1e6:.1f} us/call wall, {batches:,} transactions for {repeat * n:,} calls")


def _chain(m: int) -> Plan:
    calls = []
    for i in range(m):
        value = Reference("state", (f"n{i - 1}",)) if i else Literal(0)
        calls.append(Call("work", (Param("key", Literal(i)), Param("deps", value)),
                          OutputTarget((Reference("state", (f"n{i}",)),))))
    return Plan(tuple(calls))


def _edge_gaps(result: Any) -> list[float]:
    recs = result.calls
    return [recs[i + 1].started - recs[i].ended for i in range(len(recs) - 1)]


def part_c(m: int, repeat: int, open_store: Any) -> None:
    plan = _chain(m)
    base = statistics.median(min((_edge_gaps(_run(plan, [work])[2]) for _ in range(repeat)),
                                 key=statistics.median))
    for label, tools in (("not idempotent", [work]), ("idempotent", [work_idem])):
        store = open_store()
        try:
            gaps = min((_edge_gaps(_run(plan, tools, store)[2]) for _ in range(repeat)), key=statistics.median)
        finally:
            store.close()
        added = (statistics.median(gaps) - base) * 1e3
        say(f"(c) chain {m:,}, {label}: +{added:.3f} ms per edge at the median (target <= 0.5); "
            f"p90 {sorted(gaps)[int(len(gaps) * 0.9)] * 1e3:.3f} ms")


def part_d(k: int, repeat: int, open_store: Any) -> None:
    plan = build("wide", k).plan
    store = open_store()
    try:
        result = _run(plan, [work], store)[2]
        times, cpus = [], []
        for _ in range(repeat):
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            again = sophon_dsl.resume(result.run_id, store=store, tools=[work])
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            assert again.ok and again.state == result.state
    finally:
        store.close()
    say(f"(d) resume of a finished {k:,}-call run: {min(times):.3f} s (target <= 1 s), CPU {min(cpus):.3f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--chain", type=int, default=500)
    ap.add_argument("--resume", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sync", default="NORMAL", choices=("NORMAL", "FULL"))
    ap.add_argument("--postgres", default=None, metavar="URL")
    args = ap.parse_args(argv)
    say(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    part_a(args.calls, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(10**6))
        targets = [(f"SQLite {args.sync}", lambda: _sqlite(tmp, f"b{next(counter)}.db", args.sync))]
        if args.postgres:
            targets.append(("PostgreSQL", lambda: sophon_dsl.open_store(args.postgres)))
        for name, opener in targets:
            say(f"-- {name}")
            part_b(args.calls, args.repeat, opener)
            part_c(args.chain, args.repeat, opener)
            part_d(args.resume, args.repeat, opener)
    return 0


if __name__ == "__main__":
    sys.exit(main())
