"""The ``sophon-dsl`` console script (also ``python -m sophon_dsl``).

Exit codes: 0 success, 1 the plan has errors (or failed, was rejected or
cancelled when run), 2 usage errors (bad flags, unreadable tool sources).

Layout: :mod:`.parser` declares every command's flags; each command is implemented in
its own module (``check``, ``fmt``, ``graph``, ``run``, ``dry_run``, ``grammar``,
``schema``, ``agent``), imported only when that command runs; :mod:`.common` holds
what they share and :mod:`.registry` builds the tool registry from the tools flags.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from typing import Callable, Sequence

# positive_int, positive_seconds: re-exported, as sophon_dsl/cli.py had them before the CLI became a package
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, UsageError
from .common import positive_int as positive_int, positive_seconds as positive_seconds
from .parser import NotBuilt, add_source_args, add_tools_arg, build_parser, command_in
from .registry import registry_for

__all__ = ["COMMANDS", "EXIT_FAIL", "EXIT_OK", "EXIT_USAGE", "UsageError", "build_parser", "main"]

# command -> the module of sophon_dsl.cli that implements it (its ``run(args) -> int``)
COMMAND_MODULES = {"check": "check", "fmt": "fmt", "graph": "graph", "run": "run", "dry-run": "dry_run",
                   "grammar": "grammar", "schema": "schema", "agent": "agent",
                   "classify": "classify", "goal": "goal"}

COMMAND_MODULES["runs"] = "runs"          # durable runs (issue 13)
COMMAND_MODULES["resume"] = "resume"
COMMAND_MODULES["approve"] = "approve"
COMMAND_MODULES["cancel"] = "cancel"      # cancel a run another process holds (issue 26)
COMMAND_MODULES["config"] = "config"      # the project config file (issue 28)
COMMAND_MODULES["lsp"] = "lsp"            # the language server (issue 28)
COMMAND_MODULES["ui"] = "ui"              # the web dashboard (issue 29)


def _handler(module: str) -> Callable[[argparse.Namespace], int]:
    def handle(args: argparse.Namespace) -> int:
        return importlib.import_module(f"{__name__}.{module}").run(args)

    handle.__name__ = f"cmd_{module}"
    return handle


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    name: _handler(module) for name, module in COMMAND_MODULES.items()}

def _escape_unencodable_output() -> None:
    """Print what the output encoding cannot hold (a tool's result with a lone surrogate) as
    a backslash escape instead of failing with UnicodeEncodeError after the run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # not a text stream of io: left as it is
            pass


# the names earlier versions exposed here (tests build parsers of their own with them)
_add_source_args, _add_tools_arg, _registry = add_source_args, add_tools_arg, registry_for


def main(argv: Sequence[str] | None = None) -> int:
    _escape_unencodable_output()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:  # only the command given has its flags declared (the others: name and help line)
        args = build_parser(command_in(argv)).parse_args(argv)
    except NotBuilt:  # an outlined command parsed after all: declare every command
        args = build_parser().parse_args(argv)
    with warnings.catch_warnings():  # (restores showwarning: main may run in-process again)
        warnings.showwarning = _warning_line(args.command, warnings.showwarning)
        return _run_command(args)


def _warning_line(command: str, default: Callable) -> Callable:
    """Show sophon-dsl's own warnings (a run store open to other users) in the CLI's style,
    ``sophon-dsl run: warning: ...``, instead of Python's file:line form."""
    def show(message, category, filename, lineno, file=None, line=None):
        if category.__module__.startswith("sophon_dsl."):
            print(f"sophon-dsl {command}: warning: {message}", file=file or sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)

    return show


# the commands that run plans: their runs are traced when the environment configures
# OpenTelemetry (sophon_dsl.telemetry.setup; nothing is imported for the others)
TRACED_COMMANDS = frozenset({"run", "agent", "goal", "resume", "approve"})


def _tracing(command: str) -> Callable[[], None] | None:
    if command not in TRACED_COMMANDS or not any(k.startswith("OTEL_") for k in os.environ):
        return None
    from ..telemetry.setup import SetupError, configure, wanted

    if not wanted():
        return None
    try:
        return configure(warn=lambda m: print(f"sophon-dsl {command}: warning: {m}", file=sys.stderr))
    except SetupError as exc:
        raise UsageError(str(exc)) from None


def _run_command(args: argparse.Namespace) -> int:
    shutdown = None
    try:
        _project_settings(args)
        shutdown = _tracing(args.command)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"sophon-dsl {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    finally:
        if shutdown is not None:  # the batch of spans still queued goes out before the exit
            try:
                shutdown()
            except Exception:  # noqa: BLE001 - an unreachable collector must not change the exit code
                pass


def _project_settings(args: argparse.Namespace) -> None:
    """Fill the flags the command line left unset from the project config file: a bad file
    is a usage error (exit 2) printed as ``file:line:column: message``."""
    from .settings import APPLIES_TO, apply_config

    if args.command not in APPLIES_TO:
        return
    from ..config import ConfigError

    try:
        apply_config(args)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
