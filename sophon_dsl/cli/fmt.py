"""``sophon-dsl fmt PLAN...``: plans in canonical form, or converted to another form.

Without ``-w`` / ``--check`` each plan is printed in turn (as gofmt does); ``-w`` rewrites
each file, ``--check`` names each file that is not formatted (exit 1 when one is not).  A
directory stands for the DSL plan files under it (``common.plan_files``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..loader import dumps, format_for_path
from ..model import Plan
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, UsageError, plan_files, print_diagnostics, read_plan, write_file


def run(args: argparse.Namespace) -> int:
    if args.check and args.write:
        raise UsageError("--check only reports; it cannot be combined with -w/--write")
    if args.write and "-" in args.plans:
        raise UsageError("-w needs a file, not stdin")
    code = EXIT_OK
    for name in plan_files(args.plans, "fmt"):
        code = max(code, _one(args, name))  # a refused conversion (2) outranks an unformatted file (1)
    return code


def _one(args: argparse.Namespace, name: str) -> int:
    result = read_plan(name, args.from_format)
    plan = result.plan
    if not result.ok:
        print_diagnostics(result.diagnostics, {plan.file or "": plan.source or ""}, False)
        return EXIT_FAIL
    source_form = args.from_format or (format_for_path(name) if name != "-" else plan.form or None)
    target = args.to or source_form or "dsl"
    lost = _data_without_dsl_spelling(plan) if target == "dsl" else ""
    if lost:
        print(f"sophon-dsl fmt: error: {name}: the DSL has no spelling for a context list's data, so "
              f"--to dsl would drop {lost}; convert to json or yaml instead (they keep it as "
              "messages), or pass the data at run time (--input / --state)", file=sys.stderr)
        return EXIT_USAGE
    text = dumps(plan, target)
    if not text.endswith("\n"):
        text += "\n"
    original = _raw_text(name)
    if original is not None:
        text = _same_conventions(text, original)
    if args.check:
        if target != source_form:
            raise UsageError("--check compares a file with its own form; drop --to or make it match")
        if (original if original is not None else plan.source) != text:
            print(f"{name}: not formatted (run 'sophon-dsl fmt -w {name}')", file=sys.stderr)
            return EXIT_FAIL
        return EXIT_OK
    if args.write:
        out_path = Path(name)
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


def _raw_text(name: str) -> str | None:
    """The file as it is on disk (line endings and byte order mark kept), or None (stdin,
    unreadable: the plan read already reported that)."""
    if name == "-":
        return None
    try:
        with open(name, "rb") as fh:
            return fh.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _same_conventions(text: str, original: str) -> str:
    """``text`` (LF line endings, no BOM) with the file's own conventions, as black keeps
    them: CRLF line endings when most of its lines end so, and its UTF-8 byte order mark."""
    crlf = original.count("\r\n")
    if crlf and crlf * 2 >= original.count("\n"):
        text = text.replace("\n", "\r\n")
    if original.startswith("\ufeff"):
        text = "\ufeff" + text
    return text


def _data_without_dsl_spelling(plan: Plan) -> str:
    """What a DSL rendering would lose: the input / state data of a context list's messages
    (named by kind and top-level keys), or ``""`` when there is none."""
    initial = plan.initial
    parts = []
    for kind, data in (("input", initial.input), ("state", initial.state)) if initial is not None else ():
        if data:
            keys = ", ".join(sorted(data)[:6]) + (", ..." if len(data) > 6 else "")
            parts.append(f"the {kind} data ({keys})")
    return " and ".join(parts)
