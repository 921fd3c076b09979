"""sophon-dsl: a declarative plan language and interpreter for LLM agents.

The public surface is small::

    import sophon_dsl

    plan = sophon_dsl.load("examples/competitors.plan")      # or loads(text, format="yaml")
    problems = sophon_dsl.check(plan, tools=[search, send])  # every diagnostic, in one pass
    print(sophon_dsl.dumps(plan, format="json"))

See ``docs/quickstart.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import SophonError

if TYPE_CHECKING:
    from .diagnostics import Diagnostic, DiagnosticError, Severity, Span
    from .loader import dumps, load, loads
    from .model import Call, Mode, Plan, Risk
    from .tools import CallContext, ToolRegistry, ToolSpec, tool

# name -> the module that defines it: imported on first use, so that what imports a
# submodule (`sophon-dsl --help` imports sophon_dsl.cli) does not pay for the whole core
_LAZY = {
    "Diagnostic": "diagnostics", "DiagnosticError": "diagnostics", "Severity": "diagnostics",
    "Span": "diagnostics",
    "dumps": "loader", "load": "loader", "loads": "loader",
    "Call": "model", "Mode": "model", "Plan": "model", "Risk": "model",
    "CallContext": "tools", "ToolRegistry": "tools", "ToolSpec": "tools", "tool": "tools",
    # the runtime, durable runs (docs/runtime.md), the agent, goals, and tool calls on a Dask
    # cluster (docs/scale-out.md; Dask itself loads later)
    "run": "runtime", "arun": "runtime", "start": "runtime", "dry_run": "runtime",
    "open_store": "durable", "current_call": "durable",
    "resume": "durable.resume", "aresume": "durable.resume",
    "Agent": "llm.agent", "GoalRunner": "goals", "DaskExecutor": "scaleout",
}

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
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sophon_dsl' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    if module in ("diagnostics", "loader", "model", "tools"):
        # (imported eagerly before: bound here from now on; the runtime's names are looked up
        # on every use, as they always were, so patching them in their module shows here)
        globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
