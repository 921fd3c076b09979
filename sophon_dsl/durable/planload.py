"""Reading back the plan a durable run stored: compact JSON that the plan printer wrote.

The text is trusted (we wrote it), so it is read with ``json.loads`` and its calls are built
straight from the decoded data, the way the document reader builds them but without source
positions or diagnostics (a resume of a 10,000-call run reads 10,000 calls).  Anything this
short road does not know (a map, a context list, a value the reader would report) takes the
document reader's road, which gives the same plan, or the diagnostics.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ..diagnostics import Span
from ..model import Call, ListValue, Literal, ObjectValue, OutputTarget, Param, Plan
from ..refs import parse_reference, parse_string_value
from ..runtime.errors import PlanInvalid
from ..syntax.attributes import convert_attribute, param_name
from ..syntax.documents import META_PROPERTIES, document_to_plan
from ..syntax.located import ARRAY, OBJECT, SCALAR, LocatedNode

__all__ = ["load_stored_plan"]

_AT = Span(1, 1, 1, 1)
_META = frozenset(META_PROPERTIES)
_OTHER_SHAPES = frozenset(("_tool", "context", "plan", "steps"))  # a call, a request, steps: the reader's


class _Keys(dict):
    """Every key of a stored object is at the one (unknown) position."""

    def __missing__(self, key: str) -> Span:
        return _AT


def _node(value: Any, path: str) -> LocatedNode:
    kind = type(value)
    if kind is dict:
        return LocatedNode(OBJECT, [(k, _node(v, path)) for k, v in value.items()], _AT, path, _Keys())
    if kind is list:
        return LocatedNode(ARRAY, [_node(v, path) for v in value], _AT, path)
    return LocatedNode(SCALAR, value, _AT, path, quoted=kind is str)


class _Unusual(Exception):
    """The short road does not read this document: the document reader does."""


def load_stored_plan(text: str) -> Plan:
    data = json.loads(text)
    try:
        return _read(data, text)
    except Exception:  # noqa: BLE001 - _Unusual, a malformed reference, a value too deep: the reader says
        pass
    plan, diagnostics = document_to_plan(_node(data, "$"), source=text, form="json")
    errors = [d for d in diagnostics if d.is_error]
    if errors:
        raise PlanInvalid(errors, text)
    return plan


def _read(data: Any, text: str) -> Plan:
    """The plan printer's two common shapes: a list of calls, a document with ``calls``."""
    if type(data) is list:
        return Plan(calls=_calls(data), source=text, form="json")
    if type(data) is dict and type(data.get("calls")) is list and not _OTHER_SHAPES & data.keys():
        header, diagnostics = document_to_plan(_node({**data, "calls": []}, "$"), source=text, form="json")
        if diagnostics:
            raise _Unusual
        return replace(header, calls=_calls(data["calls"]), span_paths=None)
    raise _Unusual


def _calls(items: list) -> tuple[Call, ...]:
    if not items:
        raise _Unusual  # (an empty list may be a context list: the reader knows)
    names: dict[str, str] = {}  # one string per tool name, as the reader keeps them
    return tuple(_call(item, names) for item in items)


def _call(doc: Any, names: dict) -> Call:
    """One call, as ``documents._Reader.call`` reads it when it finds nothing to report."""
    if type(doc) is not dict:
        raise _Unusual
    tool = doc.get("_tool")
    if type(tool) is not str or not tool.strip():
        raise _Unusual  # (a map, or a call the reader reports)
    tool = names.setdefault(tool, tool)
    kw: dict[str, Any] = {}
    params: list[Param] = []
    attrs: list[tuple[str, Span]] = []
    path = method = None
    for key, v in doc.items():
        if key[:1] != "_" or key[:2] == "__":
            params.append(Param(param_name(key), _value(v), _AT))
            continue
        if key not in _META:
            raise _Unusual
        attrs.append((key, _AT))
        if key == "_tool":
            continue
        if key == "_outputPath":
            path = v
        elif key == "_output":
            kw["inline_output"] = _value(v)
        else:
            field_name, res, errors = convert_attribute(key, v)
            if errors or res is None:
                raise _Unusual
            if key == "_outputMethod":
                method = res
            else:
                kw[field_name] = res
    output = None
    if path is not None:
        paths, op = _output_path(path)
        output = OutputTarget.of(paths, op, method, _AT)
    elif method is not None:
        raise _Unusual
    return Call(tool=tool, params=tuple(params), output=output, span=_AT, tool_span=_AT, attr_spans=tuple(attrs),
                **kw)


def _output_path(text: Any) -> tuple[tuple, str | None]:
    if type(text) is not str:
        raise _Unusual
    split = OutputTarget.split(text)
    if split is None:
        raise _Unusual
    op, parts = split
    paths = tuple(parse_reference(p, _AT) for p in parts)
    if any(p.query is not None for p in paths):
        raise _Unusual
    return paths, op


def _value(v: Any) -> Any:
    kind = type(v)
    if kind is str:
        return parse_string_value(v, _AT)
    if kind is list:
        return ListValue(tuple(_value(x) for x in v), _AT)
    if kind is dict:
        return ObjectValue(tuple((k, _value(x)) for k, x in v.items()), _AT)
    return Literal(v, _AT)
