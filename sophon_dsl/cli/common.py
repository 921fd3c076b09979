"""What every ``sophon-dsl`` command shares: exit codes, usage errors, argument types,
reading plans and flag files, printing diagnostics and source excerpts.

Kept light on purpose: ``sophon-dsl --help`` imports this module, so anything heavy
(the compiler, the runtime, rich, jsonschema) is imported by the command that needs it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from ..errors import SophonError
from ..files import write_file  # fmt -w writes through it (kept here for the CLI modules)

if TYPE_CHECKING:  # (imported where used: `sophon-dsl --help` imports this module, not the core)
    from ..diagnostics import Diagnostic
    from ..loader import LoadResult
    from ..model import Plan

__all__ = [
    "EXIT_FAIL", "EXIT_OK", "EXIT_USAGE", "EXIT_WAITING", "exit_for_status", "MAX_DEPTH", "UsageError", "approver_for",
    "excerpt", "excerpt_lines", "json_depth", "lone_surrogate_path", "on_signals", "parse_json_arg", "plan_files",
    "positive_int", "positive_seconds", "print_diagnostics", "print_invalid",
    "provider_problem", "provider_usage_error", "read_flag_file", "read_plan", "read_stdin", "sniff_format",
    "write_file",
]

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
# a durable run left waiting for a person (`--approve wait`): not a failure, and a script
# must tell it from one to know that `sophon-dsl approve RUN_ID` is the next step
EXIT_WAITING = 3


def exit_for_status(status: str) -> int:
    """The exit code of a run that ended with ``status``: 0 succeeded, 3 waiting, else 1."""
    if status == "succeeded":
        return EXIT_OK
    return EXIT_WAITING if status == "waiting" else EXIT_FAIL

# --input / --state nest no deeper than plans may
MAX_DEPTH = 200


class UsageError(SophonError):
    """A bad flag, value or file named by a flag: printed as one line, exit code 2."""


def byte_size(text: str) -> int:
    """argparse type: a size in bytes, ``2G``, ``512M``, ``64K`` or a plain number (binary
    units: K = 1024)."""
    from ..runtime.watchdog import parse_size  # (only when the flag is given: --help stays light)

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse reports a bad value as a usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds > 0 (``inf`` allowed: no limit; ``nan`` refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}") from None
    if not value > 0:  # also false for nan
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def read_plan(name: str, from_format: str | None) -> LoadResult:
    """The plan file ``name`` (``-``: stdin, its form told by ``--from`` or by the text),
    loaded with its diagnostics.  A file that does not exist is a usage error (exit 2)."""
    from ..loader import format_for_path, parse, parse_file

    if name == "-":
        raw = read_stdin("the plan")
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                from ..loader import LoadResult, not_utf8
                from ..model import Plan

                return LoadResult(Plan(file="<stdin>"), [not_utf8("<stdin>", raw, exc)])
        return parse(raw, from_format or sniff_format(raw), file="<stdin>")
    if not os.path.exists(name):
        raise UsageError(f"{name}: no such file")
    if os.path.isdir(name):
        raise UsageError(f"{name}: is a directory, not a plan file")
    if from_format is None and format_for_path(name) is None:
        raise UsageError(f"cannot tell the form of {name!r} from its extension; pass --from dsl|yaml|json")
    return parse_file(name, from_format)


def plan_files(names: Sequence[str], command: str) -> list[str]:
    """The plan files the ``PLAN...`` arguments of ``fmt``, ``check`` and ``graph`` stand for.

    A file (or ``-``, stdin) is taken as named, whatever its extension.  A directory is
    walked, as black and ``terraform fmt`` do, for the files whose extension names the DSL
    (``*.plan``, ``*.sophon``, ``*.dsl``), in sorted order, skipping hidden entries (``.git``,
    ``.venv``).  JSON and YAML files are not picked up by a walk: beside plans they are
    mostly something else (inputs, tool declarations, scripted replies, CI files), which
    would be reported as broken plans; name them (a shell glob does) to read them.

    A path that does not exist is a usage error (exit 2) before any plan is read, so that
    ``fmt -w`` never rewrites half of what it was given; a directory without plan files is
    a warning on stderr.  A file reached twice is read once."""
    files: list[str] = []
    seen: set[str] = set()

    def add(path: str) -> None:
        key = os.path.normpath(path) if path != "-" else path
        if key not in seen:
            seen.add(key)
            files.append(path)

    for name in names:
        if name == "-":
            add(name)
        elif os.path.isdir(name):
            found = _walk_plans(name)
            if not found:
                others = _walk_plans(name, ("json", "yaml"))
                if others:  # say what was skipped and the command that reads them
                    shown = " ".join(sorted({os.path.join(os.path.dirname(p), "*" + os.path.splitext(p)[1])
                                             for p in others})[:4])
                    how = (f"{len(others)} JSON/YAML file(s) were not read, as a directory is searched only "
                           f"for *.plan, *.sophon and *.dsl files; to check them, name them: "
                           f"sophon-dsl {command} {shown}")
                else:
                    how = ("a directory is searched for *.plan, *.sophon and *.dsl files; name JSON and "
                           "YAML plans one by one")
                print(f"sophon-dsl {command}: warning: {name}: no plan files in this directory ({how})",
                      file=sys.stderr)
            for path in found:
                add(path)
        elif not os.path.exists(name):
            raise UsageError(f"{name}: no such file or directory")
        else:
            add(name)
    return files


def _walk_plans(directory: str, forms: tuple[str, ...] = ("dsl",)) -> list[str]:
    from ..loader import format_for_path

    found = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, n) for n in sorted(names)
                     if not n.startswith(".") and format_for_path(n) in forms)
    return found


# the stdin streams already read (the plan and ``--input @-`` cannot both come from it)
_STDIN_READ: list[Any] = []


def read_stdin(what: str) -> str | bytes:
    """All of stdin (bytes when it has a binary buffer); a usage error the second time."""
    stream = sys.stdin
    if stream is None:
        raise UsageError(f"{what} is to be read from stdin, but there is no stdin")
    if any(s is stream for s in _STDIN_READ):
        raise UsageError(f"{what} cannot be read from stdin: stdin was already read for something else")
    _STDIN_READ.append(stream)
    return stream.buffer.read() if hasattr(stream, "buffer") else stream.read()


_YAML_KEY = re.compile(r"""(["']?)[A-Za-z_][\w.-]*\1\s*:(\s|$)""")


def sniff_format(text: str) -> str:
    """The form of plan text given without a name: JSON when it opens a list or object,
    YAML when it starts a sequence (``- ``), a document (``---``) or a ``key:`` line that
    calls nothing (a DSL label ``s1: f()`` always calls), else the DSL."""
    for line in text.lstrip("\ufeff").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//")):
            continue
        if stripped[0] in "[{" or stripped.startswith("/*"):
            return "json"
        if stripped in ("-", "---") or stripped.startswith(("- ", "--- ")):
            return "yaml"
        if _YAML_KEY.match(stripped) and "(" not in stripped:
            return "yaml"
        return "dsl"
    return "dsl"


def read_valid_plan(args: Any) -> Plan | None:
    """``args.plan`` read (``args.from_format``); None after printing its diagnostics when
    it does not load (the command then exits with EXIT_FAIL)."""
    result = read_plan(args.plan, args.from_format)
    if not result.ok:
        plan = result.plan
        print_diagnostics(result.diagnostics, {plan.file or "": plan.source or ""}, False)
        return None
    return result.plan


def print_diagnostics(diags: Sequence[Diagnostic], sources: dict[str, str], as_json: bool) -> None:
    from ..diagnostics import render_json, render_text

    if as_json:
        print(render_json(diags))
    elif diags:
        print(render_text(diags, sources=sources), file=sys.stderr)


def print_invalid(diags: Sequence[Diagnostic], sources: dict[str, str], as_json: bool) -> None:
    """A plan that cannot run: the diagnostics as text on stderr, and with ``--json``
    ``{"status": "invalid", "diagnostics": [...]}`` on stdout too (what a program reading
    the run's result parses)."""
    from ..diagnostics import render_json

    if as_json:
        print(json.dumps({"status": "invalid", "diagnostics": json.loads(render_json(diags))},
                         ensure_ascii=False, indent=2))
    print_diagnostics(diags, sources, False)


def excerpt_lines(text: str, span: Any) -> list[str]:
    """The span's source line and its ``^~~`` underline, as the diagnostics print them.

    The renderer's own excerpt (``diagnostics.excerpt``)."""
    from ..diagnostics import excerpt

    return excerpt(text, span)


def excerpt(text: str, line: int, column: int) -> str:
    """The source line and a caret under ``column`` (1-based), each on a new line."""
    from ..diagnostics import Span

    return "".join(f"\n{x}" for x in excerpt_lines(text, Span.point(line, column)))


def read_flag_file(flag: str, path: str) -> str:
    """The UTF-8 text of the file a flag names (a byte order mark dropped, as plan files
    have theirs: editors on Windows write one, and JSON's reader refuses it), or a usage
    error saying why it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().removeprefix("\ufeff")
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{flag}: cannot read {path!r}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def placed_in_input(diags: Sequence[Diagnostic], flag_value: str | None, sources: dict[str, str],
                    flag: str = "--input") -> list[Diagnostic]:
    """Diagnostics about the run's input (E107: it does not match the plan's input schema)
    placed where that input was written: in an ``--input @file``, at the line and column of
    the value at the diagnostic's JSON path, or of the whole input when it has none (a
    missing required property); the file's text joins ``sources`` for the excerpt.  Others,
    and input given inline or on stdin, are left as they are."""
    if not flag_value or not flag_value.startswith("@") or flag_value == "@-":
        return list(diags)
    from ..diagnostics import Diagnostic

    name = flag_value[1:]
    root = None
    out = []
    for d in diags:
        if d.data is None or d.data.get("about") != "input":
            out.append(d)
            continue
        if root is None:
            from ..syntax.json_source import parse_json

            try:
                text = read_flag_file(flag, name)
            except UsageError:  # gone since it was read: the diagnostics as they are
                return list(diags)
            root, problems = parse_json(text, name)
            if root is None or problems:
                return list(diags)
            sources[name] = text
        node = _node_at(root, d.path) if d.path is not None else root  # (no path: the input as a whole)
        out.append(d if node is None else
                   Diagnostic(d.code, d.message, node.span, name, d.path, d.severity, d.related, d.data))
    return out


def _node_at(root: Any, path: str) -> Any:
    """The located node at JSON ``path`` (as the reader spells its nodes' paths), or None."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.path == path:
            return node
        if not path.startswith(node.path):
            continue  # (not on the way to it)
        if node.is_object:
            stack.extend(child for _, child in node.items())
        elif node.is_array:
            stack.extend(node)
    return None


def parse_json_arg(flag: str, text: str | None, *, object_only: bool = False) -> Any:
    """``--input '{"a": 1}'`` or ``--input @file.json``; errors name the flag and the position.

    ``object_only``: the value must be a JSON object (``--state``: it holds the state's paths).
    """
    if text is None:
        return None
    source = flag
    if text == "@-":
        raw = read_stdin(flag)
        try:
            text = (raw.decode("utf-8") if isinstance(raw, bytes) else raw).removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{flag}: cannot read stdin: not UTF-8 ({exc.reason} at byte {exc.start})") from None
        source = f"{flag} <stdin>"
    elif text.startswith("@"):
        path = text[1:]
        text = read_flag_file(flag, path)
        source = f"{flag} {path}"

    def not_json(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value (write null, a number or a string)")

    try:
        value = json.loads(text, parse_constant=not_json)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
                         + excerpt(text, exc.lineno, exc.colno)) from None
    except ValueError as exc:
        raise UsageError(f"{source}: invalid JSON: {exc}") from None
    except RecursionError:
        raise UsageError(f"{source}: invalid JSON: nested too deeply") from None
    if json_depth(value) > MAX_DEPTH:
        raise UsageError(f"{source}: nesting deeper than {MAX_DEPTH} levels (the limit for plans too)")
    from ..syntax.json_source import may_hold_surrogates

    lone = lone_surrogate_path(value) if may_hold_surrogates(text) else None
    if lone is not None:
        raise UsageError(f"{source}: error[E006] at {lone}: a string holds a lone surrogate (such as \\ud800): "
                         "it is not Unicode text and cannot be written as UTF-8")
    if object_only and not isinstance(value, dict):
        kind = "null" if value is None else "a list" if isinstance(value, list) else type(value).__name__
        raise UsageError(f"{source}: expected a JSON object such as {{\"topic\": \"x\"}} (its keys are "
                         f"the state's top-level names), got {kind}")
    return value


def json_depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (iterative: any depth is safe)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def lone_surrogate_path(value: Any) -> str | None:
    """The JSON path of the first key or string of ``value`` holding a lone surrogate, or None."""
    from ..syntax.json_source import LONE_SURROGATE
    from ..syntax.located import child_path

    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            if LONE_SURROGATE.search(v):
                return path
        elif isinstance(v, dict):
            for key, child in v.items():
                if LONE_SURROGATE.search(key):
                    return f"{path}[{json.dumps(key)}]"  # escaped: the key cannot be printed
                stack.append((child, child_path(path, key)))
        elif isinstance(v, list):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(v))
    return None


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


def provider_usage_error(spec: str, exc: BaseException) -> UsageError | None:
    """The usage error for a ``--provider`` that cannot be built, or None when ``exc`` is a bug.

    A provider refuses its spec with ProviderError / ValueError / OSError; a scripted
    provider's file that is not YAML raises yaml's own errors.
    """
    from ..llm.provider import ProviderError

    if isinstance(exc, (ProviderError, ValueError, OSError)) or type(exc).__module__.startswith("yaml"):
        return UsageError(f"--provider {spec}: {provider_problem(exc)}")
    return None


def approver_for(choice: str | None) -> str:
    """``--approve`` as given, else ask on a terminal and refuse elsewhere."""
    if choice is not None:
        return choice
    return "ask" if sys.stdin is not None and sys.stdin.isatty() else "no"


@contextlib.contextmanager
def on_signals(handler: Callable[[], None]) -> Iterator[None]:
    """Within the running event loop, Ctrl-C (SIGINT) and SIGTERM call ``handler`` (cancel
    the run: it ends with its summary and state, exit 1) instead of killing the process."""
    import asyncio

    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, handler)
        except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - not Unix, not main thread
            continue
        installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover
                pass


def tool_executor_from_flags(args: argparse.Namespace) -> Any:
    """The tool executor ``--executor`` names (a DaskExecutor for ``dask:...``; None: local),
    through the table of executor specs; False after printing why the flags are bad."""
    spec = getattr(args, "executor", None) or os.environ.get("SOPHON_DSL_EXECUTOR") or None
    config = getattr(args, "executor_config", None)
    if not (spec or config):
        return None  # the local path imports nothing of the executor table or the scale-out package
    from ..diagnostics import render_text
    from ..runtime.executors import ExecutorConfigError, executor_from_spec

    try:
        return executor_from_spec(spec, config)
    except ExecutorConfigError as exc:
        print(render_text(exc.diagnostics), file=sys.stderr)
        print("nothing was started", file=sys.stderr)
        return False


def ready_provider(spec: str, model: str | None = None) -> Any:
    """The provider ``spec`` names, checked ready to send (a missing API key, an unknown spec
    or a missing SDK is a usage error, found before the first request)."""
    from ..llm.provider import check_ready
    from ..llm.providers import get_provider

    try:
        provider = get_provider(spec, model=model)
        check_ready(provider)
        return provider
    except Exception as exc:
        usage = provider_usage_error(spec, exc)
        if usage is None:
            raise
        raise usage from None


def keep_last(done_event: str, show: Callable[[Any], None] | None) -> tuple[Callable[[Any], None], dict[str, Any]]:
    """An event callback that passes every event to ``show`` (the progress lines; None: none)
    and keeps the data of the last ``done_event`` in ``final["result"]``: what a run that is
    cancelled had reached."""
    final: dict[str, Any] = {}

    def on_event(ev: Any) -> None:
        if ev.type == done_event:
            final["result"] = ev.data
        if show is not None:
            show(ev)

    return on_event, final


async def until_done_or_interrupted(work: Any, final: dict[str, Any]) -> Any:
    """Await ``work`` (a coroutine); on Ctrl-C or SIGTERM cancel it and return what
    ``final`` kept (see :func:`keep_last`; None when nothing was reached)."""
    import asyncio

    task = asyncio.ensure_future(work)
    with on_signals(task.cancel):
        try:
            return await task
        except asyncio.CancelledError:
            return final.get("result")
