"""Compile-only cost per call (issue 9: checks as rules), side by side with a git revision.

    python benchmarks/bench_compile.py [--calls 10000] [--repeat 5] [--shapes all]
                                       [--baseline REV]

For each plan shape of ``_shapes.py``: the best time of ``compile_plan(plan, tools)``
over ``--repeat`` runs, in microseconds per call.  With ``--baseline REV`` (a git
revision, e.g. ``HEAD~3``) the compiler of that revision is loaded from git next to the
current one and both are timed in the same process, alternating, so the ratio is
meaningful on a noisy machine.  Only ``sophon_dsl/compiler.py`` is taken from REV; it
must still import against the current tree.
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
import types
from pathlib import Path

from _shapes import build, noop, parse_shapes

import sophon_dsl
from sophon_dsl.compiler import compile_plan

ROOT = Path(__file__).resolve().parent.parent


def load_baseline(rev: str):
    """``compile_plan`` of ``sophon_dsl/compiler.py`` as it was at ``rev``."""
    source = subprocess.run(["git", "show", f"{rev}:sophon_dsl/compiler.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    name = "sophon_dsl._compiler_baseline"
    mod = types.ModuleType(name)
    mod.__package__ = "sophon_dsl"
    mod.__file__ = f"<{rev}:sophon_dsl/compiler.py>"
    sys.modules[name] = mod  # dataclasses look their module up while the class is made
    exec(compile(source, mod.__file__, "exec"), mod.__dict__)
    return mod.compile_plan


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--shapes", default="all")
    ap.add_argument("--baseline", default=None, help="git revision to compare with")
    args = ap.parse_args()
    tools = sophon_dsl.tools.as_registry([noop])
    old = load_baseline(args.baseline) if args.baseline else None
    n = args.calls
    head = f"{'shape':<12} {'us/call':>8}"
    if old:
        head += f" {args.baseline + ' us/call':>18} {'ratio':>6}"
    print(f"compile_plan, {n} calls, best of {args.repeat}")
    print(head)
    for shape in parse_shapes(args.shapes):
        plan = build(shape, n).plan
        compiled = compile_plan(plan, tools)
        assert not compiled.diagnostics, compiled.diagnostics[:3]
        if old is None:
            t = best(lambda: compile_plan(plan, tools), args.repeat)
            print(f"{shape:<12} {t / n * 1e6:8.2f}")
            continue
        now, then = [], []
        for _ in range(args.repeat):  # alternate, so drift hits both alike
            now.append(best(lambda: compile_plan(plan, tools), 1))
            then.append(best(lambda: old(plan, tools), 1))
        a, b = min(now), min(then)
        print(f"{shape:<12} {a / n * 1e6:8.2f} {b / n * 1e6:18.2f} {a / b:6.2f}")


if __name__ == "__main__":
    main()
