"""Parse + compile throughput on a generated 10,000-call plan, in all three forms, in one run.

    python benchmarks/bench_parse.py [--calls N] [--repeat R]

Prints statements per second for: DSL parse, DSL parse + compile, JSON load (with
positions) + compile, YAML load + compile, and the stdlib ``json.loads`` of the same
document as a floor. Ratios matter more than absolute figures: machines are noisy.
Figures are recorded in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from sophon_dsl.compiler import compile_plan
from sophon_dsl.loader import dumps, parse
from sophon_dsl.tools import ToolSpec

TOOLS = [
    ToolSpec("web.search", input_schema={"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}),
    ToolSpec("summarize", input_schema={"type": "object", "properties": {
        "text": {}, "style": {"type": "string"}}, "required": ["text"]}),
    ToolSpec("merge", input_schema={"type": "object", "properties": {"a": {}, "b": {}}}),
]


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    dsl_text = generate_dsl(args.calls)
    plan = parse(dsl_text, "dsl").plan
    json_text = dumps(plan, "json")
    yaml_text = dumps(plan, "yaml")
    n = len(plan.calls)

    rows = []

    def bench(label: str, fn) -> None:
        seconds = best_of(fn, args.repeat)
        rows.append((label, seconds, n / seconds))

    bench("DSL parse", lambda: parse(dsl_text, "dsl"))
    bench("DSL parse + compile", lambda: compile_plan(parse(dsl_text, "dsl").plan, tools=TOOLS))
    bench("JSON load + compile", lambda: compile_plan(parse(json_text, "json").plan, tools=TOOLS))
    bench("YAML load + compile", lambda: compile_plan(parse(yaml_text, "yaml").plan, tools=TOOLS))
    bench("json.loads only (floor)", lambda: json.loads(json_text))

    base = rows[1][2]
    print(f"{n} calls, best of {args.repeat}")
    print(f"{'measurement':28} {'seconds':>9} {'stmts/s':>12} {'vs DSL+compile':>15}")
    for label, seconds, rate in rows:
        print(f"{label:28} {seconds:9.3f} {rate:12,.0f} {rate / base:14.2f}x")
    target = 6000
    verdict = "meets" if rows[1][2] >= target else "MISSES"
    print(f"DSL parse + compile {verdict} the target of {target:,} statements/s")


if __name__ == "__main__":
    main()
