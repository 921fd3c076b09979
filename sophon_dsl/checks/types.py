"""E204, E205: parameter values have a type their schema accepts."""

from __future__ import annotations

from typing import Any

from ..model import Call, Expression, ListValue, Literal, ObjectValue, OutputMethod, Param, Reference, Template, Value
from ..values import has_references, literal_json
from .context import ParamEntry, Signature
from .rule import Rule
from .schema import (always_valid, descend, fast_schema_check, fmt_types, json_type, literal_types, offline_registry,
                     resolve, schema_types, short, sub_value, types_compatible)

__all__ = ["ParamTypes"]

_STRING = frozenset({"string"})
_READERS = (Reference, Expression, Template)


def _reads(v: ListValue | ObjectValue) -> bool:
    """Whether a container reads anything (most list parameters are lists of references)."""
    for x in (v.items if type(v) is ListValue else [x for _, x in v.entries]):  # type: ignore[union-attr]
        tx = type(x)
        if tx is Literal:
            continue
        if tx in _READERS or has_references(x):
            return True
    return False


def query_schema(query: str, schema: Any, root: Any) -> tuple[Any, Any] | None:
    """``(schema, root)`` of what a reference's JMESPath ``query`` gives from a value of
    ``schema``, where the schema says (fields, indexes, slices, projections, filters,
    flattening, pipes); None when it cannot tell."""
    from ..refs import compile_reference_query  # (the references' own compile: cached, nesting bounded)

    try:
        ast = compile_reference_query(query).parsed
    except Exception:  # noqa: BLE001 - reported as E105 when the plan was read
        return None
    out = _through(ast, schema, root)
    return None if out is None else (out, root)


def _items(schema: Any, root: Any, index: int = 0) -> Any:
    if index >= 0:
        return descend(schema, root, (index,))
    s = resolve(schema, root)
    items = s.get("items") if isinstance(s, dict) else None
    return items if isinstance(items, dict) else None


def _through(node: dict, s: Any, root: Any) -> Any:
    """The schema of JMESPath AST ``node`` applied to a value of schema ``s`` (None: unknown)."""
    t, ch = node.get("type"), node.get("children") or []
    if s is None:
        return None
    if t in ("current", "identity"):
        return s
    if t == "field":
        return descend(s, root, (node["value"],))
    if t in ("subexpression", "pipe"):
        for c in ch:
            s = _through(c, s, root)
            if s is None:
                return None
        return s
    if t == "index_expression":
        left = _through(ch[0], s, root)
        kind = ch[1].get("type") if isinstance(ch[1], dict) else None
        if kind == "index":
            return _items(left, root, ch[1]["value"]) if left is not None else None
        return left if kind == "slice" else None  # a slice keeps the list's schema
    if t in ("projection", "filter_projection"):
        left = _through(ch[0], s, root)
        if left is None:
            return None
        item = _items(left, root)
        if ch[0].get("type") == "flatten" and item is not None:
            return {"type": "array"}  # the items of nested lists: their schema is not tracked
        right = _through(ch[1], item, root) if item is not None else None
        return {"type": "array", "items": right} if right is not None else {"type": "array"}
    if t == "flatten":
        return {"type": "array"}
    return None


class ParamTypes(Rule):
    """E204 a literal its parameter's schema rejects; E205 a read value of no accepted type."""

    codes = ("E204", "E205")

    def check_calls(self) -> None:
        check = self.check_call_sig
        sigs = self.ctx.sigs
        for i, call in enumerate(self.ctx.calls):
            sig = sigs[i]
            if sig.declared:
                check(i, call, sig)

    def check_call(self, i: int, call: Call) -> None:
        sig = self.ctx.sigs[i]
        if sig.declared:
            self.check_call_sig(i, call, sig)

    def check_call_sig(self, i: int, call: Call, sig: Signature) -> None:
        params = call.params
        tab = sig.tab
        for k, entry in sig.declared:
            p = params[k]
            v = p.value
            tv = type(v)
            if tv is Literal:
                ok = entry.literal_types  # (False until computed, None when the value matters)
                if ok is False:
                    ok = entry.literal_types = literal_types(entry.pschema)
                if ok is not None and type(v.value) in ok:
                    continue
                fast = entry.fast  # False until computed, None when jsonschema decides
                if fast is False:
                    fast = entry.fast = fast_schema_check(entry.pschema)
                if fast is always_valid or (fast is not None and fast(v.value)):
                    continue
                self.check_literal(i, call, p, entry, tab.schema)
            elif tv is ListValue or tv is ObjectValue:
                # (a container whose first item reads something reads: no _reads() walk)
                first = (v.items[0] if v.items else None) if tv is ListValue else \
                    (v.entries[0][1] if v.entries else None)  # type: ignore[union-attr]
                if type(first) in _READERS:
                    continue
                if not _reads(v) and not self.literal_ok(entry, v):
                    self.check_literal(i, call, p, entry, tab.schema)
            elif tab.typed:  # whole-value references, expressions and templates are typed
                expected = entry.types
                if expected is False:
                    root = tab.schema
                    expected = entry.types = schema_types(entry.pschema, root)
                if expected is not None:
                    self.check_value_type(i, p, v, expected)

    # -- literals (E204) ---------------------------------------------------------

    @staticmethod
    def literal_ok(entry: ParamEntry, value: Value) -> bool:
        """True when ``value`` (a literal tree) certainly satisfies the parameter's schema."""
        fast = entry.fast
        if fast is False:
            fast = entry.fast = fast_schema_check(entry.pschema)
        if fast is always_valid:
            return True
        if fast is None:
            return False
        try:
            return fast(literal_json(value))
        except TypeError:
            return False

    def validator(self, tool: str, name: str, pschema: Any, root: dict) -> Any:
        key = ("E204 validator", tool, name)  # in the context: dropped when the tools change
        cache = self.ctx.cache
        if key in cache:
            return cache[key]
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
                v = cls(s, registry=offline_registry())  # never fetch a remote $ref
            except Exception:  # noqa: BLE001  # pragma: no cover - malformed schema: skip the check
                v = None
        cache[key] = v
        return v

    def check_literal(self, i: int, call: Call, p: Param, entry: ParamEntry, root: Any) -> None:
        """E204 when jsonschema rejects the literal (the fast check could not accept it)."""
        pschema = entry.pschema
        v = self.validator(call.tool, p.name, pschema, root)
        if v is None:
            return
        try:
            instance = literal_json(p.value)
            err = _first_best_match(list(v.iter_errors(instance)))
        except Exception:  # noqa: BLE001 - unresolvable $ref, bad regex...: skip
            return
        if err is None:
            return
        ctx = self.ctx
        node = sub_value(p.value, err.absolute_path)
        where = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in err.absolute_path)
        cid = ctx.ids[i]
        if err.validator == "type":
            expected = err.validator_value
            exp = fmt_types(expected if isinstance(expected, list) else [expected])
            got = "null" if err.instance is None else f"{json_type(err.instance)} {short(err.instance)}"
            msg = f"parameter '{p.name}{where}' of call {cid} expects {exp}, got {got}"
        else:
            types = schema_types(pschema, root)
            exp = f" ({fmt_types(types)})" if types else ""
            msg = f"parameter '{p.name}'{exp} of call {cid}: {'at ' + where[1:] + ': ' if where else ''}{err.message}"
        ctx.diag("E204", msg, node.span or p.value.span or p.span or ctx.call_span(i), call=i)

    # -- references (E205) -------------------------------------------------------

    def check_value_type(self, i: int, p: Param, v: Value, expected: frozenset[str]) -> None:
        """E205 for a whole-value reference, expression or template passed as ``p``."""
        tv = type(v)
        if tv is Reference:
            self.check_ref_type(i, p, v, expected)  # type: ignore[arg-type]
        elif tv is Expression:
            for ref in (v.operands if v.op == "||" else v.operands[-1:]):  # type: ignore[union-attr]
                self.check_ref_type(i, p, ref, expected)
        elif tv is Template and not types_compatible(_STRING, expected):
            ctx = self.ctx
            ctx.diag("E205", f"parameter '{p.name}' of call {ctx.ids[i]} ({ctx.loc(i)}) expects "
                             f"{fmt_types(expected)} but its template value is a string",
                     v.span or p.span or ctx.call_span(i), call=i)

    def written_schema(self, j: int, pidx: int, sub: tuple) -> tuple[Any, Any] | None:
        """Schema of what call ``j``'s output path ``pidx`` puts at ``sub`` below it."""
        call = self.ctx.calls[j]
        out = call.output
        if out is None:
            return None
        if out.is_catch(pidx):
            return None  # the last alternative may receive an error object
        if out.method in (OutputMethod.PUSH, OutputMethod.CONCAT):
            return ({"type": "array"}, None) if not sub else None
        if out.method is not OutputMethod.SET:
            return None
        spec = self.ctx.table(call.tool).spec
        if spec is None or not isinstance(spec.output_schema, dict):
            return None
        root = spec.output_schema
        s = descend(root, root, sub)
        return (s, root) if s is not None else None

    def check_ref_type(self, i: int | None, p: Param | None, ref: Reference, expected: frozenset[str], *,
                       code: str = "E205", subject: str | None = None, span: Any = None) -> None:
        """``code`` when a writer of ``ref`` (or, with none, the input / state schema) gives
        it a type ``expected`` excludes.  ``p`` is the parameter read into; without one
        (the plan's output, ``i`` None) ``subject`` says what reads and ``span`` where."""
        ctx = self.ctx
        calls = ctx.calls
        key = ref.key
        if p is not None:
            span = ref.span or p.value.span or p.span or ctx.call_span(i)  # type: ignore[arg-type]
            subject = f"parameter '{p.name}' of call {ctx.ids[i]} ({ctx.loc(i)})"  # type: ignore[index]
        else:
            span = ref.span or span
        found_writer = False
        writers = ctx.flow.writers
        for k in range(1, len(key) + 1):
            for j, pidx in writers.exact.get(key[:k], ()):
                if j == i:
                    continue
                found_writer = True
                ws = self.written_schema(j, pidx, key[k:])
                if ws is not None and ref.query is not None:
                    ws = query_schema(ref.query, ws[0], ws[1])
                if ws is None:
                    continue
                produced = schema_types(ws[0], ws[1])
                if produced is None or types_compatible(produced, expected):
                    continue
                wref = calls[j].output.paths[pidx]  # type: ignore[union-attr]
                wpath = wref.text()
                via = "" if k == len(key) else f" (inside {wpath})"
                wspan = wref.span or calls[j].span
                wloc = f"{ctx.plan.file or '<plan>'}:{wspan.line}:{wspan.column}" if wspan else ctx.loc(j)
                head = f"{subject} expects {fmt_types(expected)}"
                ctx.diag(code, f"{head} but {ref.text()} is written by {ctx.ids[j]} ({ctx.loc(j)}) as "
                                 f"{fmt_types(produced)}{via}", span,
                         [f"{ctx.ids[j]} writes {wpath} at {wloc} (output of tool '{calls[j].tool}': "
                          f"{fmt_types(produced)})"], call=i)
        if found_writer or writers.below.get(key):
            return
        # No writer: compare with the declared input / state schema.
        schema = {"input": ctx.plan.input_schema, "state": ctx.plan.state_schema}.get(ref.kind)
        if not isinstance(schema, dict):
            return
        sub = descend(schema, schema, ref.path)
        if sub is not None and ref.query is not None:
            sub = (query_schema(ref.query, sub, schema) or (None,))[0]
        produced = schema_types(sub, schema) if sub is not None else None
        if produced is not None and not types_compatible(produced, expected):
            head = f"{subject} expects {fmt_types(expected)}"
            ctx.diag(code, f"{head} but {ref.text()} is declared as {fmt_types(produced)} by the plan's "
                             f"{ref.kind} schema", span, call=i)


def _first_best_match(errors: list) -> Any:
    """jsonschema's best match, except that of equally relevant errors the first in the
    value wins (its own key ranks ``[2]`` above ``[1]``: E204 would point at the last bad
    item of a list instead of the first)."""
    from collections import deque

    import jsonschema

    if not errors:
        return None
    relevance = jsonschema.exceptions.relevance

    def rank(e: Any) -> tuple:
        return tuple(x for x in relevance(e) if not isinstance(x, deque))

    def position(e: Any) -> tuple:
        return tuple((isinstance(s, str), s) for s in e.absolute_path)

    top = max(rank(e) for e in errors)
    first = min((e for e in errors if rank(e) == top), key=position)
    return jsonschema.exceptions.best_match([first])
