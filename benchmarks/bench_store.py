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
    one commit in between: the call's completion, with its dependent's intent when that is
    not idempotent), with a store minus without.  Target <= 0.5 ms.
(d) Resume of a finished K-call run (every call committed: the log and the records come
    back, nothing runs).  Target <= 1 s for 10,000 calls (wall time; the process CPU beside it).

``--postgres URL`` adds (b)-(d) against a PostgreSQL database (``--postgres initdb``: a
throwaway local server with its default settings, fsync on, started for the run; with
``--old``, one server for both trees).  Best of ``--repeat``.

``--old TREE`` measures (b) and (c) on SQLite (and PostgreSQL with ``--postgres``) in this tree and in a
checkout of an older commit, in fresh processes alternated ``--rounds`` times, and prints them side by side
(ratios new / old: the machine's other load moves both).

Run: python benchmarks/bench_store.py [--calls 10000] [--chain 500] [--resume 10000] [--repeat 3]
        [--sync NORMAL|FULL] [--postgres postgresql://...|initdb]
     python benchmarks/bench_store.py --old /tmp/old_tree [--rounds 3] [--calls 10000] [--chain 500]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
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


def measure_b(n: int, repeat: int, open_store: Any) -> dict[str, tuple]:
    """{label: (added CPU us/call, added event-loop us/call, writer us/call, wall us/call, transactions)}."""
    plan = build("wide", n).plan
    base, _, _, base_loop = _best(repeat, lambda: _run(plan, [work]))
    out = {}
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
        out[label] = ((cpu - base) / n * 1e6, (loop - base_loop) / n * 1e6, in_writer / n * 1e6,
                      wall / n * 1e6, batches)
    return out


def part_b(n: int, repeat: int, open_store: Any) -> None:
    for label, (added, loop, writer, wall, batches) in measure_b(n, repeat, open_store).items():
        say(f"(b) wide {n:,}, {label}: +{added:.1f} us CPU/call (target <= 30; event loop "
            f"+{loop:.1f}, writer thread {writer:.1f}), "
            f"{wall:.1f} us/call wall, {batches:,} transactions for {repeat * n:,} calls")


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


def measure_c(m: int, repeat: int, open_store: Any) -> dict[str, tuple]:
    """{label: (added ms per edge at the median, p90 ms)}."""
    plan = _chain(m)
    base = statistics.median(min((_edge_gaps(_run(plan, [work])[2]) for _ in range(repeat)),
                                 key=statistics.median))
    out = {}
    for label, tools in (("not idempotent", [work]), ("idempotent", [work_idem])):
        store = open_store()
        try:
            gaps = min((_edge_gaps(_run(plan, tools, store)[2]) for _ in range(repeat)), key=statistics.median)
        finally:
            store.close()
        out[label] = ((statistics.median(gaps) - base) * 1e3, sorted(gaps)[int(len(gaps) * 0.9)] * 1e3)
    return out


def part_c(m: int, repeat: int, open_store: Any) -> None:
    for label, (added, p90) in measure_c(m, repeat, open_store).items():
        say(f"(c) chain {m:,}, {label}: +{added:.3f} ms per edge at the median (target <= 0.5); "
            f"p90 {p90:.3f} ms")


# --old: (b) and (c) on SQLite, this tree vs an older one, in alternated fresh processes


def compare_trees(old: str, a: argparse.Namespace) -> None:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    best: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for _ in range(a.rounds):
        for name, tree in (("old", old), ("new", here)):
            env = dict(os.environ, PYTHONPATH=tree)
            cmd = [sys.executable, os.path.abspath(__file__), "--child", "--calls", str(a.calls),
                   "--chain", str(a.chain), "--repeat", str(a.repeat), "--sync", a.sync]
            if a.postgres:
                cmd += ["--postgres", a.postgres]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            for key, value in json.loads(proc.stdout.splitlines()[-1]).items():
                best[name][key] = min(best[name].get(key, float("inf")), value)
    say(f"SQLite {a.sync}{' and PostgreSQL' if a.postgres else ''}, best of {a.repeat} runs x {a.rounds} "
        f"alternated processes; old = {old}")
    for key in best["new"]:
        o, w = best["old"].get(key), best["new"][key]
        if o is None:
            say(f"    {key:<58} new {w:7.3f}")
        else:
            say(f"    {key:<58} {o:7.3f} -> {w:7.3f}  ({w / o:.2f})" if o > 0
                else f"    {key:<58} {o:7.3f} -> {w:7.3f}")


def child(a: argparse.Namespace) -> None:
    """One process of --old: the figures as JSON on the last line."""
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(10**6))

        def opener() -> Any:
            return _sqlite(tmp, f"b{next(counter)}.db", a.sync)

        row = {}
        targets = [("", opener)]
        if a.postgres:
            targets.append(("PG ", lambda: sophon_dsl.open_store(a.postgres)))
        for name, open_store in targets:
            for label, (added, loop, _writer, _, _) in measure_b(a.calls, a.repeat, open_store).items():
                row[f"{name}(b) {label}: +us CPU/call"] = added
                row[f"{name}(b) {label}: +us event loop/call"] = loop
            for label, (added, _) in measure_c(a.chain, a.repeat, open_store).items():
                row[f"{name}(c) {label}: +ms per edge (median)"] = added
    print(json.dumps(row))


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
    ap.add_argument("--postgres", default=None, metavar="URL",
                    help="also measure a PostgreSQL store at URL ('initdb': start a throwaway local server)")
    ap.add_argument("--old", default=None, metavar="TREE",
                    help="compare (b) and (c) with a checkout of an older commit (git worktree add /tmp/old REV)")
    ap.add_argument("--rounds", type=int, default=3, help="--old: alternated processes per tree")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return 0
    if args.postgres == "initdb":
        from _pgserver import start

        args.postgres = start()
        say(f"PostgreSQL: a throwaway server at {args.postgres} (initdb, default settings)")
    if args.old:
        compare_trees(args.old, args)
        return 0
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
