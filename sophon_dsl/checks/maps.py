"""E502-E509: a map's list and body (``spec/language.md``, "Map over a list").

The body is checked once, for every item: its calls go through the per-call rules
(tools, parameters, literal types, modes; nested maps through this rule again) as a
plan of their own, in which the item and its index are typed by the list's JSON
Schema: the item's schema is the ``items`` of the list's schema, taken from the
writer of the list (its tool's output schema), else the plan's input or state
schema.  To reuse the type rules unchanged, that plan reads the item as
``†input.<item>`` under an input schema that declares it; its findings are reported
with the item's own spelling (``†text``), and a type conflict about the item is
E505.  The map's outer reads are the map call's reads, so E301, E302 and W301 see
them in the plan's own data flow.
"""

from __future__ import annotations

from typing import Any

from ..dataflow import DataFlow
from ..maps import LOCAL, body_ids, scope_names
from ..model import Call, ListValue, Literal, MapSpec, ObjectValue, OutputMethod, Plan, Reference, Template
from ..values import map_references, references
from .branches import CollapsedBranches
from .checker import RuleRunner
from .modes import Activities, InlineOutputs, MissingImplementations
from .params import ToolParams
from .rule import Rule
from .schema import descend, fmt_types, schema_has_path, schema_types
from .types import ParamTypes

__all__ = ["MapBodies"]

_INT = {"type": "integer", "minimum": 0}


class MapBodies(Rule):
    """E502 a map over a non-list; E503-E509 its body's writes, local reads, ids, item paths and types."""

    codes = ("E502", "E503", "E504", "E505", "E506", "E507", "E508", "E509")

    def check_calls(self) -> None:
        if not self.ctx.flow.has_maps:
            return  # the common case: no call to look at
        check = self.check_call
        for i, call in enumerate(self.ctx.calls):
            if call.map is not None:
                check(i, call)

    def check_call(self, i: int, call: Call) -> None:
        spec = call.map
        if spec is None:
            return
        ctx = self.ctx
        mid = ctx.ids[i]
        ids = body_ids(spec)
        item_schema, root = self.item_schema(i, mid, spec)
        self.body_ids(i, mid, spec, ids)
        self.body_writes(i, mid, spec)
        self.body_flow(i, mid, spec, ids)
        if item_schema is not None:
            self.item_paths(i, mid, spec, item_schema, root)
        self.body_rules(i, mid, spec, ids, item_schema, root)

    # -- the list ------------------------------------------------------------------

    def item_schema(self, i: int, mid: str, spec: MapSpec) -> tuple[Any, Any]:
        """The item's schema and its root (None, None when unknown); E502 when the list is
        certainly not a list."""
        ctx = self.ctx
        over = spec.over
        tv = type(over)
        if tv is ListValue:
            return None, None
        if tv is Literal or tv is ObjectValue or tv is Template:
            what = "a string" if tv is Template else _describe(over.value if tv is Literal else {})
            ctx.diag("E502", f"map {mid} goes over {what}, not a list", over.span or ctx.call_span(i), call=i)
            return None, None
        if tv is not Reference:
            return None, None  # an expression: the type of its value is not known here
        found = self.list_schema(i, over)
        if found is None:
            return None, None
        schema, root, source = found
        types = schema_types(schema, root)
        if types is not None and "array" not in types:
            ctx.diag("E502", f"map {mid} goes over {over.text()}, which {source} as {fmt_types(types)}, "
                             "not a list", over.span or ctx.call_span(i), call=i)
            return None, None
        item = descend(schema, root, (0,))
        return (item, root) if item is not None else (None, None)

    def list_schema(self, i: int, ref: Reference) -> tuple[Any, Any, str] | None:
        """The schema of what ``ref`` reads: its writer's (a ``set`` of a tool with an
        output schema), else the plan's input / state schema; with how it is known."""
        ctx = self.ctx
        key = ref.key
        writers = ctx.flow.writers
        found = False
        for k in range(1, len(key) + 1):
            for j, pidx in writers.exact.get(key[:k], ()):
                if j == i:
                    continue
                found = True
                call = ctx.calls[j]
                out = call.output
                if out is None or out.method is not OutputMethod.SET or out.is_catch(pidx):
                    return None
                spec = ctx.table(call.tool).spec
                root = spec.output_schema if spec is not None else None
                if not isinstance(root, dict):
                    return None
                sub = descend(root, root, key[k:])
                return (sub, root, f"{ctx.ids[j]} writes") if sub is not None else None
        if found or writers.below.get(key):
            return None
        schema = {"input": ctx.plan.input_schema, "state": ctx.plan.state_schema}.get(ref.kind)
        if not isinstance(schema, dict):
            return None
        sub = descend(schema, schema, ref.path)
        return (sub, schema, f"the plan's {ref.kind} schema declares") if sub is not None else None

    # -- the body ------------------------------------------------------------------

    def body_ids(self, i: int, mid: str, spec: MapSpec, ids: list[str]) -> None:
        seen: set[str] = set()
        for call, bid in zip(spec.body, ids):
            if bid in seen:
                self.ctx.diag("E507", f"two calls of map {mid}'s body have the id '{bid}' (label one of them: "
                                      f"name: tool(...))", call.tool_span or call.span, call=i)
            seen.add(bid)

    def body_writes(self, i: int, mid: str, spec: MapSpec) -> None:
        for call in spec.body:
            if call.output is None:
                continue
            for r in call.output.paths:
                if r.kind != LOCAL:
                    self.ctx.diag("E503", f"a call of map {mid}'s body writes {r.text()}; the calls of a body "
                                          f"write only the item's own data (†local...), and the map's result "
                                          f"goes to the map's output path", r.span or call.span, call=i)

    def body_flow(self, i: int, mid: str, spec: MapSpec, ids: list[str]) -> None:
        """E504 a local read no body call writes, E508 an unknown `after`, E509 a cycle."""
        ctx = self.ctx
        flow = DataFlow.build(spec.body, ids)
        for j, call in enumerate(spec.body):
            for read in flow.reads(j):
                if read.ref.kind == LOCAL and not read.writers:
                    ctx.diag("E504", f"call {mid}[*].{ids[j]} reads {read.ref.text()}, which no call of "
                                     "the body writes", read.ref.span or call.span, call=i)
        for r in references(spec.result):
            if r.kind == LOCAL and not flow.writers.resolve(r.kind, r.path, None):
                ctx.diag("E504", f"the result of map {mid} reads {r.text()}, which no call of the body writes",
                         r.span, call=i)
        for j, name in flow.unknown_after:
            if name not in ctx.flow.index:
                ctx.diag("E508", f"call {mid}[*].{ids[j]} waits for '{name}', which is neither a call "
                                 "of the body nor of the plan", spec.body[j].attr_span("_after"), call=i)
        for cycle in flow.cycles():
            names = " -> ".join(ids[j] for j in (*cycle, cycle[0]))
            first = spec.body[min(cycle)]
            ctx.diag("E509", f"the calls of map {mid}'s body wait for each other: {names}",
                     first.tool_span or first.span, call=i)

    def item_paths(self, i: int, mid: str, spec: MapSpec, schema: Any, root: Any) -> None:
        """E506: a read below the item that its schema cannot hold."""
        for call in spec.body:
            for p in call.params:
                for r in references(p.value):
                    if r.kind == spec.item and r.path and not schema_has_path(schema, root, r.path):
                        self.ctx.diag("E506", f"map {mid}'s body reads {r.text()}, but the items of its list "
                                              f"have no such path", r.span or call.span, call=i)

    def body_rules(self, i: int, mid: str, spec: MapSpec, ids: list[str], item: Any, root: Any) -> None:
        """The per-call rules over the body, as a plan of its own (see the module docstring)."""
        ctx = self.ctx
        plan = ctx.plan
        schema = _item_input(plan.input_schema, spec, item, root)
        names = {spec.item, spec.index}

        def as_input(r: Reference) -> Reference:
            return Reference("input", (r.kind, *r.path), r.span, r.query) if r.kind in names else r

        body = tuple(_rewrite_reads(c, as_input) for c in spec.body)
        sub = Plan(body, mode=plan.mode, input_schema=schema, state_schema=plan.state_schema, file=plan.file,
                   span_paths=plan.span_paths)
        bids = [f"{mid}[*].{b}" for b in ids]
        runner = RuleRunner(sub, ctx.tools, rules=BODY_RULES, flow=DataFlow.build(body, bids),
                            require_executor=ctx.require_executor,
                            require_implementations=ctx.require_implementations)
        for d in runner.diagnostics:
            message = d.message
            code = d.code
            for n in names:
                if f"†input.{n}" in message:
                    message = message.replace(f"†input.{n}", f"†{n}")
                    message = message.replace("by the plan's input schema", f"by the items of map {mid}'s list")
                    if code == "E205":
                        code = "E505"
            ctx.diag(code, message, d.span, d.related, call=i, data=d.data)


def _rewrite_reads(call: Call, fn: Any) -> Call:
    """``call`` with ``fn`` applied to the references it reads (not its output paths)."""
    from dataclasses import replace

    from ..model import Param

    params = tuple(Param(p.name, map_references(p.value, fn), p.span) for p in call.params)
    if call.map is not None:
        inner = call.map
        over = map_references(inner.over, fn)
        keep = scope_names(inner)
        inner_fn = (lambda r: r if r.kind in keep else fn(r))
        spec = replace(inner, over=over, body=tuple(_rewrite_reads(b, inner_fn) for b in inner.body),
                       result=map_references(inner.result, inner_fn) if inner.result is not None else None)
        return replace(call, params=(Param("over", over, over.span),), map=spec)
    return replace(call, params=params)


def _item_input(input_schema: Any, spec: MapSpec, item: Any, root: Any) -> dict:
    """The input schema of a body: the plan's, plus the item and the index."""
    base = input_schema if isinstance(input_schema, dict) else {}
    props = dict(base.get("properties") or {}) if isinstance(base.get("properties"), dict) else {}
    props[spec.item] = item if item is not None else {}
    props[spec.index] = _INT
    out: dict[str, Any] = {"type": "object", "properties": props}
    for defs in ("$defs", "definitions"):
        for src in (base, root if isinstance(root, dict) else {}):
            if defs in src:
                out.setdefault(defs, {}).update(src[defs])
    return out


def _describe(v: Any) -> str:
    if isinstance(v, str):
        return "a string"
    if isinstance(v, bool):
        return "a boolean"
    if v is None:
        return "null"
    if isinstance(v, dict):
        return "an object"
    return "a number"


#: The per-call rules a body goes through (the plan-wide ones see the map's reads instead).
BODY_RULES: tuple[type[Rule], ...] = (ToolParams, ParamTypes, InlineOutputs, Activities, CollapsedBranches,
                                      MissingImplementations, MapBodies)
