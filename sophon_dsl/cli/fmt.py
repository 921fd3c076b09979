"""``sophon-dsl fmt PLAN``: the plan in canonical form, or converted to another form."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..loader import dumps, format_for_path
from .common import EXIT_FAIL, EXIT_OK, UsageError, read_valid_plan, write_file


def run(args: argparse.Namespace) -> int:
    plan = read_valid_plan(args)
    if plan is None:
        return EXIT_FAIL
    source_form = args.from_format or (format_for_path(args.plan) if args.plan != "-" else None)
    target = args.to or source_form or "dsl"
    text = dumps(plan, target)
    if not text.endswith("\n"):
        text += "\n"
    if args.check:
        if args.write:
            raise UsageError("--check only reports; it cannot be combined with -w/--write")
        if target != source_form:
            raise UsageError("--check compares a file with its own form; drop --to or make it match")
        if plan.source != text:
            print(f"{args.plan}: not formatted (run 'sophon-dsl fmt -w {args.plan}')", file=sys.stderr)
            return EXIT_FAIL
        return EXIT_OK
    if args.write:
        if args.plan == "-":
            raise UsageError("-w needs a file, not stdin")
        out_path = Path(args.plan)
        if target != source_form:
            suffix = {"dsl": ".plan", "json": ".json", "yaml": ".yaml"}[target]
            out_path = out_path.with_suffix(suffix)
        try:
            wrote = write_file(str(out_path), text)
        except OSError as exc:
            raise UsageError(f"-w: cannot write {str(out_path)!r}: {exc.strerror or exc}") from None
        print(f"wrote {out_path}" if wrote else f"{out_path}: already formatted (left untouched)",
              file=sys.stderr)
        return EXIT_OK
    sys.stdout.write(text)
    return EXIT_OK
