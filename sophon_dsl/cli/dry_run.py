"""``sophon-dsl dry-run PLAN``: simulate a plan with mocks; nothing real runs."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..diagnostics import render_text, visible
from .common import (EXIT_FAIL, EXIT_OK, UsageError, excerpt_lines, parse_json_arg, placed_in_input, print_invalid,
                     read_flag_file)
from .run import load_runnable

__all__ = ["read_mocks", "run"]


def run(args: argparse.Namespace) -> int:
    from ..runtime import PlanInvalid, dry_run

    loaded = load_runnable(args)
    if loaded is None:
        return EXIT_FAIL
    plan, registry, sources = loaded
    mocks = None if args.mocks is None else read_mocks(args.mocks)
    try:
        report = dry_run(plan, registry, mocks=mocks, input=parse_json_arg("--input", args.input),
                         state=parse_json_arg("--state", args.state, object_only=True))
    except PlanInvalid as exc:
        placed = placed_in_input(exc.diagnostics, args.input, sources)
        print_invalid([d.with_file(plan.file) for d in placed], sources, args.json)
        return EXIT_FAIL
    for warning in report.warnings:  # a mock that matches nothing is a typo more often than not
        print(visible(f"warning: {warning}"), file=sys.stderr)
    output = report.result.output if report.result is not None else None
    if args.json:
        print(json.dumps({**report.to_json(), "output": output}, ensure_ascii=False, indent=2, default=str))
    else:
        # (ids and mock values come from the plan and its mocks: shown escaped, as by `run`)
        print(visible(report.to_text()))
        if output is not None:  # what the plan would return, from the mocks and samples
            print(visible("predicted output: " + json.dumps(output, ensure_ascii=False, default=str)))
    return EXIT_OK if report.status == "succeeded" else EXIT_FAIL


def read_mocks(name: str) -> dict:
    """The ``--mocks`` file, checked: every problem names its place (line, column, JSON path)."""
    from ..diagnostics import Span
    from ..runtime.dryrun import mock_problems

    if os.path.isdir(name):
        raise UsageError(f"--mocks: {name!r} is a directory, not a YAML/JSON mocks file")
    if not os.path.isfile(name):
        raise UsageError(f"--mocks: file {name!r} does not exist")
    text = read_flag_file("--mocks", name)
    if not text.strip():
        return {}
    if name.lower().endswith(".json"):
        from ..syntax.json_source import parse_json as parse_source
    else:
        from ..syntax.yaml_source import parse_yaml as parse_source
    node, diags = parse_source(text, file=name)
    if node is None or any(d.is_error for d in diags):
        raise UsageError("--mocks: " + render_text(diags, source=text))
    data = node.to_data()
    problems = mock_problems(data)
    if problems:
        spans: dict[str, Span] = {}
        key_spans: dict[str, Span] = {}
        stack = [node]
        while stack:
            n = stack.pop()
            spans.setdefault(n.path, n.span)
            for key, child in n.items():
                key_spans.setdefault(child.path, n.key_span(key))
            stack.extend(n)
        shown = []
        for path, message in problems:
            # an unknown key is shown at the key, a wrong value at the value
            span = (key_spans if message.startswith("unknown") else spans).get(path)
            where = f"{name}:{span.line}:{span.column}" if span else name
            shown.append("\n".join([f"{where}: {message} (at {path})", *(excerpt_lines(text, span) if span else ())]))
        raise UsageError(f"--mocks: malformed mocks file {name!r}\n" + "\n".join(shown))
    return data
