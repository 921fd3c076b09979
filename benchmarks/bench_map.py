"""Map benchmark (issue 12): framework overhead per call of a map over N items.

A plan of one map over ``†input.items`` whose body is B no-op async calls (the first
reads the item, each next one the previous call's local result) runs with ``arun``;
the CPU time (``time.process_time``) of the run divided by the number of calls (N x B
body calls) is the overhead per call, the figure the runtime's per-call target (<= 20 us,
see docs/performance.md) is about.  Beside it, the same N x B calls written out flat (no
map: one chain of B per item), checked (``arun(plan)``, what a map's run is compared
with: it too starts from a plan) and precompiled (a ``CompiledPlan``: the loop alone), so
the cost of expanding items at run time is seen next to the same calls known in advance.
``--concurrency`` limits the map's items in flight (0: unlimited).  ``--objects`` makes the
items small objects (``{"id", "text", "tags"}``) instead of integers: what copying an item
costs shows there; ``--field`` (with object items) makes the first body call read the item's
``text`` (``†item.text``, flat: ``†input.items[k].text``) instead of the whole item.

``--old PATH`` compares two trees: each round runs the measurement once in a fresh
process for this tree and once for the tree at PATH (a ``git worktree`` of an older
commit), alternating, and the table shows the best of all rounds for each and the ratio
new / old.  The machine is shared, so compare within one run.

Run: python benchmarks/bench_map.py [--items 1000] [--body 1,2,3] [--concurrency 0,8]
        [--objects] [--field] [--repeat 5] [--rounds 3] [--old /tmp/old_tree]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time

from sophon_dsl.maps import make_map_call
from sophon_dsl.model import Call, MapSpec, OutputTarget, Param, Plan, Reference
from sophon_dsl.runtime import arun
from sophon_dsl.tools import tool


@tool
async def noop(x: object = None) -> int:
    return 1


def map_plan(body_len: int, concurrency: int | None, field: bool = False) -> Plan:
    body = []
    for b in range(body_len):
        src = Reference("item", ("text",) if field else ()) if b == 0 else Reference("local", (f"r{b - 1}",))
        body.append(Call("noop", (Param("x", src),), OutputTarget((Reference("local", (f"r{b}",)),))))
    spec = MapSpec(Reference("input", ("items",)), tuple(body), concurrency=concurrency)
    return Plan((make_map_call(spec, output=OutputTarget((Reference("state", ("out",)),))),))


def flat_plan(items: int, body_len: int, field: bool = False) -> Plan:
    calls = []
    for k in range(items):
        for b in range(body_len):
            src = (Reference("input", ("items", k, *(("text",) if field else ()))) if b == 0
                   else Reference("state", (f"i{k}", f"r{b - 1}")))
            calls.append(Call("noop", (Param("x", src),), OutputTarget((Reference("state", (f"i{k}", f"r{b}")),))))
    return Plan(tuple(calls))


def item_values(items: int, objects: bool) -> list:
    if not objects:
        return list(range(items))
    return [{"id": k, "text": f"item number {k}", "tags": ["a", "b"]} for k in range(items)]


def cpu_per_call(plan: object, items: int, calls: int, repeat: int, objects: bool = False) -> float:
    """Best CPU time per call (us) of ``repeat`` runs, after a warm-up run."""
    data = {"items": item_values(items, objects)}
    asyncio.run(arun(plan, tools=[noop], input=data))
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        res = asyncio.run(arun(plan, tools=[noop], input=data))
        best = min(best, time.process_time() - t0)
        assert res.status == "succeeded", res.error
    return best / calls * 1e6


def measure(items: int, bodies: list[int], limits: list[int], repeat: int, objects: bool,
            field: bool = False) -> dict[str, float]:
    """Every row of the table in this process: ``{row name: us per call}``."""
    from sophon_dsl.compiler import compile_plan

    out = {}
    for b in bodies:
        calls = items * b
        for c in limits:
            out[f"map body={b} concurrency={c or 'all'}"] = cpu_per_call(map_plan(b, c or None, field), items,
                                                                          calls, repeat, objects)
        flat = flat_plan(items, b, field)
        out[f"flat body={b} checked"] = cpu_per_call(flat, items, calls, repeat, objects)
        out[f"flat body={b} precompiled"] = cpu_per_call(compile_plan(flat, tools=[noop]), items, calls, repeat,
                                                         objects)
    return out


def in_tree(tree: str, argv: list[str]) -> dict[str, float]:
    """:func:`measure` run in a fresh process on the sources at ``tree``."""
    env = dict(os.environ, PYTHONPATH=tree)  # (this script measures both: the old one may lack --json)
    done = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--json"], env=env, cwd=tree,
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the measurement in {tree} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--body", default="1,2,3")
    ap.add_argument("--concurrency", default="0", help="map concurrency limits, comma-separated (0: unlimited)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="with --old: alternated rounds")
    ap.add_argument("--old", help="a checkout of an older commit to compare with")
    ap.add_argument("--objects", action="store_true", help="items are small objects, not integers")
    ap.add_argument("--field", action="store_true", help="the body reads the item's text field (implies --objects)")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args()
    args.objects = args.objects or args.field
    bodies = [int(x) for x in args.body.split(",")]
    limits = [int(x) for x in args.concurrency.split(",")]
    if args.json:
        print(json.dumps(measure(args.items, bodies, limits, args.repeat, args.objects, args.field)))
        return
    print(f"{args.items} {'object' if args.objects else 'integer'} items{' (a field read)' if args.field else ''}; "
          f"CPU us per call, best of {args.repeat}; target <= 20 us")
    if not args.old:
        for name, us in measure(args.items, bodies, limits, args.repeat, args.objects, args.field).items():
            print(f"{name:38} {us:7.1f}")
        return
    argv = ["--items", str(args.items), "--body", args.body, "--concurrency", args.concurrency,
            "--repeat", str(args.repeat), *(["--objects"] if args.objects else []),
            *(["--field"] if args.field else [])]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    new: dict[str, float] = {}
    old: dict[str, float] = {}
    for _ in range(args.rounds):
        for tree, best in ((here, new), (args.old, old)):
            for name, us in in_tree(tree, argv).items():
                best[name] = min(best.get(name, us), us)
    print(f"best of {args.rounds} alternated rounds; old = {args.old}")
    print(f"{'':38} {'old':>7} {'new':>7} {'new/old':>8}")
    for name, us in new.items():
        was = old.get(name)
        ratio = f"{us / was:8.2f}" if was else ""
        print(f"{name:38} {was if was is not None else float('nan'):7.1f} {us:7.1f} {ratio}")


if __name__ == "__main__":
    main()
