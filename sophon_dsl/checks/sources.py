"""E306, E301, W303: every read has a kind that exists and a source.

A read's *source* is another call writing its path (same path, a prefix or an
extension), or for ``input`` the input schema (any path without one), or for
``state`` the state schema.  For ``a || b`` one sourced operand is enough.
The kind check runs per call, against the kinds written so far; the source check
needs every writer, so it runs on the whole plan.
"""

from __future__ import annotations

import difflib
from bisect import bisect_right
from typing import Any

from ..dataflow import BUILTIN_KINDS, base_kind
from ..maps import outer_values
from ..model import Call, Reference, Value
from ..refs import has_path
from ..values import ValueVisitor
from .rule import Rule, Scope

__all__ = ["OpenInputReads", "ReadSources", "UnknownKinds", "read_groups"]


class _Groups(ValueVisitor):
    """Collects ``(node, references, any_of)`` for each node that reads: a reference,
    an expression (``any_of`` for ``||``) or a template."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out: list[tuple[Any, list[Reference], bool]] = []

    def literal(self, node: Any) -> None:
        return None

    def list(self, node: Any) -> None:
        for x in node.items:
            self.visit(x)

    def object(self, node: Any) -> None:
        for _, x in node.entries:
            self.visit(x)

    def reference(self, node: Any) -> None:
        self.out.append((node, [node], False))

    def expression(self, node: Any) -> None:
        self.out.append((node, list(node.operands), node.op == "||"))

    def template(self, node: Any) -> None:
        self.out.append((node, [p for p in node.parts if type(p) is not str], False))


def read_groups(value: Value) -> list[tuple[Any, list[Reference], bool]]:
    """The nodes of a value that read, in source order, with their references."""
    g = _Groups()
    g.visit(value)
    return g.out


def _where_values(ctx: Any, i: int, call: Call):
    """(value, where, fallback) of each parameter of call ``i`` that may read; the fallback
    is the node whose span stands in when the reading node has none (a span is read only
    for a diagnostic: a JSON plan's spans are built when first read)."""
    for p in call.params:
        if p.value.node_kind != "literal":
            yield p.value, f"parameter '{p.name}' of call {ctx.ids[i]}", _Fallback(ctx, i, p)
    if call.map is not None:  # what its body reads outside the item (sophon_dsl.maps)
        for value in outer_values(call.map):
            yield value, f"the body of map {ctx.ids[i]}", _Fallback(ctx, i, value)


class _Fallback:
    """The span of ``node``, else of call ``i``: read only when a diagnostic needs it."""

    __slots__ = ("ctx", "i", "node")

    def __init__(self, ctx: Any, i: int, node: Any):
        self.ctx, self.i, self.node = ctx, i, node

    def span(self) -> Any:
        return self.node.span or self.ctx.call_span(self.i)


def _fallback_span(fallback: _Fallback | None) -> Any:
    return fallback.span() if fallback is not None else None


class UnknownKinds(Rule):
    """E306: a read of a kind that is not input/state/data and that no call writes."""

    codes = ("E306",)

    def check_calls(self) -> None:
        ctx = self.ctx
        flow = ctx.flow
        wss = flow.read_writers
        if all(wss):
            return  # a written path's kind is known
        refs, offs = flow.read_refs, flow.read_offs
        known = ctx.known_kind
        last = -1
        for slot, ws in enumerate(wss):
            if not ws and not known(refs[slot].kind):
                i = bisect_right(offs, slot) - 1
                if i != last:
                    last = i
                    self.check_call(i, ctx.calls[i])

    def check_call(self, i: int, call: Call) -> None:
        ctx = self.ctx
        flow = ctx.flow
        refs = flow.read_refs
        known = ctx.known_kind
        if all(known(refs[s].kind) for s in flow.read_range(i)):
            return
        for value, where, fallback in _where_values(ctx, i, call):
            self.check_value(value, i, where, fallback)

    def check_output(self, value: Value) -> None:
        self.check_value(value, None, "the plan's output", None)

    def check_value(self, value: Value, i: int | None, where: str, fallback: _Fallback | None) -> None:
        ctx = self.ctx
        for node, refs, _ in read_groups(value):
            for r in refs:
                if ctx.known_kind(r.kind):
                    continue
                kinds = sorted(BUILTIN_KINDS | ctx.flow.writers.kinds)
                hint = difflib.get_close_matches(r.kind, kinds, n=1, cutoff=0.6)
                msg = (f"{where} reads {r.text()}: unknown reference kind '{r.kind}' (known kinds: "
                       f"{', '.join(kinds)}; other kinds exist only when a call writes them)")
                if hint:
                    msg += f"; did you mean '{hint[0]}'?"
                ctx.diag("E306", msg, r.span or node.span or _fallback_span(fallback), call=i,
                         data={"kind": r.kind})


class ReadSources(Rule):
    """E301 (W303 for state without a state schema): a read that nothing provides."""

    codes = ("E301", "W303")
    scope = Scope.PLAN

    def check_plan(self) -> None:
        ctx = self.ctx
        flow = ctx.flow
        wss = flow.read_writers
        if not all(wss):  # a read with a writer needs nothing more (the common case)
            refs, offs = flow.read_refs, flow.read_offs
            sourced = ctx.sourced
            last = -1
            for slot, ws in enumerate(wss):
                if not ws and not sourced(refs[slot], ws):
                    i = bisect_right(offs, slot) - 1
                    if i != last:
                        last = i
                        for value, where, fallback in _where_values(ctx, i, ctx.calls[i]):
                            self.check_value(value, i, where, fallback)
        if ctx.output is not None:
            self.check_value(ctx.output, None, "the plan's output", None)

    def check_value(self, value: Value, i: int | None, where: str, fallback: _Fallback | None) -> None:
        ctx = self.ctx
        known, has_source = ctx.known_kind, ctx.has_source
        for node, group, any_of in read_groups(value):
            if len(group) == 1 and not any_of:
                r = group[0]
                if known(r.kind) and has_source(r, i):
                    continue  # the common case: nothing to report
            unknown = [r for r in group if not known(r.kind)]
            present = [r for r in group if known(r.kind)]
            missing = [r for r in present if not has_source(r, i)]
            if any_of and (unknown or not missing or len(missing) < len(present)):
                continue
            for r in (missing[:1] if any_of else missing):
                # Without a state schema the state is an open world: earlier turns or the
                # caller's initial state may hold the path, so this is only a warning.
                open_state = base_kind(r.kind) == "state" and ctx.plan.state_schema is None
                # ``path`` and, for ``||``, every unsourced alternative: what a run checks
                # against its initial state before anything runs
                data: dict[str, Any] = {"kind": r.kind, "path": list(r.path)}
                if any_of:
                    data["alternatives"] = [{"kind": m.kind, "path": list(m.path)} for m in missing]
                ctx.diag("W303" if open_state else "E301",
                         self.message(where, r, any_of and len(present) > 1),
                         r.span or node.span or _fallback_span(fallback), call=i,
                         data=data)

    def message(self, where: str, ref: Reference, all_fallbacks: bool) -> str:
        kind = base_kind(ref.kind)
        schema = self.ctx.plan.state_schema
        if kind == "input":
            why = "the plan's input schema has no such property"
        elif kind == "state" and schema is not None:
            why = "no call writes it and the state schema does not declare it"
        elif kind == "state":
            why = ("no call writes it and the plan declares no state schema, so it must come "
                   "from the initial state")
        else:
            why = "no call writes it"
        extra = " (no alternative of the '||' expression has a source)" if all_fallbacks else ""
        return f"{where} reads {ref.text()} but {why}{extra}{self.closest(ref)}"

    def closest(self, ref: Reference) -> str:
        """``; did you mean †state.userProfile, written by c1?``: the written path of the same
        kind closest to ``ref`` (difflib), or an empty string."""
        written = self.written_paths(ref.kind)
        if not written:
            return ""
        # compared without the shared `†kind.` prefix, which would make any two paths look alike
        by_path = {t.partition(".")[2]: t for t in written}
        hint = difflib.get_close_matches(ref.text().partition(".")[2], list(by_path), n=1, cutoff=0.6)
        if not hint:
            return ""
        text = by_path[hint[0]]
        return f"; did you mean {text}, written by {written[text]}?"

    def written_paths(self, kind: str) -> dict[str, str]:
        """Each path written under ``kind`` (its text) -> the id of its first writer;
        computed once per kind and check run (only when a read has no source)."""
        ctx = self.ctx
        key = ("E301 written", kind)
        found = ctx.cache.get(key)
        if found is None:
            found = ctx.cache[key] = {}
            for j, call in enumerate(ctx.calls):
                if call.output is not None:
                    for p in call.output.paths:
                        if p.kind == kind:
                            found.setdefault(p.text(), ctx.ids[j])
        return found


class OpenInputReads(Rule):
    """W305: reads of input paths in a plan without an input schema (a run needs them)."""

    codes = ("W305",)
    scope = Scope.PLAN

    def check_plan(self) -> None:
        ctx = self.ctx
        if ctx.plan.input_schema is not None:
            return  # E301 checks input reads against the schema
        # (a kind without "@" is its own base kind: only reads of "input" itself count; one set
        # of the read kinds costs no generator step and call per read)
        if "input" not in {r.kind for r in ctx.flow.read_refs} and ctx.output is None:
            return
        reads: list[dict[str, Any]] = []
        for i, call in enumerate(ctx.calls):
            for value, where, fallback in _where_values(ctx, i, call):
                self.collect(value, i, where, fallback, reads)
        if ctx.output is not None:
            self.collect(ctx.output, None, "the plan's output", None, reads)
        if not reads:
            return
        # (a dict keeps the first-seen order at one lookup per read: a 10,000-call plan of
        # input reads was quadratic with a list)
        names = list(dict.fromkeys(alt["text"] for r in reads for alt in r["alternatives"]))
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        first = reads[0]
        # data: every read a run must be given an input for (the runtime refuses, E310, a
        # run whose input lacks one, before anything starts)
        ctx.diag("W305", f"the plan reads {shown} but declares no input schema: a run must be given "
                         f"{'it' if len(names) == 1 else 'them'} (--input, input=), or it is refused before "
                         f"anything starts; declare the input (`input = {{...}}`, inputSchema) to check them",
                 first["span"], call=first["call"], data={"reads": reads})

    def collect(self, value: Value, i: int | None, where: str, fallback: _Fallback | None,
                out: list[dict[str, Any]]) -> None:
        for node, group, any_of in read_groups(value):
            inputs = [r for r in group if base_kind(r.kind) == "input" and "@" not in r.kind]
            if not inputs:
                continue
            if any_of:
                if len(inputs) < len(group):
                    continue  # another kind may provide the value
                alts = [inputs]
            else:
                alts = [[r] for r in inputs]
            seeded = self.ctx.plan.initial.input if self.ctx.plan.initial is not None else None
            for refs in alts:
                if seeded is not None and any(has_path(seeded, list(r.path)) for r in refs):
                    continue  # the document's own input messages hold it (seed 004 context)
                out.append({"call": i, "where": where, "span": refs[0].span or node.span or _fallback_span(fallback),
                            "alternatives": [{"kind": r.kind, "path": list(r.path), "text": r.text()}
                                             for r in refs]})

