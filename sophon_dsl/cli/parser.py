"""Every command's flags, in one light module: ``sophon-dsl --help`` builds the parser from
here without importing any command's implementation (``sophon_dsl.cli.<command>``).

Adding a command: declare its flags in a ``_<command>_args`` function below, list it in
:data:`COMMAND_ARGS`, and write ``sophon_dsl/cli/<module>.py`` with ``run(args) -> int``
(named in ``sophon_dsl.cli.COMMAND_MODULES``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from ..errors import SophonError
from .common import EXIT_USAGE, byte_size, positive_int, positive_seconds

# the plan forms (sophon_dsl.loader.FORMATS, which a test holds equal: the loader is not
# imported here, so that `sophon-dsl --help` does not load the core)
FORMATS = ("dsl", "json", "yaml")

__all__ = ["COMMAND_ARGS", "NotBuilt", "add_source_args", "add_tools_arg", "build_parser", "command_in", "version"]


class _Parser(argparse.ArgumentParser):
    """No prefix matching (``--js`` is not ``--json``: a later flag would change its meaning),
    for every command's parser too; a misspelt choice gets a did-you-mean."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # argparse's default prints usage and exits 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}{_did_you_mean(message)}\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, extras = super().parse_known_args(args, namespace)
        # the innermost parser (the command's) returns first: it knows the flags to suggest
        if extras and getattr(ns, _EXTRA_PARSER, None) is None:
            setattr(ns, _EXTRA_PARSER, self)
        return ns, extras

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, extras = self.parse_known_args(args, namespace)
        parser = vars(ns).pop(_EXTRA_PARSER, None) or self
        if extras:
            # argparse's own message, from the command's parser (its usage, its flags), with a
            # did-you-mean for a misspelt flag as for a misspelt command
            parser.error(f"unrecognized arguments: {' '.join(extras)}{_flag_hint(parser, extras)}")
        return ns


_EXTRA_PARSER = "_sophon_parser_of_extras"


def _flag_hint(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """``; did you mean '--tools'?`` for the first unknown flag close to one of ``parser``'s."""
    import difflib

    # compared without the dashes, which every flag shares and would make any two look alike
    known = {o[2:]: o for o in parser._option_string_actions if o.startswith("--")}
    for extra in extras:
        if extra.startswith("--"):
            close = difflib.get_close_matches(extra.split("=", 1)[0][2:], list(known), n=1, cutoff=0.7)
            if close:
                return f"; did you mean '{known[close[0]]}'?"
    return ""


def _did_you_mean(message: str) -> str:
    """``; did you mean 'check'?`` for argparse's "invalid choice: 'chek' (choose from ...)"."""
    import difflib
    import re

    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if found is None:
        return ""
    choices = re.findall(r"'([^']*)'", found.group(2))
    close = difflib.get_close_matches(found.group(1), choices, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def version() -> str:
    from .. import __version__

    return __version__


def add_source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="from_format", choices=FORMATS,
                   help="form of the plan (default: told by the extension, or by the text read from stdin '-')")


def add_tools_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tools", action="append", default=[], metavar="SOURCE",
                   help="tools: FILE.py, an importable MODULE, a YAML/JSON declarations file, "
                        "mcp:stdio:COMMAND, mcp:http:URL or an mcp.json config (repeatable)")
    g = p.add_argument_group("standard tool library")
    g.add_argument("--no-stdlib", action="store_true",
                   help="do not make the standard tool library available")
    g.add_argument("--stdlib", default=None, metavar="GROUPS",
                   help="only these standard groups or tools, comma-separated (e.g. http,text,files.read)")
    g.add_argument("--sandbox", default=None, metavar="DIR",
                   help="an existing directory the standard file, document and shell tools are "
                        "confined to (default: a dedicated one per user, "
                        "$XDG_DATA_HOME/sophon-dsl/sandbox; never the current directory)")
    g.add_argument("--stdlib-config", default=None, metavar="FILE",
                   help="YAML/JSON file of StdlibConfig settings (sandbox_root, http_allow_list, "
                        "smtp_host, smtp_port, memory_db_path, enable_shell, ...)")
    g.add_argument("--allow-host", action="append", default=[], metavar="HOST|CIDR",
                   help="let the standard HTTP tools reach this host or network despite the SSRF "
                        "guard (repeatable)")


def _data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", default=None, metavar="JSON|@FILE", help="the plan's input, as JSON or @file.json")
    p.add_argument("--state", default=None, metavar="JSON|@FILE", help="initial state, as JSON or @file.json")


def add_executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", default=None, metavar="SPEC",
                   help="where tool calls run: local (default), dask:local, dask:local-threads, "
                        "dask:tcp://HOST:PORT or dask:scheduler-file:PATH (default: $SOPHON_DSL_EXECUTOR; "
                        "docs/scale-out.md)")
    p.add_argument("--executor-config", default=None, metavar="FILE",
                   help="YAML: which tools go to the cluster and their resources "
                        "({tools: {PATTERN: {executor: dask, resources: {GPU: 1}}}, local: [NAMES]})")


# check, fmt and graph: what a PLAN argument may be (the walk is common.plan_files)
_PLANS_HELP = ("plan files, '-' for stdin, or directories: a directory is searched (with its "
               "subdirectories, hidden ones skipped) for *.plan, *.sophon and *.dsl files; "
               "JSON and YAML plans are read when named")


def _check_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="report every problem in one or more plans")
    p.add_argument("plans", nargs="+", metavar="PLAN", help=_PLANS_HELP)
    add_source_args(p)
    add_tools_arg(p)
    p.add_argument("--format", choices=("text", "json", "sarif", "github"), default=None,
                   help="text (default), json (a list), sarif (SARIF 2.1.0 for code scanning) or "
                        "github (workflow annotation lines)")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument("--strict", action="store_true", help="warnings fail the check too (exit 1)")
    p.add_argument("--max-calls", type=positive_int, default=None, metavar="N",
                   help="refuse plans with more than N calls (default: unlimited for files)")


def _fmt_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fmt", help="print plans in canonical form, or convert between forms")
    p.add_argument("plans", nargs="+", metavar="PLAN", help=_PLANS_HELP)
    add_source_args(p)
    p.add_argument("--to", choices=FORMATS, default=None, help="output form (default: the input's)")
    p.add_argument("--check", action="store_true", help="exit 1 if a file is not already formatted")
    p.add_argument("-w", "--write", action="store_true", help="write the results back to the files")


def _graph_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("graph", help="draw the data-flow graph of one or more plans")
    p.add_argument("plans", nargs="+", metavar="PLAN", help=_PLANS_HELP)
    add_source_args(p)
    add_tools_arg(p)
    p.add_argument("--format", choices=("mermaid", "dot", "json"), default="mermaid")


def _run_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a plan against real tools")
    p.add_argument("plan", metavar="PLAN")
    add_source_args(p)
    add_tools_arg(p)
    _data_args(p)
    p.add_argument("--approve", choices=("yes", "no", "ask", "wait"), default=None,
                   help="answer for plans with risky calls (default: ask on a terminal, else no; "
                        "wait: leave the run waiting for 'sophon-dsl approve RUN_ID')")
    p.add_argument("--json", action="store_true", help="print the RunResult as JSON, no progress view")
    p.add_argument("--strict", action="store_true",
                   help="refuse to start when the checker has warnings (as check --strict fails on them)")
    p.add_argument("--max-concurrency", type=positive_int, default=None, metavar="N",
                   help="run at most N calls at once")
    p.add_argument("--max-threads", type=positive_int, default=None, metavar="N",
                   help="threads for synchronous tools (default 64, sized for I/O-bound tools; "
                        "CPU-bound tools belong on --executor dask or in processes)")
    p.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS", help="timeout per call")
    p.add_argument("--max-time", type=positive_seconds, default=None, metavar="SECONDS",
                   help="wall-clock limit for the whole plan (it ends within it plus one second)")
    p.add_argument("--max-memory", type=byte_size, default=None, metavar="SIZE",
                   help="stop the run (Plan.MemoryExceeded) once it grows the process by more than SIZE "
                        "(2G, 512M, bytes)")
    p.add_argument("--max-calls", type=positive_int, default=None, metavar="N",
                   help="calls the run may make, map items included (default: no limit)")
    p.add_argument("--max-expanded-calls", type=positive_int, default=None, metavar="N",
                   help="calls maps may create (default 100000): Plan.TooManyCalls names the map past it")
    p.add_argument("--provider", default=None, metavar="SPEC",
                   help="language model that runs latent calls (openai[:MODEL], anthropic[:MODEL], "
                        "scripted:FILE, config:FILE, or several comma-separated for failover; SPEC[reasoning,...] "
                        "declares what a model can do, for model hints)")
    p.add_argument("--model", default=None, metavar="M", help="model name for --provider")
    p.add_argument("--smart-retry", action="store_true",
                   help="after a call's retries, let --provider suggest one alternative call (docs/planning.md)")
    p.add_argument("--max-turns", type=positive_int, default=None, metavar="N",
                   help="turns of each imported plan step's sub-agent (ExecutionPlan / step list; default 4)")
    p.add_argument("--hinted-tools-only", action="store_true",
                   help="offer an imported plan step's sub-agent only the tools its toolHints name")
    add_cascade_arg(p)
    add_store_args(p)
    add_executor_args(p)


def _dry_run_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dry-run", help="simulate a plan with mocks; nothing real runs")
    p.add_argument("plan", metavar="PLAN")
    add_source_args(p)
    add_tools_arg(p)
    _data_args(p)
    p.add_argument("--mocks", default=None, metavar="FILE",
                   help="YAML/JSON mocks per call id or tool: result, error, latency, or a list of them")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def grammar_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("grammar", help="print the DSL grammar for grammar-constrained decoders")
    p.add_argument("--format", choices=("llguidance", "lark"), default="llguidance",
                   help="llguidance: Lark dialect of llguidance (vLLM, SGLang, llama.cpp); "
                        "lark: the source grammar (LALR + the parser's post-lexer)")


def schema_args(sub: argparse._SubParsersAction,
                tools_arg: Callable[[argparse.ArgumentParser], None] = add_tools_arg) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of the solution object for the tools "
                                      "(OpenAI strict structured outputs)")
    tools_arg(p)
    p.add_argument("--output-schema", metavar="FILE", default=None,
                   help="JSON Schema of the final output (default: any value)")
    p.add_argument("--all-meta", action="store_true",
                   help="every meta-property on each call (default: _id, _outputPath, _outputMethod, "
                        "_after, _output)")
    p.add_argument("--no-patterns", action="store_true",
                   help="leave out 'pattern' (fine-tuned OpenAI models reject it)")
    p.add_argument("--loose", action="store_true",
                   help="not strict mode: open objects stay open, optional properties optional")
    p.add_argument("--response-format", action="store_true",
                   help="wrap it as an OpenAI response_format object")


def _classify_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("classify", help="score a request by the planning classifier: would it be planned?")
    p.add_argument("request", metavar="REQUEST", help="the request to score")
    p.add_argument("--json", action="store_true", help='print {"score", "signals", "plan"} as JSON')


def agent_args(sub: argparse._SubParsersAction,
               tools_arg: Callable[[argparse.ArgumentParser], None] = add_tools_arg) -> None:
    p = sub.add_parser("agent", help="let a language model plan in the DSL and run its plans, turn after turn")
    p.add_argument("request", metavar="REQUEST", help="what the agent should do")
    tools_arg(p)
    p.add_argument("--provider", required=True, metavar="SPEC",
                   help="openai[:MODEL], anthropic[:MODEL], scripted:FILE, config:FILE, or several comma-separated "
                        "(failover); SPEC[reasoning,...] declares what a model can do, for model hints")
    p.add_argument("--model", default=None, metavar="M", help="model name (default: the provider's)")
    p.add_argument("--input", default=None, metavar="JSON|@FILE", help="the input, as JSON or @file.json")
    p.add_argument("--state", default=None, metavar="JSON|@FILE", help="initial state, as JSON or @file.json")
    p.add_argument("--plan", default=None, metavar="FILE",
                   help="an existing plan (DSL, JSON or YAML; - for stdin) handed to the model as its Plan "
                        "message: the agent continues from it, where --state says it stands (seed 004)")
    p.add_argument("--stateless", action="store_true",
                   help="send each turn the plan and the state only, never a conversation of earlier turns")
    p.add_argument("--mode", choices=("eager", "lazy"), default="eager",
                   help="eager: calls run while the reply streams; lazy: check, dry-run, approve, then run")
    p.add_argument("--approve", choices=("yes", "no", "ask", "wait"), default=None,
                   help="risky calls (and lazy plans that hold one): default ask on a terminal, else no; "
                        "wait: leave the recorded run waiting for 'sophon-dsl approve RUN_ID'")
    p.add_argument("--max-turns", type=int, default=None, metavar="N",
                   help="at most N requests (default 8; 100 with --planning, the seed's MaxToolIterations)")
    p.add_argument("--max-calls", type=int, default=100, metavar="N",
                   help="at most N calls per turn, map items included (default 100)")
    p.add_argument("--max-threads", type=positive_int, default=None, metavar="N",
                   help="threads for synchronous tools (default 64, sized for I/O-bound tools; "
                        "CPU-bound tools belong on --executor dask or in processes)")
    p.add_argument("--dispatch", choices=("streamed", "after_reply"), default="streamed",
                   help="streamed: each call starts as its line arrives; after_reply: the whole reply "
                        "is read (and checked) before any call starts")
    p.add_argument("--max-time", type=positive_seconds, default=None, metavar="SECONDS",
                   help="wall-clock limit for the whole agent run, replies and calls (default: none)")
    p.add_argument("--max-tokens", type=positive_int, default=4096, metavar="N",
                   help="tokens each reply may use, sent with every request (default 4096)")
    p.add_argument("--delegate-dir", default=None, metavar="DIR",
                   help="where saved requests named by @delegate(...) are looked up (default: .)")
    add_executor_args(p)
    p.add_argument("--planning", choices=("auto", "llm", "always", "never"), default=None,
                   help="decide per request whether to plan first (lazy: check, dry-run, approve, run) "
                        "or run calls as they stream (eager); wins over --mode (docs/planning.md)")
    p.add_argument("--smart-retry", action="store_true",
                   help="after a call's retries, let the model suggest one alternative call")
    p.add_argument("--stream-order", choices=("any", "written"), default="any",
                   help="any: a streamed read goes once the writers written before it end (a read "
                        "written before its writers waits for the end of the reply; a writer after an "
                        "answered reader is refused, E212); written: also reads of earlier turns' data go "
                        "at once, and a writer arriving after its reader ran is refused (E212)")
    p.add_argument("--reply-form", choices=("dsl", "json"), default="dsl",
                   help="the plan form the system prompt teaches (json: for JSON-mode models; "
                        "replies in either form are read)")
    p.add_argument("--max-reply-bytes", type=byte_size, default=None, metavar="SIZE",
                   help="cut a reply past SIZE (default 1M) and tell the next turn (Reply.TooLarge)")
    add_cascade_arg(p)
    add_store_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON, no progress view")


def _goal_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("goal", help="reach a goal: plan steps, run them with sub-agents, judge each, replan on failure")
    p.add_argument("goal", metavar="GOAL", help="what should be achieved")
    add_tools_arg(p)
    p.add_argument("--provider", required=True, metavar="SPEC",
                   help="the sub-agents' provider: openai[:MODEL], anthropic[:MODEL], scripted:FILE, ...")
    p.add_argument("--planner-provider", default=None, metavar="SPEC",
                   help="the planner's provider (heavy tier; default: --provider)")
    p.add_argument("--evaluator-provider", default=None, metavar="SPEC",
                   help="the step evaluator's provider (nano tier; default: --provider)")
    p.add_argument("--model", default=None, metavar="M", help="the sub-agents' model (default: the provider's)")
    p.add_argument("--input", default=None, metavar="JSON|@FILE", help="data for the goal, as JSON or @file.json")
    p.add_argument("--max-goal-steps", type=int, default=None, metavar="N",
                   help="at most N steps in all (default: $MAX_GOAL_STEPS or 30)")
    p.add_argument("--max-replans", type=int, default=None, metavar="N",
                   help="at most N replans (default: $MAX_REPLAN_ATTEMPTS or 8)")
    p.add_argument("--max-turns", type=int, default=4, metavar="N", help="turns per step's sub-agent (default 4)")
    p.add_argument("--approve", choices=("yes", "no", "ask"), default=None,
                   help="risky calls and steps that need a person: default ask on a terminal; elsewhere risky "
                        "calls are refused and a step that needs a person ends the run 'hitl'")
    p.add_argument("--store", default=None, metavar="URL",
                   help="record the goal (default: $SOPHON_DSL_STORE, else the per-user SQLite file), so a "
                        "goal waiting for a person continues with 'sophon-dsl approve RUN_ID'")
    p.add_argument("--no-store", action="store_true", help="do not record the goal (it cannot be continued)")
    add_cascade_arg(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON, no progress view")


# in the order ``--help`` lists them
COMMAND_ARGS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    _check_args, _fmt_args, _graph_args, _run_args, _dry_run_args, grammar_args, schema_args, agent_args,
    _classify_args, _goal_args,
)


def add_cascade_arg(p: argparse.ArgumentParser) -> None:
    """What a failed call does to the calls that depend on it (docs/runtime.md, Cascade)."""
    p.add_argument("--cascade", choices=("skip", "partial"), default=None,
                   help="skip (default): a failed call's dependents are skipped; partial: a dependent "
                        "with another dependency that succeeded runs, reading the failure's {error, cause}")


def add_store_args(p: argparse.ArgumentParser) -> None:
    """Durable runs (docs/runtime.md): where the run is recorded."""
    p.add_argument("--store", default=None, metavar="URL",
                   help="record the run for resume: sqlite:///PATH.db or postgresql://... (default: "
                        "$SOPHON_DSL_STORE, else a per-user SQLite file under $XDG_DATA_HOME/sophon-dsl)")
    p.add_argument("--no-store", action="store_true", help="do not record the run (it cannot be resumed)")


def _store_only(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=None, metavar="URL",
                   help="the run store (default: $SOPHON_DSL_STORE, else the per-user SQLite file)")


def _runs_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="list the recorded runs, show, delete or prune them")
    which = p.add_subparsers(dest="runs_command", metavar="ACTION", parser_class=_Parser)
    which.required = True
    ls = which.add_parser("list", help="the recorded runs, newest first")
    ls.add_argument("--status", default=None, metavar="S",
                    help="only runs with this status (running, interrupted, waiting, succeeded, failed, "
                         "cancelled, rejected)")
    ls.add_argument("--json", action="store_true", help="print a JSON list")
    _store_only(ls)
    show = which.add_parser("show", help="one run: RunResult-shaped, with run_id and calls in doubt")
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--log", action="store_true", help="print the committed log too")
    show.add_argument("--json", action="store_true", help="print JSON")
    _store_only(show)
    delete = which.add_parser("delete", help="delete recorded runs with their logs and calls")
    delete.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    delete.add_argument("--json", action="store_true", help='print {"deleted": [...], "missing": [...]}')
    _store_only(delete)
    prune = which.add_parser("prune", help="delete the runs last updated longer ago than an age")
    prune.add_argument("--older-than", required=True, metavar="AGE",
                       help="30d, 12h, 90m, 45s or 2w: runs last updated longer ago are deleted")
    prune.add_argument("--status", default=None, metavar="S",
                       help="only runs with this status (default: every finished run; never running or "
                            "waiting ones unless named here)")
    prune.add_argument("--json", action="store_true", help='print {"deleted": [...]}')
    _store_only(prune)


def _resume_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resume", help="continue a recorded run: committed calls are not run again")
    p.add_argument("run_id", metavar="RUN_ID")
    add_tools_arg(p)
    p.add_argument("--approve", choices=("yes", "no", "ask", "wait"), default=None,
                   help="new approvals (stored decisions are reused): default ask on a terminal, else no")
    p.add_argument("--unknown", choices=("ask", "rerun", "fail"), default=None,
                   help="calls that started but whose outcome was not recorded (not idempotent): "
                        "default ask on a terminal, else fail (Call.OutcomeUnknown)")
    p.add_argument("--force", action="store_true", help="resume even if the plan or its tools' sources changed")
    p.add_argument("--provider", default=None, metavar="SPEC",
                   help="an agent run's provider (default: the one it was started with)")
    p.add_argument("--model", default=None, metavar="M",
                   help="an agent run's model (default: the one it was started with)")
    p.add_argument("--json", action="store_true", help="print the RunResult as JSON")
    _store_only(p)


def _approve_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("approve", help="answer the approval a waiting run waits for, and continue it")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--reject", action="store_true", help="reject instead of approving")
    p.add_argument("--reason", default="", metavar="TEXT", help="why (kept with the decision)")
    # (the run's own configuration is used when the store can vouch for it, docs/security.md;
    # else it is given again here, as for resume)
    add_tools_arg(p)
    p.add_argument("--provider", default=None, metavar="SPEC",
                   help="the run's provider (default: the one it was started with)")
    p.add_argument("--model", default=None, metavar="M", help="the run's model (default: the one it was started with)")
    p.add_argument("--json", action="store_true", help="print the RunResult as JSON")
    _store_only(p)


def _cancel_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cancel", help="cancel a recorded run, whichever process runs it (through its store)")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--reason", default="", metavar="TEXT", help="why (kept with the request and the run)")
    p.add_argument("--wait", type=positive_seconds, default=10.0, metavar="SECONDS",
                   help="wait this long for the run's process to end it (default 10)")
    p.add_argument("--no-wait", action="store_true", help="return once the request is stored")
    _store_only(p)


COMMAND_ARGS += (_runs_args, _resume_args, _approve_args, _cancel_args)


def _config_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show the project settings ([tool.sophon-dsl] in pyproject.toml, "
                                      "or sophon.toml) and where each comes from")
    p.add_argument("path", nargs="?", default=None, metavar="PATH",
                   help="a plan file or directory the settings are looked up for (default: the "
                        "working directory; the walk goes up to the first config file)")
    p.add_argument("--json", action="store_true", help="print {file, settings: {KEY: {value, origin}}} as JSON")


def _lsp_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lsp", help="run the language server (LSP over stdin/stdout; needs sophon-dsl[lsp])")
    p.add_argument("--stdio", action="store_true",
                   help="talk over stdin/stdout (the default and only transport; accepted for editors "
                        "that pass it)")
    p.add_argument("--debounce", type=float, default=0.05, metavar="SECONDS",
                   help="wait this long after the last change before re-checking (default 0.05)")


COMMAND_ARGS += (_config_args, _lsp_args)


def _ui_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ui", help="serve the web dashboard over the run store (the ui extra)")
    p.add_argument("--store", default=None, metavar="URL",
                   help="the run store (default: $SOPHON_DSL_STORE, else the per-user one); it must exist")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other needs --token)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--token", default=None, metavar="TOKEN",
                   help="access token checked on every request (default: $SOPHON_DSL_UI_TOKEN)")
    p.add_argument("--open", action="store_true", help="open the dashboard in the default browser")
    p.add_argument("--run", default=None, metavar="RUN_ID",
                   help="with --open: open this run's page ('latest': the newest run)")


COMMAND_ARGS += (_ui_args,)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``sophon-dsl`` parser.  ``command`` given, only that command's flags are declared
    and every other command is an outline (its name and help line: what the command list of
    ``--help`` and a misspelt command's message show); ``""`` outlines every command.
    Declaring the ~300 flags of every command costs more than the rest of ``--help``."""
    parser = _Parser(prog="sophon-dsl", description="Check, format, draw and run sophon-dsl plans.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser, action=_Commands)
    sub.required = True
    sub.built = command
    for add in COMMAND_ARGS:
        add(sub)
    return parser


def command_in(argv: list[str]) -> str:
    """The command ``argv`` names (the first argument that is not an option: the top-level
    options, ``--help`` and ``--version``, take no value), ``""`` when there is none."""
    for arg in argv:
        if arg == "--":
            break
        if not arg.startswith("-"):
            return arg
    return ""


class NotBuilt(SophonError):
    """Raised when an outlined command's parser is asked to parse: the caller builds the
    whole parser and parses again."""


class _Commands(argparse._SubParsersAction):
    """The subcommands' action: the commands other than ``built`` are :class:`_Outline`s
    (``built`` None: every command is declared whole)."""

    built: str | None = None

    def add_parser(self, name: str, **kwargs):  # type: ignore[override]
        if self.built is None or name == self.built:
            return super().add_parser(name, **kwargs)
        declared, self._parser_class = self._parser_class, _Outline
        try:
            return super().add_parser(name, **kwargs)
        finally:
            self._parser_class = declared


class _Outline(_Parser):
    """A command's parser whose flags are not declared: what declares them is a no-op here."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["add_help"] = False
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs) -> None:  # type: ignore[override]
        return None

    def add_argument_group(self, *args, **kwargs) -> "_Outline":  # type: ignore[override]
        return self

    def add_mutually_exclusive_group(self, **kwargs) -> "_Outline":  # type: ignore[override]
        return self

    def set_defaults(self, **kwargs) -> None:
        return None

    def add_subparsers(self, **kwargs) -> "_OutlineCommands":  # type: ignore[override]
        return _OutlineCommands()

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        raise NotBuilt(self.prog)


class _OutlineCommands:
    """The subcommands of an outlined command (``runs list``...): outlines too."""

    required = False

    def add_parser(self, name: str, **kwargs) -> _Outline:
        return _Outline(prog=name)
