"""sophon-dsl: a declarative plan language and interpreter for LLM agents.

The public surface is small::

    import sophon_dsl

    plan = sophon_dsl.load("examples/competitors.plan")      # or loads(text, format="yaml")
    problems = sophon_dsl.check(plan, tools=[search, send])  # every diagnostic, in one pass
    print(sophon_dsl.dumps(plan, format="json"))

See ``docs/quickstart.md``.
"""

from __future__ import annotations

from typing import Any

from .diagnostics import Diagnostic, DiagnosticError, Severity, Span
from .errors import SophonError
from .loader import dumps, load, loads
from .model import Call, Mode, Plan, Risk
from .tools import CallContext, ToolRegistry, ToolSpec, tool

__all__ = [
    "Agent",
    "Call",
    "CallContext",
    "DaskExecutor",
    "Diagnostic",
    "DiagnosticError",
    "GoalRunner",
    "Mode",
    "Plan",
    "Risk",
    "Severity",
    "SophonError",
    "Span",
    "ToolRegistry",
    "ToolSpec",
    "arun",
    "aresume",
    "check",
    "current_call",
    "dry_run",
    "dumps",
    "load",
    "loads",
    "open_store",
    "resume",
    "run",
    "start",
    "tool",
]

__version__ = "0.1.0"


def check(plan: Plan, tools: Any = None, *, max_calls: int | None = None,
          stdlib: Any = True) -> list[Diagnostic]:
    """Every static problem of ``plan`` against ``tools`` (see ``spec/diagnostics.md``).

    The standard tool library is available unless ``stdlib=False`` (or a
    :class:`ToolRegistry` is passed, which lists exactly the tools that exist);
    ``stdlib`` may also be a ``stdlib_tools.StdlibConfig`` or group names.  A
    tool of yours that replaces a standard one is reported as an N201 note.
    The library is found by name (:mod:`sophon_dsl.stdlib_hook`; none when it is
    not installed) and built once per process and configuration.
    """
    from .compiler import check as _check
    from .tools import as_registry
    from .toolsource import resolve_tools

    registry = as_registry(resolve_tools(tools), stdlib=stdlib)
    return [*_check(plan, tools=registry, max_calls=max_calls), *registry.notes()]


def __getattr__(name: str) -> Any:
    # The runtime is imported on first use, so ``import sophon_dsl`` stays cheap for tools
    # that only parse and check plans.
    if name in ("run", "arun", "start", "dry_run"):
        from . import runtime

        return getattr(runtime, name)
    if name in ("open_store", "current_call"):  # durable runs (docs/runtime.md)
        from . import durable

        return getattr(durable, name)
    if name in ("resume", "aresume"):
        from .durable import resume as resuming

        return getattr(resuming, name)
    if name == "Agent":
        from .llm.agent import Agent

        return Agent
    if name == "GoalRunner":
        from .goals import GoalRunner

        return GoalRunner
    if name == "DaskExecutor":  # tool calls on a Dask cluster (docs/scale-out.md); Dask itself loads later
        from .scaleout import DaskExecutor

        return DaskExecutor
    raise AttributeError(f"module 'sophon_dsl' has no attribute {name!r}")
