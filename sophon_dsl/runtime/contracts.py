"""The plan's declared contracts at run time: its output schema and its state schema.

* :func:`final_output` evaluates the plan's ``return`` value once the calls have
  ended.  A reference with no value is ``Ref.Unresolved`` (as in a call; ``||``
  takes the first alternative with a value), a reference past its JMESPath bounds is
  ``Ref.TooExpensive``, and the value must validate against the output schema
  (``Output.Invalid``).  Any of these errors fails the run.
* :class:`StateWrites` checks what a call is about to write under ``state``
  against the state schema's sub-schema at the written path (``State.Invalid``:
  the call fails and nothing is written).
"""

from __future__ import annotations

from typing import Any, Callable

from ..checks.schema import write_schema
from ..dataflow import base_kind
from ..jmes_limits import DEFAULT_LIMITS, QueryLimits, QueryTooExpensive
from ..model import Expression, OutputMethod, Reference, Template
from ..values import ValueVisitor
from .errors import OUTPUT_INVALID, REF_UNRESOLVED, STATE_INVALID, ErrorInfo
from .inputs import read_at, render_template, too_expensive
from .state import MISSING, json_copy
from .validation import schema_validator

__all__ = ["StateWrites", "final_output", "state_writes"]


class _Output(ValueVisitor):
    """The output value against the final state; the references without a value are
    collected in ``missing`` (their text, or the whole ``||`` expression's)."""

    __slots__ = ("get", "missing", "limits")

    def __init__(self, get: Callable[[str, tuple], Any], limits: QueryLimits) -> None:
        self.get = get
        self.missing: list[str] = []
        self.limits = limits

    def reference(self, node: Reference) -> Any:
        val = read_at(self.get, node, self.limits)
        if val is MISSING:
            self.missing.append(node.text())
            return None
        return json_copy(val)

    def template(self, node: Template) -> str:
        return render_template(node, self.reference, self.limits)

    def expression(self, node: Expression) -> Any:
        if node.op == "||":
            for r in node.operands:
                val = read_at(self.get, r, self.limits)
                if val is not MISSING:
                    return json_copy(val)
            self.missing.append(node.text())
            return None
        last = None
        for r in node.operands:
            last = self.reference(r)
        return last


def final_output(value: Any, get: Callable[[str, tuple], Any], schema: Any,
                 validate: bool = True, limits: QueryLimits | None = None) -> tuple[Any, ErrorInfo | None]:
    """The plan's output ``value`` evaluated with ``get(kind, path)``, and the error that
    fails the run (None when the output has every value and matches ``schema``).
    ``limits``: the bounds of its references' JMESPath (the run's, else the defaults)."""
    ev = _Output(get, limits or DEFAULT_LIMITS)
    try:
        out = ev.visit(value)
    except QueryTooExpensive as exc:
        return None, too_expensive("the plan's output", exc)
    if ev.missing:
        return out, ErrorInfo(REF_UNRESOLVED, "the plan's output has no value at " + ", ".join(ev.missing))
    if validate:
        v = schema_validator(schema)
        msg = v.check(out) if v is not None else None
        if msg:
            return out, ErrorInfo(OUTPUT_INVALID, f"the plan's output does not match its output schema: {msg}")
    return out, None


_ALL: Any = object()  # "any value": no check at this path


class StateWrites:
    """Checks writes under ``state`` against one state schema; one validator per path."""

    __slots__ = ("schema", "_at")

    def __init__(self, schema: dict) -> None:
        self.schema = schema
        self._at: dict[tuple, Any] = {}

    def check(self, tool: str, targets: Any, value: Any, method: OutputMethod) -> ErrorInfo | None:
        """``State.Invalid`` when ``value`` written to any of ``targets`` with ``method``
        does not validate against the state schema, else None."""
        for p in targets:
            if base_kind(p.kind) != "state":
                continue
            msg = self._written(p.path, value, method)
            if msg:
                return ErrorInfo(STATE_INVALID, f"{tool}'s result written to {p.text()} does not match the "
                                                f"plan's state schema: {msg}")
        return None

    def _written(self, path: tuple, value: Any, method: OutputMethod) -> str | None:
        if method is OutputMethod.SET:
            return self._value(path, value)
        if method is OutputMethod.PUSH or method is OutputMethod.CONCAT:
            items = value if method is OutputMethod.CONCAT and isinstance(value, list) else [value]
            # appended items land at indexes past the current end: check them as any item
            for x in items:
                msg = self._value((*path, 1 << 30), x)
                if msg:
                    return msg
            return None
        if isinstance(value, dict):  # merge / assign: each written key (merge: each leaf)
            for k, x in value.items():
                msg = (self._written((*path, k), x, method) if method is OutputMethod.MERGE and
                       isinstance(x, dict) else self._value((*path, k), x))
                if msg:
                    return msg
            return None
        return self._value(path, value)

    def _value(self, path: tuple, value: Any) -> str | None:
        at = self._at
        v = at.get(path)
        if v is None:
            if len(at) >= 4096:  # shared by runs: bounded
                at.clear()
            v = at[path] = self._validator(path)
        if v is _ALL:
            return None
        if v is False:
            return f"the schema does not allow a value at {_where(path)}"
        msg = v.check(value)
        return f"{msg} (at {_where(path)})" if msg else None

    def _validator(self, path: tuple) -> Any:
        root = self.schema
        sub = write_schema(root, root, path)
        if sub is None:
            return _ALL
        if sub is False:
            return False
        if isinstance(sub, dict) and sub is not root:
            sub = dict(sub)
            for defs in ("$defs", "definitions"):
                if defs in root and defs not in sub:
                    sub[defs] = root[defs]
        v = schema_validator(sub)
        return _ALL if v is None else v


def _where(path: tuple) -> str:
    return "state" + "".join(f"[{'*' if s == 1 << 30 else s}]" if isinstance(s, int) else f".{s}" for s in path)


_BY_SCHEMA: dict[int, tuple[Any, StateWrites | None]] = {}


def state_writes(schema: Any) -> StateWrites | None:
    """The (cached) :class:`StateWrites` of a state schema (None: not a schema object).
    The entry keeps the schema alive, so its id stays its own."""
    hit = _BY_SCHEMA.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_BY_SCHEMA) >= 256:
        _BY_SCHEMA.clear()
    sw = StateWrites(schema) if isinstance(schema, dict) and schema else None
    _BY_SCHEMA[id(schema)] = (schema, sw)
    return sw
