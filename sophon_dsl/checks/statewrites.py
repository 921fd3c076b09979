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
from .schema import fmt_types, schema_types, types_compatible, write_schema

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
        for i, call in enumerate(self.ctx.calls):
            if call.output is not None:
                check(i, call)

    def check_call(self, i: int, call: Call) -> None:
        out = call.output
        schema = self.ctx.plan.state_schema
        if out is None or not isinstance(schema, dict) or not schema:
            return
        last = len(out.paths) - 1
        for k, p in enumerate(out.paths):
            if base_kind(p.kind) != "state":
                continue
            sub, expected = self.at(schema, p.path)
            if sub is False:
                self.ctx.diag("E308", f"call {self.ctx.ids[i]} writes {p.text()}, which the plan's state schema "
                                      "does not allow", p.span or self.ctx.call_span(i), call=i)
                continue
            if expected is None or (out.is_branching and k == last):
                continue  # the last alternative of a branching path may receive an error object
            produced = self.produced(call, out.method)
            if produced is not None and not types_compatible(produced, expected):
                self.ctx.diag("E309", f"call {self.ctx.ids[i]} writes {p.text()} as {fmt_types(produced)} "
                                      f"(output of tool '{call.tool}') but the plan's state schema declares it as "
                                      f"{fmt_types(expected)}", p.span or self.ctx.call_span(i), call=i)

    def at(self, schema: dict, path: tuple) -> tuple[Any, frozenset[str] | None]:
        """The state schema at ``path`` and the types it admits (cached per check run)."""
        cache = self.ctx.cache
        key = ("E308", path)
        hit = cache.get(key, _NONE)
        if hit is _NONE:
            sub = write_schema(schema, schema, path)
            types = schema_types(sub, schema) if isinstance(sub, dict) else None
            hit = cache[key] = (sub, types)
        return hit

    def produced(self, call: Call, method: OutputMethod) -> frozenset[str] | None:
        fixed = _WRITTEN_TYPE.get(method)
        if fixed is not None:
            return fixed
        if call.inline_output is not None:
            return None
        tab = self.ctx.table(call.tool)
        out = tab.spec.output_schema if tab.spec is not None else None
        return schema_types(out, out) if isinstance(out, dict) else None
