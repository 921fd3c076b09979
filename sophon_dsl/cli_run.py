"""``sophon-dsl run`` and ``sophon-dsl dry-run``: running plans from the command line.

The live progress view is built on the runtime's events: on a terminal a
rich table shows each call going pending -> running -> done; elsewhere one
line per event goes to stderr.  ``--json`` prints only the RunResult.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any

from .diagnostics import render_text

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

_STYLE = {
    "pending": "dim", "running": "yellow", "succeeded": "green", "failed": "red",
    "skipped": "magenta", "cancelled": "red", "retrying": "yellow",
}
_STEP_STATUS = {
    "plan_step_start": "running", "plan_step_complete": "succeeded", "plan_step_failed": "failed",
    "plan_step_skipped": "skipped", "plan_step_cancelled": "cancelled", "plan_step_retry": "retrying",
}


def add_run_parsers(sub: Any, add_source_args: Any, add_tools_arg: Any) -> None:
    from .cli import positive_int, positive_seconds

    p = sub.add_parser("run", help="run a plan against real tools")
    p.add_argument("plan", metavar="PLAN")
    add_source_args(p)
    add_tools_arg(p)
    _add_data_args(p)
    p.add_argument("--approve", choices=("yes", "no", "ask"), default=None,
                   help="answer for plans with risky calls (default: ask on a terminal, else no)")
    p.add_argument("--json", action="store_true", help="print the RunResult as JSON, no progress view")
    p.add_argument("--max-concurrency", type=positive_int, default=None, metavar="N",
                   help="run at most N calls at once")
    p.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS", help="timeout per call")
    p.add_argument("--max-time", type=positive_seconds, default=None, metavar="SECONDS",
                   help="wall-clock limit for the whole plan")
    p.add_argument("--provider", default=None, metavar="SPEC",
                   help="language model that runs latent calls (openai[:MODEL], anthropic[:MODEL], "
                        "scripted:FILE, or several comma-separated for failover)")
    p.add_argument("--model", default=None, metavar="M", help="model name for --provider")

    p = sub.add_parser("dry-run", help="simulate a plan with mocks; nothing real runs")
    p.add_argument("plan", metavar="PLAN")
    add_source_args(p)
    add_tools_arg(p)
    _add_data_args(p)
    p.add_argument("--mocks", default=None, metavar="FILE",
                   help="YAML/JSON mocks per call id or tool: result, error, latency, or a list of them")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", default=None, metavar="JSON|@FILE", help="the plan's input, as JSON or @file.json")
    p.add_argument("--state", default=None, metavar="JSON|@FILE", help="initial state, as JSON or @file.json")


def parse_json_arg(flag: str, text: str | None, *, object_only: bool = False) -> Any:
    """``--input '{"a": 1}'`` or ``--input @file.json``; errors name the flag and the position.

    ``object_only``: the value must be a JSON object (``--state``: it holds the state's paths).
    """
    from .cli import UsageError

    if text is None:
        return None
    source = flag
    if text.startswith("@"):
        path = text[1:]
        text = read_flag_file(flag, path)
        source = f"{flag} {path}"

    def not_json(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value (write null, a number or a string)")

    try:
        value = json.loads(text, parse_constant=not_json)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
                         + _excerpt(text, exc.lineno, exc.colno)) from None
    except ValueError as exc:
        raise UsageError(f"{source}: invalid JSON: {exc}") from None
    except RecursionError:
        raise UsageError(f"{source}: invalid JSON: nested too deeply") from None
    if _depth(value) > MAX_DEPTH:
        raise UsageError(f"{source}: nesting deeper than {MAX_DEPTH} levels (the limit for plans too)")
    if object_only and not isinstance(value, dict):
        kind = "null" if value is None else "a list" if isinstance(value, list) else type(value).__name__
        raise UsageError(f"{source}: expected a JSON object such as {{\"topic\": \"x\"}} (its keys are "
                         f"the state's top-level names), got {kind}")
    return value


MAX_DEPTH = 200


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (iterative: any depth is safe)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _excerpt(text: str, line: int, column: int) -> str:
    """The source line and a caret under ``column`` (1-based), as the diagnostics print them."""
    from .diagnostics import Span, _excerpt as excerpt

    return "".join(f"\n{x}" for x in excerpt(text, Span.point(line, column)))


class ProgressView:
    """Shows each call's status as events arrive."""

    def __init__(self, plan: Any, ids: list[str], stream: Any = None):
        self.stream = stream or sys.stderr
        self.ids = ids
        self.tools = [c.tool for c in plan.calls]
        self.status = ["pending"] * len(ids)
        self.detail = [""] * len(ids)
        self.live = None
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, event: Any) -> None:
        idx = event.step_index
        if event.type in _STEP_STATUS and idx is not None and 0 <= idx < len(self.status):
            self.status[idx] = _STEP_STATUS[event.type]
            if event.type == "plan_step_failed" and event.error:
                self.detail[idx] = f"{event.error.get('error')}: {event.error.get('cause')}"
            elif event.type == "plan_step_skipped":
                self.detail[idx] = event.reason or ""
            elif event.type == "plan_step_retry":
                self.detail[idx] = f"attempt {event.attempt} failed; retrying"
            elif event.preview:
                self.detail[idx] = event.preview
        if self.interactive:
            self._refresh(event)
        else:
            self._line(event)

    def _line(self, event: Any) -> None:
        if event.type.startswith("plan_step_") and event.step_index is not None:
            i = event.step_index
            extra = f"  {self.detail[i]}" if self.detail[i] else ""
            print(f"[{self.ids[i]}] {self.tools[i]}: {self.status[i]}{extra}", file=self.stream)
        elif event.type.startswith("approval_"):
            print(f"approval: {event.type.removeprefix('approval_')}"
                  + (f" ({event.reason})" if event.reason else ""), file=self.stream)

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(box=None, show_header=True, header_style="bold")
        table.add_column("call")
        table.add_column("tool")
        table.add_column("status")
        table.add_column("detail", overflow="ellipsis", no_wrap=True, max_width=60)
        for cid, tool, status, detail in zip(self.ids, self.tools, self.status, self.detail):
            table.add_row(cid, tool, f"[{_STYLE.get(status, '')}]{status}[/]", detail)
        return table

    def _refresh(self, event: Any) -> None:
        from rich.console import Console
        from rich.live import Live

        if event.type == "plan_start" and self.live is None:
            self.live = Live(self._table(), console=Console(file=self.stream), refresh_per_second=12,
                             transient=False)
            self.live.start()
        elif self.live is not None:
            self.live.update(self._table())
        if event.type in ("plan_complete", "plan_failed") and self.live is not None:
            self.live.stop()
            self.live = None
        elif event.type.startswith("approval_") and event.type != "approval_requested":
            print(f"approval: {event.type.removeprefix('approval_')}", file=self.stream)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def _approver_for(choice: str | None) -> Any:
    if choice is not None:
        return choice
    return "ask" if sys.stdin is not None and sys.stdin.isatty() else "no"


async def _run_async(plan: Any, registry: Any, args: argparse.Namespace, view: ProgressView | None) -> Any:
    from .runtime import start

    options: dict[str, Any] = {"approve": _approver_for(args.approve)}
    if view is not None:
        options["on_event"] = view
    for name in ("max_concurrency", "timeout", "max_time"):
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    if args.provider:
        options["executor"] = _latent_executor(args.provider, args.model)
    handle = start(plan, registry, input=parse_json_arg("--input", args.input),
                   state=parse_json_arg("--state", args.state, object_only=True), **options)
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, handle.cancel)
    except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
        pass
    try:
        return await handle.result()
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):  # pragma: no cover
            pass


def _load_runnable(args: argparse.Namespace, load_plan: Any, registry_for: Any) -> tuple | None:
    """(plan, registry, sources) for ``args.plan``, or None after printing its load errors."""
    result = load_plan(args.plan, args.from_format)
    plan = result.plan
    sources = {plan.file or "": plan.source or ""}
    if not result.ok:
        print(render_text(result.diagnostics, sources=sources), file=sys.stderr)
        return None
    registry, _notes = registry_for(args)
    return plan, registry, sources


def _latent_executor(spec: str, model: str | None) -> Any:
    from .cli import UsageError
    from .llm.latent import LLMLatentExecutor
    from .llm.provider import ProviderError
    from .llm.providers import get_provider

    try:
        return LLMLatentExecutor(get_provider(spec, model=model), model=model)
    except (ProviderError, ValueError, OSError) as exc:
        raise UsageError(f"--provider {spec}: {provider_problem(exc)}") from None
    except Exception as exc:  # a scripted provider's file that is not YAML (yaml.YAMLError)
        if type(exc).__module__.startswith("yaml"):
            raise UsageError(f"--provider {spec}: {provider_problem(exc)}") from None
        raise


def read_flag_file(flag: str, path: str) -> str:
    """The UTF-8 text of the file a flag names, or a usage error saying why it cannot be read."""
    from .cli import UsageError

    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{flag}: cannot read {path!r}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def provider_problem(exc: BaseException) -> str:
    """What is wrong with a ``--provider`` spec or its script file, with the place when known."""
    cause = exc.__cause__
    if cause is not None and isinstance(cause, (UnicodeDecodeError, json.JSONDecodeError)) \
            or getattr(cause, "problem_mark", None) is not None:
        exc = cause  # a script file that does not load: say it the same way for every source
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:  # YAML: "while parsing ...; expected ..." at a line and column
        parts = [p for p in (getattr(exc, "context", None), getattr(exc, "problem", None)) if p]
        return f"invalid YAML at line {mark.line + 1} column {mark.column + 1}: {'; '.join(parts)}"
    if isinstance(exc, UnicodeDecodeError):
        return f"the file is not UTF-8 ({exc.reason} at byte {exc.start})"
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
    return str(exc)


def cmd_run(args: argparse.Namespace, load_plan: Any, registry_for: Any) -> int:
    from .compiler import compile_plan
    from .runtime import PlanInvalid

    loaded = _load_runnable(args, load_plan, registry_for)
    if loaded is None:
        return EXIT_FAIL
    plan, registry, sources = loaded
    view = None if args.json else ProgressView(plan, list(compile_plan(plan, registry).ids))
    try:
        outcome = asyncio.run(_run_async(plan, registry, args, view))
    except PlanInvalid as exc:
        print(render_text([d.with_file(plan.file) for d in exc.diagnostics], sources=sources), file=sys.stderr)
        print("the plan cannot run: nothing was started", file=sys.stderr)
        return EXIT_FAIL
    finally:
        if view is not None:
            view.close()
    if args.json:
        print(outcome.dumps())
    else:
        _summarise(outcome)
    return EXIT_OK if outcome.status == "succeeded" else EXIT_FAIL


def _summarise(outcome: Any) -> None:
    counts: dict[str, int] = {}
    for rec in outcome.calls:
        counts[rec.status] = counts.get(rec.status, 0) + 1
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"plan {outcome.status}: {parts}", file=sys.stderr)
    if outcome.error is not None and outcome.status != "succeeded":
        err = outcome.error.to_json()
        print(f"  {err.get('error')}: {err.get('cause')}", file=sys.stderr)
        if outcome.status == "rejected" and err.get("cause") == "auto-rejected":
            print("  the plan has risky calls; review it and pass --approve yes (or ask) to run it",
                  file=sys.stderr)
    shown: dict[str, Any] = dict(outcome.state)
    if outcome.output is not None:
        shown["output"] = outcome.output
    print(json.dumps(shown, ensure_ascii=False, indent=2, default=str))


def cmd_dry_run(args: argparse.Namespace, load_plan: Any, registry_for: Any) -> int:
    from .runtime import PlanInvalid, dry_run

    loaded = _load_runnable(args, load_plan, registry_for)
    if loaded is None:
        return EXIT_FAIL
    plan, registry, sources = loaded
    mocks = None if args.mocks is None else _read_mocks(args.mocks)
    try:
        report = dry_run(plan, registry, mocks=mocks, input=parse_json_arg("--input", args.input),
                         state=parse_json_arg("--state", args.state, object_only=True))
    except PlanInvalid as exc:
        print(render_text([d.with_file(plan.file) for d in exc.diagnostics], sources=sources), file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2, default=str))
    else:
        print(report.to_text())
    return EXIT_OK if report.status == "succeeded" else EXIT_FAIL


def _read_mocks(name: str) -> dict:
    """The ``--mocks`` file, checked: every problem names its place (line, column, JSON path)."""
    import os

    from .cli import UsageError
    from .diagnostics import Span, _excerpt as excerpt
    from .runtime.dryrun import mock_problems

    if os.path.isdir(name):
        raise UsageError(f"--mocks: {name!r} is a directory, not a YAML/JSON mocks file")
    if not os.path.isfile(name):
        raise UsageError(f"--mocks: file {name!r} does not exist")
    text = read_flag_file("--mocks", name)
    if not text.strip():
        return {}
    if name.lower().endswith(".json"):
        from .syntax.json_source import parse_json as parse_source
    else:
        from .syntax.yaml_source import parse_yaml as parse_source
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
            shown.append("\n".join([f"{where}: {message} (at {path})", *(excerpt(text, span) if span else ())]))
        raise UsageError(f"--mocks: malformed mocks file {name!r}\n" + "\n".join(shown))
    return data
