"""Map benchmark (issue 12): framework overhead per call of a map over N items.

A plan of one map over ``†input.items`` whose body is B no-op async calls (the first
reads the item, each next one the previous call's local result) runs with ``arun``;
the wall time divided by the number of calls (N x B body calls, plus the map) is the
overhead per call, the figure the runtime's per-call target (<= 20 us, see
docs/performance.md) is about.  Beside it, the same N x B calls written out flat (no
map: one chain of B per item, ids c1..), so the cost of expanding items at run time
is seen next to the cost of the same calls known in advance.

Run: python benchmarks/bench_map.py [--items 1000] [--body 1,2,3] [--repeat 5] [--concurrency 0]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time

from sophon_dsl.maps import make_map_call
from sophon_dsl.model import Call, MapSpec, OutputTarget, Param, Plan, Reference
from sophon_dsl.runtime import arun
from sophon_dsl.tools import tool


@tool
async def noop(x: object = None) -> int:
    return 1


def map_plan(body_len: int, concurrency: int | None) -> Plan:
    body = []
    for b in range(body_len):
        src = Reference("item") if b == 0 else Reference("local", (f"r{b - 1}",))
        body.append(Call("noop", (Param("x", src),), OutputTarget((Reference("local", (f"r{b}",)),))))
    spec = MapSpec(Reference("input", ("items",)), tuple(body), concurrency=concurrency)
    return Plan((make_map_call(spec, output=OutputTarget((Reference("state", ("out",)),))),))


def flat_plan(items: int, body_len: int) -> Plan:
    calls = []
    for k in range(items):
        for b in range(body_len):
            src = Reference("input", ("items", k)) if b == 0 else Reference("state", (f"i{k}", f"r{b - 1}"))
            calls.append(Call("noop", (Param("x", src),), OutputTarget((Reference("state", (f"i{k}", f"r{b}")),))))
    return Plan(tuple(calls))


def timed(plan: Plan, items: int, repeat: int) -> list[float]:
    data = {"items": list(range(items))}
    out = []
    asyncio.run(arun(plan, tools=[noop], input=data))  # warm-up
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        res = asyncio.run(arun(plan, tools=[noop], input=data))
        out.append(time.perf_counter() - t0)
        assert res.status == "succeeded", res.error
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--body", default="1,2,3")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=0, help="map concurrency (0: unlimited)")
    args = ap.parse_args()
    n = args.items
    print(f"{n} items; us per call (best / median of {args.repeat}); target <= 20 us")
    print(f"{'body':>5} {'map':>16} {'flat (same calls)':>20} {'map/flat':>9}")
    for b in (int(x) for x in args.body.split(",")):
        calls = n * b
        m = timed(map_plan(b, args.concurrency or None), n, args.repeat)
        f = timed(flat_plan(n, b), n, args.repeat)
        mb, mm = min(m) / (calls + 1) * 1e6, statistics.median(m) / (calls + 1) * 1e6
        fb, fm = min(f) / calls * 1e6, statistics.median(f) / calls * 1e6
        print(f"{b:>5} {mb:7.1f} / {mm:6.1f} {fb:10.1f} / {fm:6.1f} {mb / fb:9.2f}")


if __name__ == "__main__":
    main()
