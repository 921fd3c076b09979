"""Parse + compile throughput (issue 1) and load + check scaling (issue 9).

    python benchmarks/bench_parse.py [--calls N] [--repeat R]
    python benchmarks/bench_parse.py --scaling [--sizes 1k,10k,100k] [--shapes all]
                                     [--forms dsl,yaml,json] [--budget 60] [--no-memory]
    python benchmarks/bench_parse.py --old TREE [--sizes 10k] [--shapes all] [--forms json]
                                     [--rounds 3] [--repeat 2]

Default: statements per second on a generated 10,000-call plan for DSL parse, DSL parse
+ compile, JSON load + compile, YAML load + compile, and the stdlib ``json.loads`` of
the same document as a floor.

``--scaling``: ``sophon_dsl.loads(text, form)`` + ``sophon_dsl.check(plan)`` for the
plan shapes of ``_shapes.py`` printed as DSL, YAML and JSON by ``sophon_dsl.dumps``, at
each size: best time, microseconds per call, the log-log slope to the previous size
(target <= 1.1), and the tracemalloc peak of one load + check, in all and per call
(target for JSON: <= 1.5 KB per call).  A form that refuses a plan (YAML's node cap
says 'alias bomb?' on large plans today) is reported with its diagnostic.  Sizes
predicted to exceed ``--budget`` seconds are skipped, with a message.  With YAML among
the forms, a last line says whether a YAML plan of the largest size loads at all (one
``sophon_dsl.load`` in a child process, stopped after twice the budget).

``--old TREE``: the same load + check on this checkout and on ``TREE`` (a checkout of an
older commit: ``git worktree add /tmp/old REV``), side by side: per shape, size and form,
fresh processes of the two trees alternated ``--rounds`` times; the tracemalloc peak per
call (first round) and the best CPU time (``time.process_time``) per call, old -> new with
the ratio.  The child imports each tree's own ``sophon_dsl`` and ``benchmarks/_shapes``, so
``TREE`` needs no option of this script.

Ratios matter more than absolute figures: machines are noisy.  Figures are recorded in
docs/performance.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from _shapes import ALL_SHAPES, Refused, build, noop, parse_shapes, parse_sizes, say, scaling_table, traced_peak

import sophon_dsl
from sophon_dsl import DiagnosticError, ToolSpec, dumps, loads
from sophon_dsl.compiler import compile_plan

TOOLS = [
    ToolSpec("web.search", input_schema={"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}),
    ToolSpec("summarize", input_schema={"type": "object", "properties": {
        "text": {}, "style": {"type": "string"}}, "required": ["text"]}),
    ToolSpec("merge", input_schema={"type": "object", "properties": {"a": {}, "b": {}}}),
]
FORMS = ("dsl", "yaml", "json")
JSON_BYTES_PER_CALL = 1.5 * 1024


def generate_dsl(n: int, seed: int = 7) -> str:
    """A plan of ``n`` calls, each reading up to two earlier outputs."""
    rng = random.Random(seed)
    lines = ['goal = "generated benchmark plan"']
    for i in range(n):
        kind = i % 3
        if kind == 0 or i < 2:
            lines.append(f'†state.r{i} = web.search(query="topic number {i}", limit={rng.randint(1, 9)})')
        elif kind == 1:
            j = rng.randrange(i)
            lines.append(f'†state.r{i} = summarize(text=†state.r{j}, style="short")')
        else:
            a, b = rng.randrange(i), rng.randrange(i)
            lines.append(f"†state.r{i} = merge(a=†state.r{a}, b=†state.r{b})")
    return "\n".join(lines) + "\n"


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def throughput(calls: int, repeat: int) -> None:
    dsl_text = generate_dsl(calls)
    plan = loads(dsl_text, "dsl")
    json_text = dumps(plan, "json")
    yaml_text = dumps(plan, "yaml")
    n = len(plan.calls)

    rows = []

    def bench(label: str, fn) -> None:
        seconds = best_of(fn, repeat)
        rows.append((label, seconds, n / seconds))

    bench("DSL parse", lambda: loads(dsl_text, "dsl"))
    bench("DSL parse + compile", lambda: compile_plan(loads(dsl_text, "dsl"), tools=TOOLS))
    bench("JSON load + compile", lambda: compile_plan(loads(json_text, "json"), tools=TOOLS))
    bench("YAML load + compile", lambda: compile_plan(loads(yaml_text, "yaml"), tools=TOOLS))
    bench("json.loads only (floor)", lambda: json.loads(json_text))

    base = rows[1][2]
    print(f"{n} calls, best of {repeat}")
    print(f"{'measurement':28} {'seconds':>9} {'stmts/s':>12} {'vs DSL+compile':>15}")
    for label, seconds, rate in rows:
        print(f"{label:28} {seconds:9.3f} {rate:12,.0f} {rate / base:14.2f}x")
    target = 6000
    verdict = "meets" if rows[1][2] >= target else "MISSES"
    print(f"DSL parse + compile {verdict} the target of {target:,} statements/s")


# ---------------------------------------------------------------------------
# --scaling


class Texts:
    """Plan text per (shape, size, form), printed once and kept for the repeats."""

    def __init__(self, seed: int):
        self.seed = seed
        self.key: tuple[str, int] | None = None
        self.texts: dict[str, str] = {}

    def get(self, shape: str, n: int, form: str) -> str:
        if self.key != (shape, n):
            self.key, self.texts = (shape, n), {}  # one size at a time: 100k texts are large
        if form not in self.texts:
            self.texts[form] = dumps(build(shape, n, self.seed).plan, form)
        return self.texts[form]


def load_and_check(text: str, form: str) -> None:
    try:
        plan = loads(text, form)
    except DiagnosticError as exc:
        first = exc.diagnostics[0]
        raise Refused(f"{first.code} {first.message} ({len(exc.diagnostics)} diagnostic(s))") from None
    errors = [d for d in sophon_dsl.check(plan, tools=[noop], stdlib=False) if d.is_error]
    if errors:
        raise Refused(f"check found {len(errors)} error(s), first {errors[0].code} {errors[0].message}")


YAML_PROBE = """
import json, sys, time
import sophon_dsl
t0 = time.perf_counter()
try:
    plan = sophon_dsl.load(sys.argv[1])
    out = {"calls": len(plan.calls)}
except sophon_dsl.DiagnosticError as exc:
    d = exc.diagnostics[0]
    out = {"code": d.code, "message": d.message, "line": d.span.line if d.span else None,
           "count": len(exc.diagnostics)}
out["seconds"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def yaml_loads_at_all(n: int, seed: int, limit: float) -> None:
    """Does a YAML plan of ``n`` calls load?  One ``sophon_dsl.load`` in a child process,
    stopped after ``limit`` seconds (today's loader needs about a minute to refuse it)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.yaml")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(dumps(build("wide", n, seed).plan, "yaml"))
        try:
            # cwd: ``python -c`` puts the working directory first on sys.path, and the
            # repository root would shadow the sophon_dsl this process imported
            proc = subprocess.run([sys.executable, "-c", YAML_PROBE, path], capture_output=True, text=True,
                                  timeout=limit, cwd=tmp)
        except subprocess.TimeoutExpired:
            say(f"  YAML of {n:,} calls (wide): did not finish within {limit:g} s (2x --budget); stopped")
            return
    if proc.returncode != 0:
        say(f"  YAML of {n:,} calls (wide): the loader crashed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        return
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    if "calls" in r:
        say(f"  YAML of {n:,} calls (wide): loads ({r['calls']:,} calls in {r['seconds']:.1f} s)")
    else:
        say(f"  YAML of {n:,} calls (wide): REFUSED after {r['seconds']:.1f} s with {r['count']} diagnostic(s), "
            f"first: {r['code']} {r['message']} (line {r['line']})")


def lift_source_limits(largest: int) -> None:
    """Plans over 100k calls may be over the readers' source bounds (issue 17: E007 past
    32 Mi characters or 2,000,000 lines); the scaling run measures cost, not the bound, so
    it lifts them in this process (and says so)."""
    from sophon_dsl.syntax import source_limits

    if largest > 100_000:
        source_limits.MAX_SOURCE_CHARS = source_limits.MAX_SOURCE_LINES = 1 << 40
        say("  (E007's source bounds lifted in this process: plans over 100k calls pass them)")


def scaling(shapes: list[str], forms: list[str], sizes: list[int], seed: int, repeat: int,
            budget: float, memory: bool) -> None:
    say(f"--scaling: sophon_dsl.loads + sophon_dsl.check of text printed by sophon_dsl.dumps; "
        f"slope = log-log growth between sizes (target <= 1.1); JSON peak target "
        f"<= {JSON_BYTES_PER_CALL / 1024:g} KB/call; budget {budget:g} s per measurement")
    lift_source_limits(max(sizes))
    texts = Texts(seed)
    load_and_check(dumps(build("random", 100, seed).plan, "dsl"), "dsl")  # warm-up: imports, parser

    for shape in shapes:
        for form in forms:
            def once(n: int, shape: str = shape, form: str = form) -> float:
                text = texts.get(shape, n, form)
                gc.collect()  # start each run from the same heap
                t0 = time.perf_counter()
                load_and_check(text, form)
                return time.perf_counter() - t0

            def peak(n: int, shape: str = shape, form: str = form) -> int:
                text = texts.get(shape, n, form)
                return traced_peak(lambda: load_and_check(text, form))

            scaling_table(f"{shape} / {form}", sizes, budget, repeat, memory, once, peak,
                          JSON_BYTES_PER_CALL if form == "json" else None)
    if "yaml" in forms:
        yaml_loads_at_all(max(sizes), seed, 2 * budget)


# --old: one tree's load + check in a fresh process (``python -c``, so any older checkout works)
SIDE_CHILD = """
import gc, json, sys, time
tree, shape, n, form, repeat, memory = (sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]),
                                        sys.argv[6] == "1")
sys.path[:0] = [tree, tree + "/benchmarks"]
import sophon_dsl
from _shapes import build, noop, traced_peak
assert sophon_dsl.__file__.startswith(tree), sophon_dsl.__file__
try:  # cost, not E007's bound (source_limits since session 11; json_source in older trees)
    from sophon_dsl.syntax import source_limits as limits
except ImportError:
    from sophon_dsl.syntax import json_source as limits
limits.MAX_SOURCE_CHARS = limits.MAX_SOURCE_LINES = 1 << 40
def once(text):
    plan = sophon_dsl.loads(text, form)
    sophon_dsl.check(plan, tools=[noop], stdlib=False)
once(sophon_dsl.dumps(build("random", 100, 1).plan, form))
text = sophon_dsl.dumps(build(shape, n, 1).plan, form)
peak = traced_peak(lambda: once(text)) if memory else None
best = float("inf")
for _ in range(repeat):
    gc.collect()
    t0 = time.process_time()
    once(text)
    best = min(best, time.process_time() - t0)
print(json.dumps({"peak": peak, "cpu": best}))
"""


def side_by_side(old: str, shapes: list[str], forms: list[str], sizes: list[int], rounds: int,
                 repeat: int, memory: bool) -> None:
    new = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    old = os.path.abspath(old)
    say(f"--old: load + check, this checkout ({new}) vs {old}; peak = tracemalloc per call, "
        f"CPU = best process_time per call over {rounds} alternated process pairs x {repeat}")
    say(f"  {'shape':12} {'form':5} {'calls':>8}  {'peak old -> new (KB/call)':>27}  {'CPU old -> new (us/call)':>28}")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            for form in forms:
                for n in sizes:
                    got: dict[str, dict] = {"old": {"cpu": float("inf")}, "new": {"cpu": float("inf")}}
                    for r in range(rounds):
                        for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                            tree = old if name == "old" else new
                            proc = subprocess.run([sys.executable, "-c", SIDE_CHILD, tree, shape, str(n), form,
                                                   str(repeat), "1" if memory and r == 0 else "0"],
                                                  capture_output=True, text=True, cwd=tmp)
                            if proc.returncode != 0:
                                raise SystemExit(f"{name} tree failed on {shape}/{form}/{n}:\n{proc.stderr[-2000:]}")
                            out = json.loads(proc.stdout.strip().splitlines()[-1])
                            if out["peak"] is not None:
                                got[name]["peak"] = out["peak"]
                            got[name]["cpu"] = min(got[name]["cpu"], out["cpu"])
                    o, w = got["old"], got["new"]
                    peak = (f"{o['peak'] / n / 1024:.3f} -> {w['peak'] / n / 1024:.3f} ({w['peak'] / o['peak']:.2f})"
                            if "peak" in o else "-")
                    cpu = f"{o['cpu'] / n * 1e6:.1f} -> {w['cpu'] / n * 1e6:.1f} ({w['cpu'] / o['cpu']:.2f})"
                    say(f"  {shape:12} {form:5} {n:>8,}  {peak:>27}  {cpu:>28}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scaling", action="store_true", help="load + check at --sizes, per shape and form")
    ap.add_argument("--sizes", default="1k,10k,100k")
    ap.add_argument("--shapes", default="all", help=f"comma-separated: {', '.join(ALL_SHAPES)}; "
                                                   "or all, old, new")
    ap.add_argument("--forms", default=",".join(FORMS), help="comma-separated: dsl, yaml, json")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget", type=float, default=60.0,
                    help="seconds one measurement may take; larger sizes are skipped (default 60)")
    ap.add_argument("--no-memory", action="store_true", help="--scaling without the tracemalloc run")
    ap.add_argument("--old", help="load + check side by side with this checkout of an older commit")
    ap.add_argument("--rounds", type=int, default=3, help="--old: alternated process pairs")
    args = ap.parse_args()
    if args.old:
        forms = [f.strip() for f in (args.forms if args.forms != ",".join(FORMS) else "json").split(",")]
        sizes = parse_sizes(args.sizes if args.sizes != "1k,10k,100k" else "10k")
        side_by_side(args.old, parse_shapes(args.shapes), forms, sizes, args.rounds, args.repeat,
                     not args.no_memory)
        return
    if not args.scaling:
        throughput(args.calls, args.repeat)
        return
    forms = [f.strip() for f in args.forms.split(",") if f.strip()]
    bad = [f for f in forms if f not in FORMS]
    if bad:
        raise SystemExit(f"unknown form(s) {', '.join(bad)}; expected {', '.join(FORMS)}")
    scaling(parse_shapes(args.shapes), forms, parse_sizes(args.sizes), args.seed, args.repeat,
            args.budget, not args.no_memory)


if __name__ == "__main__":
    main()
