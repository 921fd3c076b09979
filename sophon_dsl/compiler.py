"""The compiler: builds a plan's dependency graph and runs every static check.

:func:`compile_plan` returns a :class:`CompiledPlan` (the DAG the runtime
executes plus every diagnostic found); :func:`check` returns only the
diagnostics.  Every check runs in one pass: a plan with five problems gets
five diagnostics, each with its code and the span of the offending node.

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

Checks (all in one pass; spans point at the offending node)
---------------------------------------------------------
E201 unknown tool (did you mean); E202 missing required parameter (span: the
tool name); E203 unknown parameter when the input schema is *closed*:
``properties`` given and ``additionalProperties`` absent or false (or no
``properties`` and ``additionalProperties: false``), names matching
``patternProperties`` excepted; E204 a literal value (no reference anywhere
inside) that fails the parameter's JSON Schema (span: the innermost failing
node); E205 a whole-value reference (each ``||`` operand, the last ``&&``
operand) whose writers' output schema (or the plan's input/state schema when
nothing writes it) has no JSON type the parameter accepts, and a template
passed where no string is accepted; E206 (only with ``require_executor``) a
latent call without inline output; E301 a read with no source (``input``:
free without an input schema, else declared in it; ``state``: a writer or the
state schema; other kinds: a writer; for ``||`` one sourced operand is
enough); E302 one cycle per strongly connected component; E303 duplicate ids;
E304 unknown ``after`` id; E305 more than ``max_calls`` calls; E306 a read of
a kind that is not ``input``/``state``/``data`` and that no call writes;
E307 a write to ``input``; E401 inline ``_output`` in lazy mode; E402 inline
``_output`` on an activity (tool with an implementation, or ``_activity``
set); W301 two ``set`` writers of one path, or of a path and a path below it,
with no order between them (calls of different instances excepted); W302 a
``||`` alternative nothing reads (same path, prefix or extension, plan output
included) and the state schema does not declare; W401 a latent call with a
``||`` output path in eager mode.

The writer index maps each written key to its writers and each proper prefix
of a written key to the writers below it, so wiring costs one dictionary
lookup per prefix of each read: linear in the size of the plan (plus the
number of edges).

Cost per call
-------------
Checking runs before every run of a plan, so its per-call cost is framework
overhead.  Each call's parameter values are walked once: that walk wires every
reference to its writers and checks its source (E306/E301/W303; a reference
with a writer needs nothing more), the parameter's name and literal value
(E202/E203/E204) and its type (E205).  What depends on the tool only (required
names, which names are allowed, the fast literal check, accepted types) is
computed once per tool and parameter name, not per call.  Messages and
locations are built only when a diagnostic is emitted.  When every dependency
points to an earlier call the topological order is the plan order (no sort,
no cycle search); W301 runs only when some key has two writers or is written
above another written key, W302 only when some output branches.  The slower,
general routines (``check_value_reads``, ``check_literal``, ``check_ref_type``)
run only for the values the fast path cannot clear, so diagnostics are the
same as with the full checks.
"""

from __future__ import annotations

import difflib
import heapq
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .dataflow import BUILTIN_KINDS, READ_ONLY_KINDS, DataFlow, base_kind
from .diagnostics import Diagnostic, Span, has_errors, sort_key
from .model import (
    Call,
    Expression,
    ListValue,
    Literal,
    Mode,
    ObjectValue,
    OutputMethod,
    Plan,
    Reference,
    Template,
    Value,
    iter_references,
)
from .tools import ToolRegistry, ToolSpec, as_registry

__all__ = [
    "AGENT_STEP",
    "BUILTIN_KINDS",
    "CompiledPlan",
    "check",
    "compile_plan",
    "effective_registry",
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
    ids: tuple[str, ...]
    flow: DataFlow = field(compare=False)
    control_deps: tuple[frozenset[int], ...]
    writers: dict
    order: tuple[int, ...]
    diagnostics: tuple[Diagnostic, ...]
    ok: bool
    index: dict  # call id -> index (first call with that id)

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
    reg = as_registry(tools)
    # Ask the tools given first: ``in`` on the registry itself would build the whole lazy
    # standard library (tens of ms per compile) only to learn it has no agent.step.
    given = getattr(reg, "_tools", None)
    if isinstance(given, dict) and "agent.step" in given:
        pass
    elif isinstance(given, dict) and getattr(reg, "_fallback", None) is not None:
        reg = reg.with_tools([AGENT_STEP])  # the standard library has no agent.step
    elif "agent.step" not in reg:
        reg = reg.with_tools([AGENT_STEP])
    if plan.tools:
        reg = reg.with_plan_decls(plan.tools)
    return reg


def check(plan: Plan, tools: Any = None, **kw: Any) -> list[Diagnostic]:
    """All diagnostics for ``plan``, sorted by position. Keywords as :func:`compile_plan`."""
    return list(compile_plan(plan, tools, **kw).diagnostics)


def compile_plan(plan: Plan, tools: Any = None, *, max_calls: int | None = None,
                 require_executor: bool = False) -> CompiledPlan:
    """Build the dependency graph of ``plan`` and run every static check.

    ``tools`` is anything :func:`~sophon_dsl.tools.as_registry` accepts.
    ``max_calls`` (None: unlimited) bounds the number of calls (E305).
    ``require_executor=True`` means no LLM executor is available: every latent
    call without an inline ``_output`` is an error (E206).
    """
    return _Compiler(plan, effective_registry(plan, tools), max_calls, require_executor).run()


# ---------------------------------------------------------------------------
# A fast structural pre-check for simple JSON Schemas (shared with the runtime)

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated",
                          "readOnly", "writeOnly"})
_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    # Only answers "certainly valid"; anything else is left to jsonschema (e.g. 3.0 as integer).
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "array": lambda v: type(v) is list,
    "object": lambda v: type(v) is dict,
}


def _always(_v: Any) -> bool:
    return True


def fast_schema_check(schema: Any, depth: int = 0) -> Callable[[Any], bool] | None:
    """A predicate that returns True only for values ``schema`` certainly accepts, or None
    when the schema uses anything beyond type / properties / required /
    additionalProperties / items / anyOf (then jsonschema decides every value).

    It lets the compiler (E204 on literals) and the runtime (tool inputs and
    outputs) skip jsonschema for the plain schemas ``@tool`` derives from type
    hints; a False answer only means "ask jsonschema"."""
    if schema is True:
        return _always
    if not isinstance(schema, dict) or depth > 8:
        return None
    checks: list[Callable[[Any], bool]] = []
    for key, val in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key == "type":
            names = [val] if isinstance(val, str) else val
            if not isinstance(names, list) or not names or any(n not in _TYPE_CHECKS for n in names):
                return None
            preds = [_TYPE_CHECKS[n] for n in names]
            checks.append(preds[0] if len(preds) == 1 else (lambda v, ps=tuple(preds): any(p(v) for p in ps)))
        elif key == "properties":
            if not isinstance(val, dict):
                return None
            subs = {}
            for name, sub in val.items():
                f = fast_schema_check(sub, depth + 1)
                if f is None:
                    return None
                if f is not _always:
                    subs[name] = f
            if subs:
                items = tuple(subs.items())
                checks.append(lambda v, items=items: type(v) is not dict or all(
                    f(v[k]) for k, f in items if k in v))
        elif key == "required":
            if not isinstance(val, list) or not all(isinstance(x, str) for x in val):
                return None
            req = tuple(val)
            checks.append(lambda v, req=req: type(v) is not dict or all(k in v for k in req))
        elif key == "additionalProperties":
            if val is True:
                continue
            if val is False:
                props = schema.get("properties")
                known = frozenset(props) if isinstance(props, dict) else frozenset()
                if schema.get("patternProperties"):
                    return None
                checks.append(lambda v, known=known: type(v) is not dict or all(k in known for k in v))
                continue
            return None
        elif key == "items":
            f = fast_schema_check(val, depth + 1)
            if f is None:
                return None
            if f is not _always:
                checks.append(lambda v, f=f: type(v) is not list or all(f(x) for x in v))
        elif key == "anyOf":
            if not isinstance(val, list) or not val:
                return None
            fs = [fast_schema_check(b, depth + 1) for b in val]
            if any(f is None for f in fs):
                return None
            if all(f is not _always for f in fs):
                checks.append(lambda v, fs=tuple(fs): any(f(v) for f in fs))
        else:
            return None
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    cs = tuple(checks)
    return lambda v: all(c(v) for c in cs)


# ---------------------------------------------------------------------------
# JSON Schema helpers (lenient: anything not understood is "unknown")

_JSON_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "unknown"


def _resolve(schema: Any, root: Any, depth: int = 0) -> Any:
    """Follow a local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) inside ``root``."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth < 32:
        ref = schema["$ref"]
        if not ref.startswith("#"):
            return None
        node = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return None
        schema = node
        depth += 1
    return schema


def _schema_types(schema: Any, root: Any, depth: int = 0) -> frozenset[str] | None:
    """The JSON types a schema admits, or None when unknown / unconstrained."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict) or depth > 16:
        return None
    out: set[str] | None = None
    t = schema.get("type")
    if isinstance(t, str):
        out = {t}
    elif isinstance(t, list) and all(isinstance(x, str) for x in t):
        out = set(t)
    elif "const" in schema:
        out = {_json_type(schema["const"])}
    elif isinstance(schema.get("enum"), list) and schema["enum"]:
        out = {_json_type(v) for v in schema["enum"]}
    else:
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                acc: set[str] = set()
                for b in branches:
                    bt = _schema_types(b, root, depth + 1)
                    if bt is None:
                        return None
                    acc |= bt
                out = acc
                break
        else:
            all_of = schema.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1:
                r = _schema_types(all_of[0], root, depth + 1)
                out = set(r) if r is not None else None
    if out is None:
        return None
    if schema.get("nullable") is True:
        out.add("null")
    if "unknown" in out:
        return None
    return frozenset(out)


def _types_compatible(produced: frozenset[str], expected: frozenset[str]) -> bool:
    for p in produced:
        if p in expected:
            return True
        if p == "integer" and "number" in expected:
            return True
        if p == "number" and "integer" in expected:  # 3.0 is an integer; stay lenient
            return True
    return False


def _fmt_types(types: Iterable[str]) -> str:
    ts = sorted(types, key=lambda t: _JSON_TYPES.index(t) if t in _JSON_TYPES else 99)
    return " or ".join(ts)


def _descend(schema: Any, root: Any, path: Iterable[Any]) -> Any:
    """The sub-schema at ``path`` (None when unknown)."""
    for seg in path:
        schema = _resolve(schema, root)
        if not isinstance(schema, dict):
            return None
        if isinstance(seg, int):
            prefix = schema.get("prefixItems")
            if isinstance(prefix, list) and seg < len(prefix):
                schema = prefix[seg]
                continue
            items = schema.get("items")
            if isinstance(items, list) and seg < len(items):  # draft 4-7 tuple form
                schema = items[seg]
            elif isinstance(items, dict):
                schema = items
            else:
                return None
        else:
            props = schema.get("properties")
            if isinstance(props, dict) and seg in props:
                schema = props[seg]
            elif isinstance(schema.get("additionalProperties"), dict):
                schema = schema["additionalProperties"]
            else:
                return None
    return _resolve(schema, root)


def _schema_has_path(schema: Any, root: Any, path: tuple, depth: int = 0) -> bool:
    """Whether a value valid under ``schema`` may have something at ``path``.

    A level whose structure is not described (no ``properties``/``items``,
    or an open ``additionalProperties``) admits any continuation.
    """
    schema = _resolve(schema, root)
    if not path:
        return True
    if schema is True or schema is None or depth > 32:
        return True
    if schema is False or not isinstance(schema, dict):
        return schema is not False
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return any(_schema_has_path(b, root, path, depth + 1) for b in branches)
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and all_of:
        return all(_schema_has_path(b, root, path, depth + 1) for b in all_of)
    seg, rest = path[0], path[1:]
    types = _schema_types(schema, root)
    if isinstance(seg, int):
        if types is not None and "array" not in types:
            return False
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and seg < len(prefix):
            return _schema_has_path(prefix[seg], root, rest, depth + 1)
        items = schema.get("items")
        if isinstance(items, dict):
            return _schema_has_path(items, root, rest, depth + 1)
        if items is False:
            return False
        return True
    if types is not None and "object" not in types:
        return False
    props = schema.get("properties")
    if isinstance(props, dict) and seg in props:
        return _schema_has_path(props[seg], root, rest, depth + 1)
    pattern_props = schema.get("patternProperties")
    if isinstance(pattern_props, dict):
        import re

        for pat, sub in pattern_props.items():
            try:
                if re.search(pat, seg):
                    return _schema_has_path(sub, root, rest, depth + 1)
            except re.error:
                return True
    add = schema.get("additionalProperties")
    if isinstance(add, dict):
        return _schema_has_path(add, root, rest, depth + 1)
    if add is True:
        return True
    if add is False:
        return False
    # additionalProperties absent: described objects are closed for reading
    # purposes (a typo in a path is the likely mistake), undescribed ones open.
    return not isinstance(props, dict)


def _literal_json(value: Value) -> Any:
    if isinstance(value, Literal):
        return value.value
    if isinstance(value, ListValue):
        return [_literal_json(v) for v in value.items]
    if isinstance(value, ObjectValue):
        return {k: _literal_json(v) for k, v in value.entries}
    raise TypeError("not a literal")


def _has_refs(value: Value) -> bool:
    return next(iter_references(value), None) is not None


def _sub_value(value: Value, path: Iterable[Any]) -> Value:
    """The value node at a JSON path inside a literal tree (for precise spans)."""
    node = value
    for seg in path:
        if isinstance(node, ListValue) and isinstance(seg, int) and seg < len(node.items):
            node = node.items[seg]
        elif isinstance(node, ObjectValue) and isinstance(seg, str) and node.get(seg) is not None:
            node = node.get(seg)  # type: ignore[assignment]
        else:
            break
    return node


def _short(v: Any, limit: int = 40) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------

# How a read of a reference kind finds its source (E301 / W303), decided once per kind.
_SRC_WRITER = 0            # another call writes it (data, declared kinds, state without schema)
_SRC_WRITER_OR_SCHEMA = 1  # state with a state schema: a writer, else the schema has the path
_SRC_ALWAYS = 2            # input without an input schema: anything may be passed
_SRC_INPUT_SCHEMA = 3      # input with an input schema: the schema has the path
_SRC_UNKNOWN = 4           # not a known kind (E306)


class _ToolTable:
    """What the compiler needs of one tool, computed once per tool and compile: the
    spec, its input schema (None when not a dict: no parameter checks), properties,
    required names, whether unknown names are errors, and per parameter name and per
    list of parameter names (``sigs``) what the checks of a call need."""

    __slots__ = ("spec", "schema", "props", "required", "strict", "typed", "latent", "entries", "sigs")

    def __init__(self) -> None:
        self.props: dict = {}
        self.required: tuple[str, ...] = ()
        self.strict = False
        self.typed = False


class _ParamEntry:
    """A declared parameter: its schema, the fast literal check and the JSON types it
    accepts (both computed on first use; False until then)."""

    __slots__ = ("name", "pschema", "fast", "types")

    def __init__(self, name: str, pschema: Any) -> None:
        self.name = name
        self.pschema = pschema
        self.fast: Any = False
        self.types: Any = False


_UNKNOWN_PARAM: Any = object()  # a parameter name the closed input schema does not allow (E203)


class _Compiler:
    def __init__(self, plan: Plan, tools: ToolRegistry, max_calls: int | None,
                 require_executor: bool):
        self.plan = plan
        self.tools = tools
        self.max_calls = max_calls
        self.require_executor = require_executor
        self.calls = plan.calls
        self.n = len(plan.calls)
        self.ids = tuple(plan.call_ids())
        self.diags: list[Diagnostic] = []
        self._validators: dict[tuple[str, str], Any] = {}
        self._fast: dict[tuple[str, str], Any] = {}
        self._tool_facts: dict[str, tuple] = {}
        self._param_types: dict[tuple[str, str], Any] = {}
        self._path_ok: dict[tuple, bool] = {}
        self._top: dict[str, tuple] = {}  # kind -> (writers of (kind,), writers below it)
        self._tool_names: list[str] | None = None     # every tool name (for E201 hints)
        self._tool_hints: dict[str, str | None] = {}  # unknown tool -> its "did you mean"

    # -- helpers -----------------------------------------------------------

    def diag(self, code: str, message: str, span: Span | None, related: Iterable[str] = ()) -> None:
        paths = self.plan.span_paths
        path = paths.get(span) if paths and span is not None else None
        self.diags.append(Diagnostic(code, message, span, self.plan.file, path, None, tuple(related)))

    def loc(self, i: int) -> str:
        c = self.calls[i]
        span = c.span or c.tool_span
        if span is None:
            return f"call #{i + 1}"
        return f"{self.plan.file or '<plan>'}:{span.line}:{span.column}"

    def call_span(self, i: int) -> Span | None:
        c = self.calls[i]
        return c.tool_span or c.span

    # -- main --------------------------------------------------------------

    def run(self) -> CompiledPlan:
        if self.max_calls is not None and self.n > self.max_calls:
            extra = self.calls[self.max_calls]
            self.diag("E305", f"plan has {self.n} calls; at most {self.max_calls} are allowed",
                      extra.span or extra.tool_span)
        index = self.check_ids()
        flow = self.flow = DataFlow.build(self.calls, self.ids)
        wi = flow.writers
        self.writers, self.below, self.written_kinds = wi.exact, wi.below, wi.kinds
        self.multi, self.branching, self.has_index = wi.multi, wi.branching, wi.has_index
        self.check_readonly_writes()
        self.check_after()
        # One pass per call: sources (E306/E301/W303), parameters (E201-E206) and
        # reference types (E205), reading the wiring the flow computed.
        self.check_calls()
        if self.plan.output is not None:
            self.check_value_reads(self.plan.output, None, "the plan's output", None)
        order, cyclic = flow.topo_order()
        if cyclic:
            self.report_cycles()
        deps = flow.deps
        self.check_concurrent_writers(deps, order)
        if self.has_index:
            self.check_container_types()
        if self.branching:
            self.check_unread_branches()
        diags = tuple(sorted(self.diags, key=sort_key)) if self.diags else ()
        return CompiledPlan(
            plan=self.plan, tools=self.tools, ids=self.ids, flow=flow,
            control_deps=tuple(flow.control), writers=self.writers,
            order=order, diagnostics=diags, ok=not has_errors(diags), index=index,
        )

    # -- ids and `after` ---------------------------------------------------

    def check_ids(self) -> dict[str, int]:
        index: dict[str, int] = dict(zip(self.ids, range(self.n)))
        if len(index) == self.n:
            return index  # no duplicate: the same dict as the loop below builds
        index = {}
        for i, cid in enumerate(self.ids):
            if cid in index:
                call = self.calls[i]
                self.diag("E303", f"duplicate call id '{cid}': call {i + 1} reuses the id of the call "
                                  f"at {self.loc(index[cid])}",
                          call.attr_span("_id") if call.id is not None else self.call_span(i),
                          [f"first '{cid}' is at {self.loc(index[cid])}"])
            else:
                index[cid] = i
        return index

    def check_after(self) -> None:
        """E304: an ``after`` name that is no call's id."""
        for i, name in self.flow.unknown_after:
            hint = difflib.get_close_matches(name, list(self.flow.index), n=1, cutoff=0.6)
            msg = f"'after' of call {self.ids[i]} names unknown call '{name}'"
            if hint:
                msg += f"; did you mean '{hint[0]}'?"
            self.diag("E304", msg, self.calls[i].attr_span("_after"))

    def check_readonly_writes(self) -> None:
        """E307: a write to a read-only kind (``input``)."""
        for i, p in self.flow.readonly_writes:
            out = self.calls[i].output
            ref = out.paths[p]  # type: ignore[union-attr]
            self.diag("E307", f"call {self.ids[i]} writes {ref.text()}: the '{ref.kind}' kind "
                              f"is read-only", ref.span or out.span or self.call_span(i))  # type: ignore[union-attr]

    def kind_mode(self, kind: str) -> int:
        """How a read of ``kind`` finds its source: see the ``_SRC_*`` constants."""
        base = base_kind(kind)
        if base not in BUILTIN_KINDS and kind not in self.written_kinds:
            return _SRC_UNKNOWN
        if base == "input":
            return _SRC_ALWAYS if self.plan.input_schema is None else _SRC_INPUT_SCHEMA
        if base == "state" and self.plan.state_schema is not None:
            return _SRC_WRITER_OR_SCHEMA
        return _SRC_WRITER

    def sourced(self, mode: int, ref: Reference, ws: tuple[int, ...]) -> bool:
        """``known_kind(ref.kind) and has_source(ref, reader)`` given ``ws``, the reader's
        writers of ``ref`` (:meth:`resolve`)."""
        if mode == _SRC_WRITER:
            return bool(ws)
        if mode == _SRC_ALWAYS:
            return True
        if mode == _SRC_UNKNOWN:
            return False
        if mode == _SRC_WRITER_OR_SCHEMA:
            if ws:
                return True
            schema = self.plan.state_schema
        else:
            schema = self.plan.input_schema
        cache = self._path_ok
        ck = (mode, ref.path)
        ok = cache.get(ck)
        if ok is None:
            ok = cache[ck] = _schema_has_path(schema, schema, ref.path)
        return ok

    def tool_table(self, name: str) -> "_ToolTable":
        tab = _ToolTable()
        spec = tab.spec = self.tools.get(name)
        tab.sigs = {}
        tab.entries = {}
        if spec is None:
            tab.schema = None
            tab.latent = True
            return tab
        tab.latent = spec.latent
        schema = spec.input_schema
        if not isinstance(schema, dict):
            tab.schema = None
            return tab
        tab.schema = schema
        props, required, strict = self.tool_facts(spec)
        tab.props, tab.required, tab.strict = props, required, strict
        tab.typed = isinstance(schema.get("properties"), dict)
        return tab

    def signature(self, tab: "_ToolTable", names: tuple[str, ...]) -> tuple:
        """For one list of parameter names of a tool: (missing required names, one entry
        per parameter: a :class:`_ParamEntry`, ``_UNKNOWN_PARAM`` (E203) or None)."""
        given = set(names)
        missing = tuple(name for name in tab.required if name not in given)
        entries = []
        props, cache = tab.props, tab.entries
        for name in names:
            e = cache.get(name, cache)
            if e is cache:
                pschema = props.get(name)
                if pschema is not None:
                    e = _ParamEntry(name, pschema)
                elif tab.strict and not self.pattern_allows(tab.schema, name):
                    e = _UNKNOWN_PARAM
                else:
                    e = None
                cache[name] = e
            entries.append(e)
        return missing, tuple(entries)

    def literal_ok(self, entry: "_ParamEntry", value: Value) -> bool:
        """True when ``value`` (a literal tree) certainly satisfies the parameter's schema."""
        fast = entry.fast
        if fast is False:
            fast = entry.fast = fast_schema_check(entry.pschema)
        if fast is _always:
            return True
        if fast is None:
            return False
        if type(value) is Literal:
            return fast(value.value)
        try:
            return fast(_literal_json(value))
        except TypeError:
            return False

    def check_calls(self) -> None:
        """Every per-call check: parameters against the tool, literal values, reference
        types, and the sources of the call's reads (from the flow's wiring)."""
        calls = self.calls
        ids = self.ids
        flow = self.flow
        refs, wss, offs = flow.read_refs, flow.read_writers, flow.read_offs
        sourced = self.sourced
        tables: dict[str, _ToolTable] = {}
        modes: dict[str, int] = {}
        writer_mode = _SRC_WRITER
        for i, call in enumerate(calls):
            tab = tables.get(call.tool)
            if tab is None:
                tab = tables[call.tool] = self.tool_table(call.tool)
            params = call.params
            entries = None
            if tab.schema is not None:
                names = tuple([p.name for p in params])
                sig = tab.sigs.get(names)
                if sig is None:
                    sig = tab.sigs[names] = self.signature(tab, names)
                missing, entries = sig
                for name in missing:
                    self.diag("E202", f"call {ids[i]} to '{call.tool}' is missing required parameter "
                                      f"'{name}'", self.call_span(i))
            elif tab.spec is None:
                self.unknown_tool(i, call)
            if entries is not None:
                for k, p in enumerate(params):
                    entry = entries[k]
                    if entry is None:
                        continue
                    if entry is _UNKNOWN_PARAM:
                        self.unknown_param(i, call, p, tab)
                        continue
                    v = p.value
                    tv = type(v)
                    if tv is Literal:
                        fast = entry.fast  # False until computed, None when jsonschema decides
                        if (fast is not _always and (fast is False or fast is None or not fast(v.value))
                                and not self.literal_ok(entry, v)):
                            self.check_literal(i, call, p, entry.pschema, tab.schema)
                    elif tv is ListValue or tv is ObjectValue:
                        if not _has_refs(v) and not self.literal_ok(entry, v):
                            self.check_literal(i, call, p, entry.pschema, tab.schema)
                    elif tab.typed:  # whole-value references, expressions and templates are typed
                        expected = entry.types
                        if expected is False:
                            expected = entry.types = self.param_types(call.tool, p.name, tab)
                        if expected is not None:
                            self.check_value_type(i, p, v, expected)
            # sources: a read with a writer needs nothing more (the common case)
            for slot in range(offs[i], offs[i + 1]):
                r = refs[slot]
                kind = r.kind
                mode = modes.get(kind)
                if mode is None:
                    mode = modes[kind] = self.kind_mode(kind)
                if not (wss[slot] if mode == writer_mode else sourced(mode, r, wss[slot])):
                    self.check_param_reads(i, call)
                    break
            if call.inline_output is not None or tab.latent:
                self.check_call_rest(i, call, tab)

    def check_param_reads(self, i: int, call: Call) -> None:
        """E306 / E301 / W303 for the parameter values of a call that has an unsourced read
        (the general routine, which also knows that one sourced ``||`` operand suffices)."""
        for p in call.params:
            if type(p.value) is not Literal:
                self.check_value_reads(p.value, i, f"parameter '{p.name}' of call {self.ids[i]}",
                                       p.span or self.call_span(i))


    # -- reads: kinds and sources (E306, E301) -----------------------------

    def has_source(self, ref: Reference, reader: int | None) -> bool:
        kind = base_kind(ref.kind)
        if kind == "input":
            schema = self.plan.input_schema
            return schema is None or _schema_has_path(schema, schema, ref.path)
        key = ref.key
        w = self.writers
        for k in range(1, len(key) + 1):
            for j, _ in w.get(key[:k], ()):
                if j != reader:
                    return True
        for j, _ in self.below.get(key, ()):
            if j != reader:
                return True
        if kind == "state" and self.plan.state_schema is not None:
            schema = self.plan.state_schema
            return _schema_has_path(schema, schema, ref.path)
        return False

    def known_kind(self, kind: str) -> bool:
        return base_kind(kind) in BUILTIN_KINDS or kind in self.written_kinds

    def check_value_reads(self, value: Value, reader: int | None, where: str,
                          fallback: Span | None) -> None:
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, ListValue):
                stack.extend(reversed(v.items))
                continue
            if isinstance(v, ObjectValue):
                stack.extend(val for _, val in reversed(v.entries))
                continue
            if isinstance(v, Reference):
                if self.known_kind(v.kind) and self.has_source(v, reader):
                    continue  # the common case: nothing to report
                groups, any_of = [v], False
            elif isinstance(v, Expression):
                groups, any_of = list(v.operands), v.op == "||"
            elif isinstance(v, Template):
                groups, any_of = [p for p in v.parts if isinstance(p, Reference)], False
            else:
                continue
            span = v.span or fallback
            unknown = [r for r in groups if not self.known_kind(r.kind)]
            for r in unknown:
                kinds = sorted(BUILTIN_KINDS | self.written_kinds)
                hint = difflib.get_close_matches(r.kind, kinds, n=1, cutoff=0.6)
                msg = (f"{where} reads {r.text()}: unknown reference kind '{r.kind}' (known kinds: "
                       f"{', '.join(kinds)}; other kinds exist only when a call writes them)")
                if hint:
                    msg += f"; did you mean '{hint[0]}'?"
                self.diag("E306", msg, r.span or span)
            known = [r for r in groups if self.known_kind(r.kind)]
            missing = [r for r in known if not self.has_source(r, reader)]
            if any_of:
                if unknown or not missing or len(missing) < len(known):
                    continue
            for r in (missing[:1] if any_of else missing):
                # Without a state schema the state is an open world: earlier turns or the
                # caller's initial state may hold the path, so this is only a warning.
                open_state = base_kind(r.kind) == "state" and self.plan.state_schema is None
                self.diag("W303" if open_state else "E301",
                          self.missing_message(where, r, any_of and len(known) > 1), r.span or span)

    def missing_message(self, where: str, ref: Reference, all_fallbacks: bool) -> str:
        kind = base_kind(ref.kind)
        if kind == "input":
            why = "the plan's input schema has no such property"
        elif kind == "state" and self.plan.state_schema is not None:
            why = "no call writes it and the state schema does not declare it"
        elif kind == "state":
            why = ("no call writes it and the plan declares no state schema, so it must come "
                   "from the initial state")
        else:
            why = "no call writes it"
        extra = " (no alternative of the '||' expression has a source)" if all_fallbacks else ""
        return f"{where} reads {ref.text()} but {why}{extra}"

    # -- per-call checks ---------------------------------------------------

    def unknown_tool(self, i: int, call: Call) -> None:
        hints = self._tool_hints
        if call.tool not in hints:  # one search per unknown name, not per call
            if self._tool_names is None:
                self._tool_names = list(self.tools)
            names = self._tool_names
            hint = difflib.get_close_matches(call.tool, names, n=1, cutoff=0.6)
            if not hint:
                lowered = {n.lower(): n for n in names}
                if call.tool.lower() in lowered:
                    hint = [lowered[call.tool.lower()]]
            hints[call.tool] = hint[0] if hint else None
        msg = f"unknown tool '{call.tool}' in call {self.ids[i]}"
        if hints[call.tool]:
            msg += f"; did you mean '{hints[call.tool]}'?"
        self.diag("E201", msg, self.call_span(i))

    def unknown_param(self, i: int, call: Call, p, tab: "_ToolTable") -> None:
        props = tab.props
        hint = difflib.get_close_matches(p.name, list(props), n=1, cutoff=0.6)
        known = ", ".join(props) if props else "none"
        msg = f"unknown parameter '{p.name}' for tool '{call.tool}' in call {self.ids[i]}"
        msg += f"; did you mean '{hint[0]}'?" if hint else f" (parameters: {known})"
        self.diag("E203", msg, p.span or p.value.span or self.call_span(i))

    def check_call_rest(self, i: int, call: Call, tab: "_ToolTable") -> None:
        """E401, E402, W401, E206: what depends on the call's tool and attributes only
        (nothing to check for an activity tool called without inline output)."""
        inline = call.inline_output
        spec = tab.spec
        latent = tab.latent
        is_activity = not latent or call.activity is not None
        cid = self.ids[i]
        if inline is not None:
            out_span = call.attr_span("_output")
            if self.plan.mode is Mode.LAZY:
                self.diag("E401", f"call {cid} has an inline _output but the plan is in lazy mode "
                                  f"(a lazy plan only plans; it executes nothing)", out_span)
            if is_activity:
                what = f"activity '{call.activity}'" if call.activity else f"activity tool '{call.tool}'"
                self.diag("E402", f"call {cid} has an inline _output but runs {what}; only latent "
                                  f"calls carry their output inline", out_span)
        if (self.plan.mode is Mode.EAGER and spec is not None and latent and not is_activity
                and call.output is not None and call.output.is_branching):
            alts = " || ".join(r.text() for r in call.output.paths)
            if inline is not None:
                why = "its inline _output was produced on one branch only"
            else:
                why = "the model resolves the call while planning and picks one alternative"
            self.diag("W401", f"latent call {cid} has a branching output path ({alts}) in eager "
                              f"mode; the branch collapses ({why}): write the single path taken, "
                              f"or use lazy mode to keep the branch",
                      call.output.span or self.call_span(i))
        if (self.require_executor and spec is not None and latent and not is_activity
                and inline is None):
            self.diag("E206", f"call {cid} uses latent tool '{call.tool}' (no implementation) "
                              f"and no LLM executor is available", self.call_span(i))

    def tool_facts(self, spec: ToolSpec) -> tuple:
        """(props, required, strict) of a tool's input schema, computed once per tool."""
        facts = self._tool_facts.get(spec.name)
        if facts is None or facts[0] is not spec:
            schema = spec.input_schema
            props = schema.get("properties")
            props = props if isinstance(props, dict) else {}
            facts = (spec, props, spec.required, self.is_closed(schema))
            self._tool_facts[spec.name] = facts
        return facts[1:]

    @staticmethod
    def is_closed(schema: dict) -> bool:
        """E203 rule: unknown names are errors unless the schema is open.

        Open: no ``properties`` at all, or ``additionalProperties`` true or a schema.
        Closed: ``properties`` given and ``additionalProperties`` false or absent.
        """
        if not isinstance(schema.get("properties"), dict):
            return schema.get("additionalProperties") is False
        add = schema.get("additionalProperties", False)
        return add is False

    @staticmethod
    def pattern_allows(schema: dict, name: str) -> bool:
        import re

        pats = schema.get("patternProperties")
        if not isinstance(pats, dict):
            return False
        for pat in pats:
            try:
                if re.search(pat, name):
                    return True
            except re.error:
                return True
        return False

    def validator(self, tool: str, name: str, pschema: Any, root: dict) -> Any:
        key = (tool, name)
        if key in self._validators:
            return self._validators[key]
        import jsonschema

        v = None
        if isinstance(pschema, (dict, bool)):
            s: Any = pschema
            if isinstance(pschema, dict):
                s = dict(pschema)
                for defs in ("$defs", "definitions"):
                    if defs in root and defs not in s:
                        s[defs] = root[defs]
            try:
                cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator)
                v = cls(s)
            except Exception:  # pragma: no cover - malformed schema: skip the check
                v = None
        self._validators[key] = v
        return v

    def check_literal(self, i: int, call: Call, p, pschema: Any, root: dict) -> None:
        key = (call.tool, p.name)
        fast = self._fast.get(key, False)
        if fast is False:
            fast = self._fast[key] = fast_schema_check(pschema)
        if fast is not None:
            value = p.value
            if type(value) is Literal:
                if fast(value.value):
                    return  # certainly valid: no need for jsonschema
            else:
                try:
                    if fast(_literal_json(value)):
                        return
                except TypeError:
                    pass
        v = self.validator(call.tool, p.name, pschema, root)
        if v is None:
            return
        try:
            instance = _literal_json(p.value)
            import jsonschema

            err = jsonschema.exceptions.best_match(v.iter_errors(instance))
        except Exception:  # unresolvable $ref, bad regex...: skip
            return
        if err is None:
            return
        node = _sub_value(p.value, err.absolute_path)
        where = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in err.absolute_path)
        cid = self.ids[i]
        if err.validator == "type":
            expected = err.validator_value
            exp = _fmt_types(expected if isinstance(expected, list) else [expected])
            msg = (f"parameter '{p.name}{where}' of call {cid} expects {exp}, got "
                   f"{_json_type(err.instance)} {_short(err.instance)}")
        else:
            types = _schema_types(pschema, root)
            exp = f" ({_fmt_types(types)})" if types else ""
            msg = f"parameter '{p.name}'{exp} of call {cid}: {'at ' + where[1:] + ': ' if where else ''}{err.message}"
        self.diag("E204", msg, node.span or p.value.span or p.span or self.call_span(i))

    # -- reference types (E205) --------------------------------------------

    def written_schema(self, j: int, pidx: int, sub: tuple) -> tuple[Any, Any] | None:
        """Schema of what call ``j``'s output path ``pidx`` puts at ``sub`` below it."""
        call = self.calls[j]
        out = call.output
        if out is None:
            return None
        if out.is_branching and pidx == len(out.paths) - 1:
            return None  # the last alternative may receive an error object
        if out.method in (OutputMethod.PUSH, OutputMethod.CONCAT):
            return ({"type": "array"}, None) if not sub else None
        if out.method is not OutputMethod.SET:
            return None
        spec = self.tools.get(call.tool)
        if spec is None or not isinstance(spec.output_schema, dict):
            return None
        root = spec.output_schema
        s = _descend(root, root, sub)
        return (s, root) if s is not None else None

    def param_types(self, tool: str, name: str, tab: "_ToolTable") -> frozenset[str] | None:
        tkey = (tool, name)
        expected = self._param_types.get(tkey, False)
        if expected is False:
            root = tab.schema
            expected = self._param_types[tkey] = _schema_types(root["properties"][name], root)
        return expected

    def check_value_type(self, i: int, p, v: Value, expected: frozenset[str]) -> None:
        """E205 for a whole-value reference, expression or template passed as ``p``."""
        if isinstance(v, Reference):
            refs = [v]
        elif isinstance(v, Expression):
            refs = list(v.operands) if v.op == "||" else [v.operands[-1]]
        elif isinstance(v, Template):
            if not _types_compatible(frozenset({"string"}), expected):
                self.diag("E205", f"parameter '{p.name}' of call {self.ids[i]} ({self.loc(i)}) "
                                  f"expects {_fmt_types(expected)} but its template value "
                                  f"is a string", v.span or p.span or self.call_span(i))
            return
        else:
            return
        for ref in refs:
            self.check_ref_type(i, p, ref, expected)

    def check_ref_type(self, i: int, p, ref: Reference, expected: frozenset[str]) -> None:
        key = ref.key
        span = ref.span or p.value.span or p.span or self.call_span(i)
        found_writer = False
        for k in range(1, len(key) + 1):
            for j, pidx in self.writers.get(key[:k], ()):
                if j == i:
                    continue
                found_writer = True
                ws = self.written_schema(j, pidx, key[k:])
                if ws is None:
                    continue
                produced = _schema_types(ws[0], ws[1])
                if produced is None or _types_compatible(produced, expected):
                    continue
                wpath = self.calls[j].output.paths[pidx].text()  # type: ignore[union-attr]
                via = "" if k == len(key) else f" (inside {wpath})"
                wref = self.calls[j].output.paths[pidx]  # type: ignore[union-attr]
                wspan = wref.span or self.calls[j].span
                wloc = (f"{self.plan.file or '<plan>'}:{wspan.line}:{wspan.column}" if wspan
                        else self.loc(j))
                head = (f"parameter '{p.name}' of call {self.ids[i]} ({self.loc(i)}) expects "
                        f"{_fmt_types(expected)}")
                self.diag("E205", f"{head} but {ref.text()} is written by {self.ids[j]} "
                                  f"({self.loc(j)}) as {_fmt_types(produced)}{via}", span,
                          [f"{self.ids[j]} writes {wpath} at {wloc} (output of tool "
                           f"'{self.calls[j].tool}': {_fmt_types(produced)})"])
        if found_writer or self.below.get(key):
            return
        # No writer: compare with the declared input / state schema.
        schema = {"input": self.plan.input_schema, "state": self.plan.state_schema}.get(ref.kind)
        if not isinstance(schema, dict):
            return
        sub = _descend(schema, schema, ref.path)
        produced = _schema_types(sub, schema) if sub is not None else None
        if produced is not None and not _types_compatible(produced, expected):
            head = f"parameter '{p.name}' of call {self.ids[i]} ({self.loc(i)}) expects {_fmt_types(expected)}"
            self.diag("E205", f"{head} but {ref.text()} is declared as {_fmt_types(produced)} by the "
                              f"plan's {ref.kind} schema", span)

    # -- ordering and cycles -----------------------------------------------

    def report_cycles(self) -> None:
        flow = self.flow
        succ = flow.successors()
        for comp in flow.cycles():
            members = set(comp)
            start = min(comp)
            # BFS from start back to start inside the component.
            parent: dict[int, int] = {}
            queue = [start]
            seen = {start}
            end = None
            qi = 0
            while qi < len(queue) and end is None:
                v = queue[qi]
                qi += 1
                for w in sorted(succ[v]):
                    if w == start:
                        end = v
                        break
                    if w in members and w not in seen:
                        seen.add(w)
                        parent[w] = v
                        queue.append(w)
            if end is None:  # pragma: no cover - an SCC always closes
                continue
            path = [end]
            while path[-1] != start:
                path.append(parent[path[-1]])
            path.reverse()  # start ... end, and end -> start closes it
            cycle = path + [start]
            text = " -> ".join(self.ids[c] for c in cycle)
            notes = []
            for a, b in zip(cycle, cycle[1:]):
                notes.append(f"{self.ids[a]} ({self.loc(a)}) -> {self.ids[b]} ({self.loc(b)}): "
                             f"{self.edge_reason(a, b)}")
            extra = f" ({len(comp)} calls are mutually dependent)" if len(comp) > len(cycle) - 1 else ""
            self.diag("E302", f"dependency cycle: {text}{extra}", self.call_span(start), notes)

    def edge_reason(self, a: int, b: int) -> str:
        for ref, ws in self.flow.reads(b):
            if a in ws:
                out = self.calls[a].output
                wrote = [r.text() for r in out.paths] if out else []
                return f"{self.ids[b]} reads {ref.text()}, written by {self.ids[a]} as {' / '.join(wrote)}"
        if a in self.flow.control[b]:
            return f"{self.ids[b]} runs after {self.ids[a]}"
        return "dependency"

    # -- concurrent writers (W301) -----------------------------------------

    def check_concurrent_writers(self, deps, order) -> None:
        below = self.below
        overlaps = any(key in below for key in self.writers)  # a written key above another
        if not overlaps and not self.multi:
            return  # every key has one writer and none is written below another: no W301
        pos = [0] * self.n
        for k, i in enumerate(order):
            pos[i] = k
        if overlaps:
            setters_of: dict[tuple, list[int]] = {}
            for key, ws in self.writers.items():
                js = sorted({j for j, _ in ws if self.calls[j].output.method is OutputMethod.SET})  # type: ignore[union-attr]
                if js:
                    setters_of[key] = js
            self.check_prefix_overlaps(deps, pos, setters_of)
        for key, ws in self.writers.items():
            if len(ws) < 2:
                continue
            setters = sorted({j for j, _ in ws
                              if self.calls[j].output.method is OutputMethod.SET},  # type: ignore[union-attr]
                             key=lambda j: pos[j])
            if len(setters) < 2:
                continue
            for a, b in zip(setters, setters[1:]):
                ia, ib = self.calls[a].instance, self.calls[b].instance
                if ia is not None and ib is not None and ia != ib:
                    continue
                if not self.flow.reaches(a, b, pos):
                    ref = Reference(key[0], tuple(key[1:]))
                    spans = [r.span for r in self.calls[b].output.paths if r.key == key]  # type: ignore[union-attr]
                    self.diag("W301", f"calls {self.ids[a]} ({self.loc(a)}) and {self.ids[b]} "
                                      f"({self.loc(b)}) both set {ref.text()} with no order between "
                                      f"them; the final value depends on timing (add @after, or use "
                                      f"a merging output method)",
                              (spans[0] if spans else None) or self.call_span(b))

    def check_container_types(self) -> None:
        """W304: a path written below both as a list (``†state.a[0]``) and as an object
        (``†state.a.x``): whichever write comes second replaces the container of the first."""
        first: dict[tuple, tuple[bool, tuple, int]] = {}  # parent -> (is list, key, writer)
        reported: set[tuple] = set()
        for key, ws in self.writers.items():
            for d in range(1, len(key)):
                parent, seg = key[:d], key[d]
                as_list = type(seg) is int
                seen = first.get(parent)
                if seen is None:
                    first[parent] = (as_list, key, ws[0][0])
                    continue
                if seen[0] == as_list or parent in reported:
                    continue
                reported.add(parent)
                other_key, other = seen[1], seen[2]
                i, p = ws[0]
                where = Reference(parent[0], tuple(parent[1:])).text()
                this = Reference(key[0], tuple(key[1:])).text()
                that = Reference(other_key[0], tuple(other_key[1:])).text()
                kinds = ("a list", "an object") if as_list else ("an object", "a list")
                self.diag("W304", f"{where} is written as {kinds[0]} by call {self.ids[i]} ({this}) and as "
                                  f"{kinds[1]} by call {self.ids[other]} ({that}); the later write replaces "
                                  f"what the other wrote (use one shape: only indexes or only names)",
                          self.calls[i].output.paths[p].span or self.call_span(i),  # type: ignore[union-attr]
                          [f"{self.ids[other]} writes {that} at {self.loc(other)}"])

    def check_prefix_overlaps(self, deps, pos, setters_of) -> None:
        """W301 for a ``set`` of a path and an unordered ``set`` of a path below it."""
        for key, lower in setters_of.items():
            for k in range(1, len(key)):
                upper = setters_of.get(key[:k])
                if not upper:
                    continue
                pair = self.unordered_pair(upper, lower, deps, pos)
                if pair is None:
                    continue
                a, b = sorted(pair, key=lambda j: pos[j])
                up = Reference(key[0], tuple(key[1:k])).text()
                low = Reference(key[0], tuple(key[1:])).text()
                spans = [r.span for r in self.calls[b].output.paths  # type: ignore[union-attr]
                         if r.key in (key, key[:k])]
                self.diag("W301", f"calls {self.ids[a]} ({self.loc(a)}) and {self.ids[b]} "
                                  f"({self.loc(b)}) set overlapping paths {up} and {low} with no "
                                  f"order between them; the final value depends on timing (add "
                                  f"@after, or use a merging output method)",
                          (spans[0] if spans else None) or self.call_span(b))

    def unordered_pair(self, xs, ys, deps, pos, budget: int = 64):
        tried = 0
        for x in xs:
            for y in ys:
                if x == y:
                    continue
                ix, iy = self.calls[x].instance, self.calls[y].instance
                if ix is not None and iy is not None and ix != iy:
                    continue
                a, b = (x, y) if pos[x] < pos[y] else (y, x)
                if not self.flow.reaches(a, b, pos):
                    return (x, y)
                tried += 1
                if tried >= budget:
                    return None
        return None

    # -- unread branch alternatives (W302) ---------------------------------

    def check_unread_branches(self) -> None:
        read_keys, read_below = self.flow.all_read_keys(iter_references(self.plan.output))
        schema = self.plan.state_schema
        for i, call in enumerate(self.calls):
            out = call.output
            if out is None or not out.is_branching:
                continue
            for ref in out.paths:
                key = ref.key
                if key in read_below or any(key[:k] in read_keys for k in range(1, len(key) + 1)):
                    continue
                if (ref.kind == "state" and isinstance(schema, dict) and ref.path
                        and _descend(schema, schema, ref.path) is not None):
                    continue
                self.diag("W302", f"branch alternative {ref.text()} of call {self.ids[i]} is never "
                                  f"read; when that branch is taken nothing reacts (add a call "
                                  f"reading it, or declare it in the state schema)",
                          ref.span or out.span or self.call_span(i))
