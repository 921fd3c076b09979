"""``sophon-dsl check PLAN...``: every problem of one or more plans, with the tools given."""

from __future__ import annotations

import argparse
import sys

from ..diagnostics import Diagnostic
from .common import EXIT_FAIL, EXIT_OK, print_diagnostics, read_plan
from .registry import registry_for


def run(args: argparse.Namespace) -> int:
    from ..compiler import check

    registry, notes = registry_for(args)
    all_diags: list[Diagnostic] = []
    sources: dict[str, str] = {}
    for name in args.plans:
        result = read_plan(name, args.from_format)
        plan = result.plan
        if plan.file and plan.source is not None:
            sources[plan.file] = plan.source
        diags = list(result.diagnostics)
        if result.ok:
            diags.extend(d.with_file(plan.file) for d in check(plan, tools=registry, max_calls=args.max_calls))
        all_diags.extend(diags)
    all_diags.extend(notes)
    print_diagnostics(all_diags, sources, args.json)
    errors = sum(1 for d in all_diags if d.is_error)
    warnings = sum(1 for d in all_diags if d.severity.value == "warning")
    if not args.json:
        summary = f"{len(args.plans)} plan(s) checked: {errors} error(s), {warnings} warning(s)"
        # after the diagnostics, on the same stream, so the two never interleave
        print(summary, file=sys.stderr if all_diags else sys.stdout)
    return EXIT_FAIL if errors else EXIT_OK
