"""E308, E309: writes under ``state`` against the plan's state schema.

E308: an output path at which no value valid under the state schema can have
anything (``additionalProperties: false`` and the name not declared, a list
index below a non-list...).  E309: the writer's result has a JSON type the
state schema excludes at that path (its tool's output schema for ``=``; a list
for ``+=`` / ``<<=``; an object for ``&=`` / ``|=``).  The run checks each
written value itself (``State.Invalid``).
"""

from __future__ import annotations

from typing import Any

from ..dataflow import base_kind
from ..model import Call, OutputMethod
from .rule import Rule
from .schema import fmt_types, resolve, schema_types, types_compatible, write_schema

__all__ = ["StateWrites"]

_WRITTEN_TYPE = {OutputMethod.PUSH: frozenset({"array"}), OutputMethod.CONCAT: frozenset({"array"}),
                 OutputMethod.MERGE: frozenset({"object"}), OutputMethod.ASSIGN: frozenset({"object"})}
_NONE: Any = object()


class StateWrites(Rule):
    """E308 an output path the state schema does not allow; E309 a writer of the wrong type."""

    codes = ("E308", "E309")

    def check_calls(self) -> None:
        schema = self.ctx.plan.state_schema
        if not isinstance(schema, dict) or not schema:
            return  # no state schema (the common case): nothing to check
        check = self.check_call
        at, produced = self.at, self.produced
        accepts: dict[tuple, bool] = {}  # (tool, method, inline?, expected types) -> no conflict
        for i, call in enumerate(self.ctx.calls):
            out = call.output
            if out is None:
                continue
            if len(out.paths) == 1 and out.paths[0].kind == "state":
                # the common case, inlined: a path the schema leaves open, or a writer of a
                # type the schema accepts there
                sub, expected = at(schema, out.paths[0].path)
                if sub is None or (sub is not False and expected is None):
                    continue
                if sub is not False:
                    key = (call.tool, out.method, call.inline_output is None, expected)
                    ok = accepts.get(key)
                    if ok is None:
                        types = produced(call, out.method)
                        ok = accepts[key] = types is None or types_compatible(types, expected)
                    if ok:
                        continue
            check(i, call)

    def check_call(self, i: int, call: Call) -> None:
        out = call.output
        schema = self.ctx.plan.state_schema
        if out is None or not isinstance(schema, dict) or not schema:
            return
        paths = out.paths
        for k, p in enumerate(paths):
            kind = p.kind
            if kind != "state" and base_kind(kind) != "state":
                continue
            sub, expected = self.at(schema, p.path)
            if sub is False:
                self.ctx.diag("E308", f"call {self.ctx.ids[i]} writes {p.text()}, which the plan's state schema "
                                      "does not allow", p.span or self.ctx.call_span(i), call=i)
            elif expected is not None and not out.is_catch(k):  # the catch may receive an error object
                produced = self.produced(call, out.method)
                if produced is not None and not types_compatible(produced, expected):
                    self.ctx.diag("E309", f"call {self.ctx.ids[i]} writes {p.text()} as {fmt_types(produced)} "
                                          f"(output of tool '{call.tool}') but the plan's state schema declares "
                                          f"it as {fmt_types(expected)}", p.span or self.ctx.call_span(i), call=i)

    def at(self, schema: dict, path: tuple) -> tuple[Any, frozenset[str] | None]:
        """The state schema at ``path`` and the types it admits (cached per check run)."""
        cache = self.ctx.cache
        if len(path) == 1:  # the common case: one answer for every name the schema does not list
            top = cache.get(("E308 top",), _NONE)
            if top is _NONE:
                top = cache[("E308 top",)] = _top_level(schema)
            if top is not None and path[0] not in top[0] and type(path[0]) is str:
                return top[1]
        key = ("E308", path)
        hit = cache.get(key, _NONE)
        if hit is _NONE:
            sub = write_schema(schema, schema, path)
            types = schema_types(sub, schema) if isinstance(sub, dict) else None
            hit = cache[key] = (sub, types)
        return hit

    def produced(self, call: Call, method: OutputMethod) -> frozenset[str] | None:
        """The JSON types call ``call`` writes (None: unknown)."""
        fixed = _WRITTEN_TYPE.get(method)
        if fixed is not None:
            return fixed
        if call.inline_output is not None:
            return None
        cache = self.ctx.cache
        key = ("E309 produced", call.tool)
        types = cache.get(key, _NONE)
        if types is _NONE:
            tab = self.ctx.table(call.tool)
            out = tab.spec.output_schema if tab.spec is not None else None
            types = cache[key] = schema_types(out, out) if isinstance(out, dict) else None
        return types


def _top_level(schema: dict) -> tuple[Any, tuple] | None:
    """``(listed names, what write_schema says of any other name)`` for a one-name path,
    or None when the schema's top level is not that simple (patterns, combinators)."""
    root = resolve(schema, schema)
    if not isinstance(root, dict) or root.get("patternProperties") or \
            any(k in root for k in ("anyOf", "oneOf", "allOf", "not", "if")):
        return None
    props = root.get("properties")
    props = props if isinstance(props, dict) else {}
    types = schema_types(root, schema)
    add = root.get("additionalProperties", True)
    if types is not None and "object" not in types:
        other: tuple = (False, None)
    elif not isinstance(add, (dict, bool)):
        return None
    else:
        sub = write_schema(schema, schema, ("\x00 any name not listed",)) if add is not False else False
        other = (sub, schema_types(sub, schema) if isinstance(sub, dict) else None)
    return props, other
