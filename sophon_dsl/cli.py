"""The ``sophon-dsl`` console script.

Exit codes: 0 success, 1 the plan has errors (or failed, was rejected or
cancelled when run), 2 usage errors (bad flags, unreadable tool sources).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from .diagnostics import Diagnostic, has_errors, render_json, render_text
from .loader import FORMATS, LoadResult, format_for_path, parse, parse_file

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    pass


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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default prints usage and exits 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _add_source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="from_format", choices=FORMATS,
                   help="form of the plan when it is read from stdin ('-') or has an unusual extension")


def _add_tools_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tools", action="append", default=[], metavar="SOURCE",
                   help="tools: FILE.py, an importable MODULE, a YAML/JSON declarations file, "
                        "mcp:stdio:COMMAND, mcp:http:URL or an mcp.json config (repeatable)")
    g = p.add_argument_group("standard tool library")
    g.add_argument("--no-stdlib", action="store_true",
                   help="do not make the standard tool library available")
    g.add_argument("--stdlib", default=None, metavar="GROUPS",
                   help="only these standard groups or tools, comma-separated (e.g. http,text,files.read)")
    g.add_argument("--sandbox", default=None, metavar="DIR",
                   help="root directory the standard file and document tools are confined to "
                        "(default: the current directory)")
    g.add_argument("--stdlib-config", default=None, metavar="FILE",
                   help="YAML/JSON file of StdlibConfig settings (sandbox_root, http_allow_list, "
                        "smtp_host, smtp_port, memory_db_path, enable_shell, ...)")
    g.add_argument("--allow-host", action="append", default=[], metavar="HOST|CIDR",
                   help="let the standard HTTP tools reach this host or network despite the SSRF "
                        "guard (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sophon-dsl", description="Check, format, draw and run sophon-dsl plans.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("check", help="report every problem in one or more plans")
    p.add_argument("plans", nargs="+", metavar="PLAN", help="plan files ('-' for stdin)")
    _add_source_args(p)
    _add_tools_arg(p)
    p.add_argument("--json", action="store_true", help="print diagnostics as a JSON list")
    p.add_argument("--max-calls", type=positive_int, default=None, metavar="N",
                   help="refuse plans with more than N calls (default: unlimited for files)")

    p = sub.add_parser("fmt", help="print a plan in canonical form, or convert between forms")
    p.add_argument("plan", metavar="PLAN")
    _add_source_args(p)
    p.add_argument("--to", choices=FORMATS, default=None, help="output form (default: the input's)")
    p.add_argument("--check", action="store_true", help="exit 1 if the file is not already formatted")
    p.add_argument("-w", "--write", action="store_true", help="write the result back to the file")

    p = sub.add_parser("graph", help="draw the plan's data-flow graph")
    p.add_argument("plan", metavar="PLAN")
    _add_source_args(p)
    _add_tools_arg(p)
    p.add_argument("--format", choices=("mermaid", "dot", "json"), default="mermaid")

    from .cli_run import add_run_parsers

    add_run_parsers(sub, _add_source_args, _add_tools_arg)

    from .llm.constrained_cli import register as register_constrained

    COMMANDS.update(register_constrained(sub, _add_tools_arg, _registry))

    from .llm.cli import register as register_agent

    COMMANDS.update(register_agent(sub, _add_source_args, _add_tools_arg, _registry))
    return parser


# ---------------------------------------------------------------------------


def _read_plan(name: str, from_format: str | None) -> LoadResult:
    if name == "-":
        if from_format is None:
            raise UsageError("reading a plan from stdin needs --from dsl|yaml|json")
        raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                from .model import Plan

                return LoadResult(Plan(file="<stdin>"), [Diagnostic(
                    "E005", f"cannot read '<stdin>': {exc}", file="<stdin>")])
        return parse(raw, from_format, file="<stdin>")
    if from_format is None and format_for_path(name) is None:
        raise UsageError(f"cannot tell the form of {name!r} from its extension; pass --from dsl|yaml|json")
    return parse_file(name, from_format)


def _stdlib_choice(args: argparse.Namespace) -> Any:
    """What ``--no-stdlib``, ``--stdlib``, ``--sandbox`` and ``--allow-host`` ask for."""
    sandbox, hosts = getattr(args, "sandbox", None), tuple(getattr(args, "allow_host", ()) or ())
    config_file = getattr(args, "stdlib_config", None)
    if getattr(args, "no_stdlib", False):
        given = [flag for flag, value in (("--stdlib", getattr(args, "stdlib", None)), ("--sandbox", sandbox),
                                          ("--stdlib-config", config_file), ("--allow-host", hosts or None))
                 if value is not None]
        if given:
            raise UsageError(f"--no-stdlib cannot be combined with {', '.join(given)}, "
                             "which configure the standard tool library")
        return False
    only = None
    if getattr(args, "stdlib", None) is not None:
        only = [x.strip() for x in args.stdlib.split(",") if x.strip()]
        if not only:
            raise UsageError(f"--stdlib: expected comma-separated standard groups or tools "
                             f"(e.g. http,text,files.read), got {args.stdlib!r}")
    for host in hosts:
        _check_host("--allow-host", host)
    if only is None and sandbox is None and not hosts and config_file is None:
        return True
    from stdlib_tools import StdlibConfig, all_tools

    kwargs: dict[str, Any] = _read_stdlib_config(config_file) if config_file else {}
    if sandbox is not None:
        if not Path(sandbox).is_dir():
            raise UsageError(f"--sandbox: {sandbox!r} is not a directory")
        kwargs["sandbox_root"] = sandbox
    if hosts:  # --allow-host adds to the config file's list
        kwargs["http_allow_list"] = (*kwargs.get("http_allow_list", ()), *hosts)
    try:
        config = StdlibConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--stdlib-config: {exc}") from None
    try:
        all_tools(config, only=only)  # validates the names now, as a usage error
    except ValueError as exc:
        raise UsageError(f"--stdlib: {exc}") from None
    if only is None:
        return config
    return _Picked(config, only)


def _read_stdlib_config(path: str) -> dict[str, Any]:
    import dataclasses

    import yaml
    from stdlib_tools import StdlibConfig

    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise UsageError(f"--stdlib-config: cannot read {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--stdlib-config: cannot read {path!r}: not UTF-8 ({exc.reason} at byte "
                         f"{exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else repr(path)
        reason = getattr(exc, "problem", None) or exc
        raise UsageError(f"--stdlib-config: {where}: not valid YAML/JSON: {reason}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--stdlib-config: {path!r} must hold a mapping of settings")
    known = {f.name for f in dataclasses.fields(StdlibConfig)} - {"http_transport"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UsageError(f"--stdlib-config: unknown setting(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(known))}")
    hosts = data.get("http_allow_list")
    if isinstance(hosts, str):
        data["http_allow_list"] = (hosts,)
    elif isinstance(hosts, list) and all(isinstance(h, str) for h in hosts):
        data["http_allow_list"] = tuple(hosts)
    elif hosts is not None:
        raise UsageError("--stdlib-config: http_allow_list must be a host or a list of hosts/CIDRs")
    for host in data.get("http_allow_list", ()):
        _check_host("--stdlib-config: http_allow_list", host)
    root = data.get("sandbox_root")
    if root is not None and not (isinstance(root, str) and Path(root).is_dir()):
        raise UsageError(f"--stdlib-config: sandbox_root {root!r} is not a directory")
    types = {f.name: str(f.type) for f in dataclasses.fields(StdlibConfig)}
    for key, value in data.items():
        expected = _CONFIG_TYPES.get(types.get(key, ""))
        if expected is None:
            continue
        label, ok = expected
        if not ok(value):
            raise UsageError(f"--stdlib-config: {path!r}: {key} must be {label}, "
                             f"got {json.dumps(value, default=str)}")
    return data


def _is_number(v: Any) -> bool:
    import math

    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


# annotation of a StdlibConfig field -> (what it must be, check); other fields are checked above
_CONFIG_TYPES: dict[str, tuple[str, Any]] = {
    "int": ("a whole number >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "float": ("a number >= 0", _is_number),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "bool | None": ("true, false or null", lambda v: v is None or isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "str | None": ("a string or null", lambda v: v is None or isinstance(v, str)),
}


def _check_host(flag: str, host: str) -> None:
    """A host name (``api.local``, ``*.corp.example``), an IP address or a CIDR network."""
    import ipaddress
    import re

    text = host.strip()
    if "/" in text or ":" in text or re.fullmatch(r"[0-9.]+", text):
        try:
            ipaddress.ip_network(text.strip("[]"), strict=False)
            return
        except ValueError as exc:
            raise UsageError(f"{flag}: {host!r} is not an IP address or CIDR network: {exc}") from None
    label = r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?"
    if not re.fullmatch(rf"(\*\.)?{label}(\.{label})*\.?", text):
        raise UsageError(f"{flag}: {host!r} is not a host name (api.example.com, *.corp.example), "
                         "an IP address or a CIDR network")


class _Picked:
    """A stdlib selection with a config: what ``stdlib_fallback`` builds from."""

    def __init__(self, config: Any, only: list[str]):
        self.config, self.only = config, only

    def __call__(self) -> list:
        from stdlib_tools import all_tools

        return all_tools(self.config, only=self.only)


def _registry(args: argparse.Namespace):
    from .tools import ToolRegistry, as_registry
    from .toolsource import load_tool_sources

    tools, diags = load_tool_sources(args.tools)
    if has_errors(diags):
        raise UsageError(render_text(diags, sources=_tool_sources_text(diags)))
    choice = _stdlib_choice(args)
    if isinstance(choice, _Picked):
        registry = ToolRegistry(tools, fallback=choice)
    else:
        registry = as_registry(tools, stdlib=choice)
    return registry, registry.notes()


def _tool_sources_text(diags: Sequence[Diagnostic]) -> dict[str, str]:
    """The text of each tools file a positioned diagnostic points into (for the source excerpt)."""
    sources: dict[str, str] = {}
    for d in diags:
        if d.file and d.span is not None and d.file not in sources:
            try:
                sources[d.file] = Path(d.file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                pass
    return sources


def _print_diagnostics(diags: Sequence[Diagnostic], sources: dict[str, str], as_json: bool) -> None:
    if as_json:
        print(render_json(diags))
    elif diags:
        print(render_text(diags, sources=sources), file=sys.stderr)


def cmd_check(args: argparse.Namespace) -> int:
    from .compiler import check

    registry, notes = _registry(args)
    all_diags: list[Diagnostic] = []
    sources: dict[str, str] = {}
    for name in args.plans:
        result = _read_plan(name, args.from_format)
        plan = result.plan
        if plan.file and plan.source is not None:
            sources[plan.file] = plan.source
        diags = list(result.diagnostics)
        if result.ok:
            diags.extend(d.with_file(plan.file) for d in check(plan, tools=registry, max_calls=args.max_calls))
        all_diags.extend(diags)
    all_diags.extend(notes)
    _print_diagnostics(all_diags, sources, args.json)
    errors = sum(1 for d in all_diags if d.is_error)
    warnings = sum(1 for d in all_diags if d.severity.value == "warning")
    if not args.json:
        summary = f"{len(args.plans)} plan(s) checked: {errors} error(s), {warnings} warning(s)"
        # after the diagnostics, on the same stream, so the two never interleave
        print(summary, file=sys.stderr if all_diags else sys.stdout)
    return EXIT_FAIL if errors else EXIT_OK


def cmd_fmt(args: argparse.Namespace) -> int:
    from .loader import dumps

    result = _read_plan(args.plan, args.from_format)
    plan = result.plan
    if not result.ok:
        _print_diagnostics(result.diagnostics, {plan.file or "": plan.source or ""}, False)
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
            out_path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"-w: cannot write {str(out_path)!r}: {exc.strerror or exc}") from None
        print(f"wrote {out_path}", file=sys.stderr)
        return EXIT_OK
    sys.stdout.write(text)
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    from . import graph
    from .compiler import compile_plan

    result = _read_plan(args.plan, args.from_format)
    plan = result.plan
    if not result.ok:
        _print_diagnostics(result.diagnostics, {plan.file or "": plan.source or ""}, False)
        return EXIT_FAIL
    registry, _ = _registry(args)
    compiled = compile_plan(plan, tools=registry)
    render = {"mermaid": graph.to_mermaid, "dot": graph.to_dot, "json": graph.to_json}[args.format]
    out = render(compiled)
    if not isinstance(out, str):
        out = json.dumps(out, ensure_ascii=False, indent=2)
    print(out)
    cycles = [d for d in compiled.diagnostics if d.code == "E302"]
    if cycles:
        _print_diagnostics(cycles, {plan.file or "": plan.source or ""}, False)
        return EXIT_FAIL
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from .cli_run import cmd_run as run_command

    return run_command(args, _read_plan, _registry)


def cmd_dry_run(args: argparse.Namespace) -> int:
    from .cli_run import cmd_dry_run as dry_run_command

    return dry_run_command(args, _read_plan, _registry)


COMMANDS = {"check": cmd_check, "fmt": cmd_fmt, "graph": cmd_graph, "run": cmd_run, "dry-run": cmd_dry_run}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"sophon-dsl {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
