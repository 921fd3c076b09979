"""E208: the plan's output value against its output schema (``output = {...}``).

The output value is walked alongside the schema: a literal part must validate
against the sub-schema at its place; an object must have the required names
(and no name a closed schema refuses), a list or object must be allowed there;
a whole-value reference, ``||`` / ``&&`` expression or template is typed as a
parameter's is (E205): by its writers' output schemas, else the input / state
schema.  The run checks the final value itself (``Output.Invalid``).
"""

from __future__ import annotations

from typing import Any

from ..model import Expression, ListValue, Literal, ObjectValue, Reference, Template, Value
from ..values import has_references, literal_json
from .rule import Rule
from .schema import descend, fmt_types, json_type, offline_registry, resolve, schema_types, short, types_compatible
from .types import ParamTypes

__all__ = ["OutputSchema"]

_STRING = frozenset({"string"})


class OutputSchema(Rule):
    """E208: a part of the plan's output its output schema rejects."""

    codes = ("E208",)

    def check_output(self, value: Value) -> None:
        schema = self.ctx.plan.output_schema
        if isinstance(schema, dict) and schema:
            self.walk(value, schema, schema, "")

    def report(self, node: Value, where: str, what: str) -> None:
        at = f" at {where.lstrip('.')}" if where else ""
        self.ctx.diag("E208", f"the plan's output{at} {what}", node.span)

    def walk(self, v: Value, sub: Any, root: dict, where: str) -> None:
        sub = resolve(sub, root)
        if sub is None or sub is True or sub == {}:
            return
        tv = type(v)
        if tv is Literal or ((tv is ListValue or tv is ObjectValue) and not has_references(v)):
            self.check_literal(v, sub, root, where)
            return
        expected = schema_types(sub, root)
        if tv is ObjectValue or tv is ListValue:
            kind = "object" if tv is ObjectValue else "array"
            if expected is not None and kind not in expected:
                self.report(v, where, f"is an {kind} but the output schema expects {fmt_types(expected)}")
                return
            if not isinstance(sub, dict):
                return
            if tv is ListValue:
                for k, x in enumerate(v.items):  # type: ignore[union-attr]
                    self.walk(x, descend(sub, root, (k,)), root, f"{where}[{k}]")
                return
            self.check_names(v, sub, where)  # type: ignore[arg-type]
            for k, x in v.entries:  # type: ignore[union-attr]
                self.walk(x, descend(sub, root, (k,)), root, f"{where}.{k}")
            return
        if expected is None:
            return
        subject = f"the plan's output{' at ' + where.lstrip('.') if where else ''}"
        types = ParamTypes(self.ctx)  # its reference typing, with this code and subject
        if tv is Reference:
            types.check_ref_type(None, None, v, expected, code="E208", subject=subject, span=v.span)  # type: ignore[arg-type]
        elif tv is Expression:
            for ref in (v.operands if v.op == "||" else v.operands[-1:]):  # type: ignore[union-attr]
                types.check_ref_type(None, None, ref, expected, code="E208", subject=subject, span=v.span)
        elif tv is Template and not types_compatible(_STRING, expected):
            self.report(v, where, f"is a template (a string) but the output schema expects {fmt_types(expected)}")

    def check_names(self, v: ObjectValue, sub: dict, where: str) -> None:
        names = {k for k, _ in v.entries}
        required = sub.get("required")
        if isinstance(required, list):
            missing = [n for n in required if isinstance(n, str) and n not in names]
            if missing:
                self.report(v, where, f"lacks {', '.join(repr(n) for n in missing)}, required by the output schema")
        props = sub.get("properties")
        if sub.get("additionalProperties") is False and not sub.get("patternProperties"):
            extra = [n for n in names if not (isinstance(props, dict) and n in props)]
            if extra:
                self.report(v, where, f"has {', '.join(repr(n) for n in sorted(extra))}, which the output "
                                      "schema does not allow")

    def check_literal(self, v: Value, sub: Any, root: dict, where: str) -> None:
        try:
            import jsonschema

            schema = sub
            if isinstance(sub, dict) and sub is not root:
                schema = {**sub, **{k: root[k] for k in ("$defs", "definitions") if k in root and k not in sub}}
            cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator)
            instance = literal_json(v)
            err = jsonschema.exceptions.best_match(cls(schema, registry=offline_registry()).iter_errors(instance))
        except Exception:  # noqa: BLE001 - a malformed schema, unresolvable $ref, bad regex...: no check
            return
        if err is None:
            return
        inner = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in err.absolute_path)
        node = v
        if err.validator == "type":
            exp = err.validator_value
            got = "null" if err.instance is None else f"{json_type(err.instance)} {short(err.instance)}"
            what = f"expects {fmt_types(exp if isinstance(exp, list) else [exp])}, got {got}"
        else:
            what = f"does not match the output schema: {err.message}"
        self.report(node, where + inner, what)
