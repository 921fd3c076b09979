"""``sophon-dsl graph PLAN``: the plan's data-flow graph as Mermaid, Graphviz dot or JSON."""

from __future__ import annotations

import argparse
import json

from .common import EXIT_FAIL, EXIT_OK, print_diagnostics, read_valid_plan
from .registry import registry_for


def run(args: argparse.Namespace) -> int:
    from .. import graph
    from ..compiler import compile_plan

    plan = read_valid_plan(args)
    if plan is None:
        return EXIT_FAIL
    registry, _ = registry_for(args)
    compiled = compile_plan(plan, tools=registry)
    render = {"mermaid": graph.to_mermaid, "dot": graph.to_dot, "json": graph.to_json}[args.format]
    out = render(compiled)
    if not isinstance(out, str):
        out = json.dumps(out, ensure_ascii=False, indent=2)
    print(out)
    cycles = [d for d in compiled.diagnostics if d.code == "E302"]
    if cycles:
        print_diagnostics(cycles, {plan.file or "": plan.source or ""}, False)
        return EXIT_FAIL
    return EXIT_OK
