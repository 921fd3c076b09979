"""Prescribed output paths (Acts 008): a tool that fixes where its result goes.

A tool's input schema may describe ``_outputPath`` like a parameter; with a
``const`` (or a one-value ``enum``) the path is *prescribed*::

    {"type": "object",
     "properties": {"text": {"type": "string"},
                    "_outputPath": {"type": "string", "const": "†data.user.summary"}}}

A call of that tool written without an output path writes there; a call naming
another path is an error (E210; E211 when the prescribed text is not an output
path).  ``_outputPath`` describes the call's meta-property, not a parameter: it is
neither required from nor accepted as an argument (:func:`parameter_schema`).

This module imports only the model and the reference parser, so the checker,
the compiler, the runtime and the stream may all use it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .model import Call, OutputTarget, Plan
from .refs import ReferenceSyntaxError, parse_reference

if TYPE_CHECKING:  # (named in annotations only)
    from .tools import ToolSpec

__all__ = ["OUTPUT_PATH_KEY", "Prescription", "parameter_schema", "prescribe_call", "prescribe_plan",
           "prescription", "same_target", "target_text"]

OUTPUT_PATH_KEY = "_outputPath"


class Prescription:
    """A tool's prescribed output path: its ``text``, and its ``target`` (None when the
    text is not an output path)."""

    __slots__ = ("text", "target")

    def __init__(self, text: str, target: OutputTarget | None) -> None:
        self.text = text
        self.target = target


# id(schema) -> (schema, Prescription | None): the schema is kept so its id stays its own
_CACHE: dict[int, tuple[Any, Prescription | None]] = {}


def _prescribed_text(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return None
    props = schema.get("properties")
    entry = props.get(OUTPUT_PATH_KEY) if isinstance(props, dict) else None
    if not isinstance(entry, dict):
        return None
    if "const" in entry:
        value = entry["const"]
    else:
        enum = entry.get("enum")
        if not (isinstance(enum, list) and len(enum) == 1):
            return None
        value = enum[0]
    return value if isinstance(value, str) else None


def parse_target(text: str) -> OutputTarget | None:
    """``†a``, ``†a || †b`` or ``†a && †b`` as an output target; None when malformed."""
    split = OutputTarget.split(text)
    if split is None:
        return None
    op, parts = split
    try:
        paths = tuple(parse_reference(p, dagger_aliases="†$") for p in parts)
    except ReferenceSyntaxError:
        return None
    return OutputTarget.of(paths, op)


def prescription(spec: ToolSpec | None) -> Prescription | None:
    """The tool's prescribed output path, or None when it prescribes none."""
    schema = spec.input_schema if spec is not None else None
    if not isinstance(schema, dict):
        return None
    hit = _CACHE.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    text = _prescribed_text(schema)
    found = None if text is None else Prescription(text, parse_target(text))
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[id(schema)] = (schema, found)
    return found


def same_target(a: OutputTarget, b: OutputTarget) -> bool:
    """The same paths joined by the same operator (the output method is the call's own)."""
    return a.paths == b.paths and (a.op if len(a.paths) > 1 else None) == (b.op if len(b.paths) > 1 else None)


def target_text(t: OutputTarget) -> str:
    return t.text()


def prescribe_call(call: Call, spec: Any) -> Call:
    """``call`` with its tool's prescribed output path when it names none (else itself)."""
    if call.output is not None:
        return call
    p = prescription(spec)
    if p is None or p.target is None:
        return call
    span = call.tool_span or call.span
    paths = tuple(replace(r, span=span) for r in p.target.paths)
    return replace(call, output=OutputTarget.of(paths, p.target.op, span=span))


def prescribe_plan(plan: Plan, tools: Any) -> Plan:
    """``plan`` with each call that names no output path given its tool's prescribed one
    (the same object when no call changes).  ``tools`` has ``get(name)``."""
    known: dict[str, Any] = {}
    calls = plan.calls
    out: list[Call] | None = None
    for i, call in enumerate(calls):
        if call.output is not None:
            continue
        spec = known.get(call.tool, known)
        if spec is known:
            spec = known[call.tool] = tools.get(call.tool)
        new = prescribe_call(call, spec)
        if new is not call:
            if out is None:
                out = list(calls)
            out[i] = new
    return plan if out is None else replace(plan, calls=tuple(out))


def parameter_schema(schema: Any) -> Any:
    """The input schema as arguments see it: ``_outputPath`` left out of ``properties``
    and ``required`` (the same object when it has none)."""
    if not isinstance(schema, dict):
        return schema
    props = schema.get("properties")
    req = schema.get("required")
    in_props = isinstance(props, dict) and OUTPUT_PATH_KEY in props
    in_req = isinstance(req, list) and OUTPUT_PATH_KEY in req
    if not (in_props or in_req):
        return schema
    out = dict(schema)
    if in_props:
        out["properties"] = {k: v for k, v in props.items() if k != OUTPUT_PATH_KEY}
    if in_req:
        out["required"] = [k for k in req if k != OUTPUT_PATH_KEY]
    return out
