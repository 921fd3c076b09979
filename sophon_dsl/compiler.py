"""The compiler: builds a plan's dependency graph and runs every static check.

:func:`compile_plan` returns a :class:`CompiledPlan` (the DAG the runtime
executes plus every diagnostic found); :func:`check` returns only the
diagnostics.  Every check runs: a plan with five problems gets five
diagnostics, each with its code and the span of the offending node.

Dependency rules
----------------
* A call *reads* every :class:`~sophon_dsl.model.Reference` inside its
  parameter values: whole-value references, every operand of ``||`` / ``&&``
  expressions and every reference embedded in a template, at any depth of
  lists and objects.  References inside an inline ``_output`` are not reads.
* A call *writes* every path of its output target: all alternatives of
  ``||`` and all paths of ``&&``.
* A read of key ``(kind, *path)`` depends on every *other* call that writes
  the same key, a prefix of it (``†state`` / ``†state.a`` for a read of
  ``†state.a.b``) or an extension of it (``†state.a.b.c`` for a read of
  ``†state.a.b``), wherever the writer stands in the text.  A call never
  depends on itself through data (reading a path it also writes reads the
  value from before the call).
* ``after`` adds control edges.  ``deps`` is the union of data and control
  predecessors.

Checks (spans point at the offending node)
------------------------------------------
Each check is a rule in :mod:`sophon_dsl.checks` (one module per concern, each
declaring its codes and whether it checks one call or the whole plan); the
registry ``sophon_dsl.checks.RULES`` lists them and ``spec/diagnostics.md``
documents every code.  Diagnostics are sorted by position.  The wiring comes
from :class:`~sophon_dsl.dataflow.DataFlow`: building it is linear in the size
of the plan (plus the number of edges).

Cost per call
-------------
Checking runs before every run of a plan, so its per-call cost is framework
overhead.  What depends on the tool only (required names, which names are
allowed, the fast literal check, accepted types) is computed once per tool and
list of parameter names (``checks.context.Signature``), not per call; each rule
over a whole plan has its own tight loop that skips what needs nothing (a read
with a writer has a source and a known kind; a clean signature has nothing for
E201-E203).  Messages and locations are built only when a diagnostic is
emitted.  When every dependency points to an earlier call the topological order
is the plan order (no sort, no cycle search).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .checks import Checker
from .checks.schema import fast_schema_check  # re-exported: the runtime's fast schema path
from .dataflow import BUILTIN_KINDS, DataFlow
from .diagnostics import Diagnostic, has_errors, sort_key
from .maps import MAP_TOOL
from .model import Call, Plan, Reference
from .outputpath import prescribe_plan
from .tools import ToolRegistry, ToolSpec, as_registry
from .toolsource import resolve_tools

__all__ = [
    "AGENT_STEP",
    "BUILTIN_KINDS",
    "CompiledPlan",
    "check",
    "compile_plan",
    "effective_registry",
    "fast_schema_check",
]


_STR_OR_LIST = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}

#: The builtin latent tool every Sophon ExecutionPlan / JarvisCore step becomes.
AGENT_STEP = ToolSpec(
    name="agent.step",
    description="A free-form agent step executed by an LLM (Sophon / JarvisCore plans).",
    input_schema={
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "task": {"type": "string"},
            "toolHints": _STR_OR_LIST,
            "expected_findings": _STR_OR_LIST,
            "subagent_hint": {"type": "string"},
        },
        # Step converters may carry extra fields through; keep the builtin open.
        "additionalProperties": True,
    },
    output_schema=None,
    origin="builtin",
)


def _map_runs_in_the_scheduler(**_: Any) -> Any:
    # (reached only where no MapDriver expands it: a plan streamed in while it runs)
    raise RuntimeError("a map is not expanded while its plan streams in; run the plan once the reply "
                       "has ended")


#: The builtin tool of map calls (``sophon_dsl.maps``): code, no parameter checks (the map's
#: options are checked by checks/maps.py), a list as its result.
MAP_SPEC = ToolSpec(
    name=MAP_TOOL,
    description="Run the body's calls once per item of a list; the items' results, in order.",
    input_schema=None,
    output_schema={"type": "array"},
    func=_map_runs_in_the_scheduler,
    origin="builtin",
)


@dataclass(frozen=True, repr=False)
class CompiledPlan:
    """A checked plan and its dependency graph.

    ``flow`` is the plan's :class:`~sophon_dsl.dataflow.DataFlow` (writers, reads,
    edges); the other graph fields are views of it kept for callers of the compiler:
    ``deps[i]`` are the call indexes call ``i`` waits for (data + control);
    ``data_deps[i]`` lists, for each reference call ``i`` reads (in source order), the
    indexes of the calls that may write it; ``control_deps[i]`` the indexes named by
    its ``after``.  ``writers`` maps a written key ``(kind, *path)`` to
    ``(call index, output path index)`` pairs.  ``order`` is a topological order,
    smallest index first among ready calls; calls on a cycle (only when ``ok`` is
    false) come last in position order.
    """

    plan: Plan
    tools: ToolRegistry
    ids: Sequence[str]  # each call's id (a dataflow.CallIds: made when read)
    flow: DataFlow = field(compare=False)
    control_deps: tuple[frozenset[int], ...]
    writers: Mapping[tuple, tuple[tuple[int, int], ...]]  # a read-only view of the writer index
    order: tuple[int, ...]
    diagnostics: tuple[Diagnostic, ...]
    ok: bool
    index: Mapping[str, int]  # call id -> index (first call with that id)

    @property
    def deps(self) -> tuple[frozenset[int], ...]:
        d = self.__dict__.get("_deps")
        if d is None:
            d = tuple([frozenset(x) for x in self.flow.deps])
            object.__setattr__(self, "_deps", d)
        return d

    @property
    def data_deps(self) -> tuple[tuple[tuple[Reference, tuple[int, ...]], ...], ...]:
        d = self.__dict__.get("_data_deps")
        if d is None:
            flow = self.flow
            d = tuple(tuple((r.ref, r.writers) for r in flow.reads(i)) for i in range(len(flow)))
            object.__setattr__(self, "_data_deps", d)
        return d

    def __repr__(self) -> str:
        return (f"{type(self).__qualname__}(plan={self.plan!r}, tools={self.tools!r}, ids={self.ids!r}, "
                f"deps={self.deps!r}, data_deps={self.data_deps!r}, control_deps={self.control_deps!r}, "
                f"writers={self.writers!r}, order={self.order!r}, diagnostics={self.diagnostics!r}, "
                f"ok={self.ok!r}, index={self.index!r})")

    @property
    def calls(self) -> tuple[Call, ...]:
        return self.plan.calls

    def dependents(self) -> tuple[tuple[int, ...], ...]:
        """For each call, the calls that wait for it (the reverse of ``deps``)."""
        out: list[list[int]] = [[] for _ in self.plan.calls]
        for i, ds in enumerate(self.deps):
            for d in ds:
                out[d].append(i)
        return tuple(tuple(sorted(x)) for x in out)


def effective_registry(plan: Plan, tools: Any = None) -> ToolRegistry:
    """User tools + the builtin ``agent.step`` (unless overridden) + the plan's declarations."""
    reg = as_registry(resolve_tools(tools))
    # Ask the tools given first: ``in`` on the registry itself may build a lazy standard
    # library only to learn it has no agent.step.
    if reg.given(AGENT_STEP.name) is None:
        reg = reg.with_tools([AGENT_STEP])
    if reg.given(MAP_TOOL) is None and _has_map(plan):
        reg = reg.with_tools([MAP_SPEC])
    if plan.tools:
        reg = reg.with_plan_decls(plan.tools)
    return reg


def _has_map(plan: Plan) -> bool:
    for call in plan.calls:
        if call.map is not None:
            return True
    return False


def check(plan: Plan, tools: Any = None, **kw: Any) -> list[Diagnostic]:
    """All diagnostics for ``plan``, sorted by position. Keywords as :func:`compile_plan`."""
    return list(compile_plan(plan, tools, **kw).diagnostics)


def compile_plan(plan: Plan, tools: Any = None, *, max_calls: int | None = None,
                 require_executor: bool = False, require_implementations: bool = False) -> CompiledPlan:
    """Build the dependency graph of ``plan`` and run every static check.

    ``tools`` is anything :func:`~sophon_dsl.tools.as_registry` accepts.
    ``max_calls`` (None: unlimited) bounds the number of calls (E305).
    ``require_executor=True`` means no LLM executor is available: every latent
    call without an inline ``_output`` is an error (E206).
    ``require_implementations=True`` means the plan is about to run: a call to a tool
    declared explicit (``latent: false``) that has no Python function and no inline
    ``_output`` is an error (E207).
    """
    registry = effective_registry(plan, tools)
    plan = prescribe_plan(plan, registry)  # calls without an output path get their tool's prescribed one
    checker = Checker(plan, registry, max_calls=max_calls, require_executor=require_executor,
                      require_implementations=require_implementations)
    checker.finish(plan.output)
    found = checker.ctx.diags
    diags = tuple(sorted(found, key=sort_key)) if found else ()
    flow = checker.flow
    order, _ = checker.ctx.topo()
    return CompiledPlan(
        plan=plan, tools=registry, ids=flow.ids, flow=flow, control_deps=tuple(flow.control),
        writers=flow.writers.exact, order=order, diagnostics=diags, ok=not has_errors(diags), index=flow.index,
    )
