"""``sophon-dsl check PLAN...``: every problem of one or more plans, with the tools given.

Diagnostics go to stdout (``sophon-dsl check *.plan | grep E201``) in the form ``--format``
names: ``text`` (with source excerpts and a summary line), ``json``, ``sarif`` (SARIF
2.1.0 for code scanning) or ``github`` (workflow annotations).  A directory stands for the
DSL plan files under it (``common.plan_files``).  Exit 1 when a plan has
errors, or warnings under ``--strict``; 2 for usage errors (a missing file, a bad flag).
"""

from __future__ import annotations

import argparse
import sys

from ..diagnostics import Diagnostic, Severity
from .common import EXIT_FAIL, EXIT_OK, UsageError, plan_files, read_plan
from .registry import registry_for


def _form(args: argparse.Namespace) -> str:
    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json is --format json; it cannot be combined with --format {args.format}")
    return "json" if args.json else args.format or "text"


def run(args: argparse.Namespace) -> int:
    from ..fullcheck import check_loaded
    from ..reports import render

    form = _form(args)
    names = plan_files(args.plans, "check")
    registry, notes = registry_for(args)
    all_diags: list[Diagnostic] = []
    sources: dict[str, str] = {}
    for name in names:
        result = read_plan(name, args.from_format)
        plan = result.plan
        if plan.file and plan.source is not None:
            sources[plan.file] = plan.source
        # loading errors do not hide the checks: every problem of the plan in one pass
        all_diags.extend(check_loaded(result, tools=registry, max_calls=args.max_calls))
    all_diags.extend(notes)
    errors = sum(1 for d in all_diags if d.is_error)
    warnings = sum(1 for d in all_diags if d.severity is Severity.WARNING)
    out = render(all_diags, form, sources)
    if out and (all_diags or form != "text"):
        print(out)
    sys.stdout.flush()  # the diagnostics before the summary, whichever stream shows it
    if form == "text":
        strict = " (--strict: warnings fail)" if args.strict and warnings else ""
        # on stdout for a clean run; after diagnostics on stderr, so that `check | grep` sees
        # only diagnostics (where it went before diagnostics moved to stdout)
        print(f"{len(names)} plan(s) checked: {errors} error(s), {warnings} warning(s){strict}",
              file=sys.stderr if all_diags else sys.stdout)
    return EXIT_FAIL if errors or (args.strict and warnings) else EXIT_OK
