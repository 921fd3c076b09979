"""``sophon-dsl graph PLAN...``: data-flow graphs as Mermaid, Graphviz dot or JSON.

One plan prints one graph; several print one graph each, in turn, each naming its file in
a comment line (``%% FILE``, ``// FILE``; JSON: a list of the graphs, each with its ``file``).
A directory stands for the DSL plan files under it (``common.plan_files``) and always gives the
several-plan form, however many it holds."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from .common import EXIT_FAIL, EXIT_OK, plan_files, print_diagnostics, read_plan
from .registry import registry_for


def run(args: argparse.Namespace) -> int:
    names = plan_files(args.plans, "graph")
    # one graph object only for one plan named as a file: a directory's output keeps one
    # shape (a list) whether it holds one plan or many
    single = len(args.plans) == 1 and not os.path.isdir(args.plans[0])
    registry, _ = registry_for(args)
    code, graphs = EXIT_OK, []
    for name in names:
        drawn = _draw(args, name, registry, single)
        if drawn is None:
            code = EXIT_FAIL
            continue
        out, ok = drawn
        graphs.append(out)
        if not ok:
            code = EXIT_FAIL
    if args.format == "json":
        if single:
            if graphs:
                print(json.dumps(graphs[0], ensure_ascii=False, indent=2))
        else:
            print(json.dumps(graphs, ensure_ascii=False, indent=2))
    else:
        for out in graphs:
            print(out)
    return code


def _draw(args: argparse.Namespace, name: str, registry: Any, single: bool) -> tuple[Any, bool] | None:
    """The rendering of one plan and whether it has no cycle; None when it does not load."""
    from .. import graph
    from ..compiler import compile_plan

    result = read_plan(name, args.from_format)
    plan = result.plan
    sources = {plan.file or "": plan.source or ""}
    if not result.ok:
        print_diagnostics(result.diagnostics, sources, False)
        return None
    compiled = compile_plan(plan, tools=registry)
    if args.format == "json":
        out: Any = graph.to_data(compiled)
        if not single:
            out = {"file": name, **out}
    else:
        out = {"mermaid": graph.to_mermaid, "dot": graph.to_dot}[args.format](compiled)
        if not single:  # several graphs in turn: each names its file, in the language's comment
            head, _, rest = out.partition("\n")
            label = name.replace("\n", "\\n")  # a comment ends at a line break
            out = f"{head}\n    {'%%' if args.format == 'mermaid' else '//'} {label}\n{rest}"
    cycles = [d for d in compiled.diagnostics if d.code == "E302"]
    if cycles:
        print_diagnostics(cycles, sources, False)
    return out, not cycles
