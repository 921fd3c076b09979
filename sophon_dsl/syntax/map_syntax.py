"""The three spellings of ``map`` (``spec/language.md``, "Map over a list").

DSL::

    †state.fr = map($input.texts, as=text, concurrency=4, tolerate="10%") {
        †local.fr = translate(text=†text, lang="fr")
        return †local.fr
    }

JSON / YAML: a call object with ``_map`` instead of ``_tool``; the other
meta-properties (``_outputPath``, ``_id``, ``_after``, ...) keep their meaning::

    {"_map": {"over": "†input.texts", "as": "text", "concurrency": 4, "tolerate": "10%",
              "do": [{"_tool": "translate", "text": "†text", "lang": "fr", "_outputPath": "†local.fr"}],
              "return": "†local.fr"},
     "_outputPath": "†state.fr"}

Both readers hand the options over as plain data to :func:`convert_options`, so a bad
option gets the same message (E501) in every form.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..dataflow import BUILTIN_KINDS
from ..diagnostics import Span
from ..maps import LOCAL, MAP_TOOL
from ..model import Call, Literal, MapSpec, Reference, Value

__all__ = ["MAP_KEY", "OPTIONS", "convert_options", "map_from_dsl", "map_from_node", "map_document",
           "map_args"]

MAP_KEY = "_map"
OPTIONS = ("over", "as", "index", "concurrency", "tolerate")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PERCENT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*\Z")


def convert_options(opts: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Map options given as JSON data (``as``, ``index``, ``concurrency``, ``tolerate``)
    -> MapSpec fields, and ``(option, message)`` for each problem."""
    fields: dict[str, Any] = {}
    errors: list[tuple[str, str]] = []
    for key, val in opts.items():
        if key in ("as", "index"):
            if not (isinstance(val, str) and _NAME.match(val)):
                errors.append((key, f"map option '{key}' must be a name such as {'text' if key == 'as' else 'i'}, "
                                    f"got {val!r}"))
            elif val in BUILTIN_KINDS or val == LOCAL:
                errors.append((key, f"map option '{key}' cannot be {val!r}: that name already reads "
                                    f"{'the item’s own data' if val == LOCAL else 'the plan’s ' + val}"))
            else:
                fields["item" if key == "as" else "index"] = val
        elif key == "concurrency":
            if type(val) is not int or val < 1:
                errors.append((key, f"map option 'concurrency' must be a whole number of items, at least 1, "
                                    f"got {val!r}"))
            else:
                fields["concurrency"] = val
        elif key == "tolerate":
            m = _PERCENT.match(val) if isinstance(val, str) else None
            if type(val) is int and val >= 0:
                fields["tolerate"] = val
            elif m is not None and float(m.group(1)) <= 100:
                fields["tolerate_percent"] = float(m.group(1))
            else:
                errors.append((key, "map option 'tolerate' must be a count of failed items (2) or a "
                                    f"percentage (\"10%\"), got {val!r}"))
        else:
            errors.append((key, f"unknown map option {key!r}; expected one of {', '.join(OPTIONS)}"))
    if fields.get("item", "item") == fields.get("index", "index"):
        errors.append(("index", "the item and the index of a map need different names"))
    return fields, errors


# ---------------------------------------------------------------------------- DSL


def map_from_dsl(tool: str, params: list, block: tuple, tool_span: Span, span: Span, *,
                 err: Callable[[str, str, Span], None], to_json: Callable[[Value], Any],
                 allow: Callable[[Value], None]) -> MapSpec | None:
    """A ``map(...) {...}`` statement of the DSL parser -> MapSpec, or None after reporting
    E501 through ``err(code, message, span)``.  ``to_json`` turns an option's value into
    plain data; ``allow(value)`` tells the parser a value that is an error in a call (a
    bare word, ``map(†row)``'s shorthand) is fine here."""
    _, body, result, block_span = block
    if tool != MAP_TOOL:
        err("E501", f"only map takes a body in braces; '{tool}(...)' is a call (write "
                     f"map(†kind.list) {{ ... }} to run calls per item)", block_span)
        return None
    over: Value | None = None
    opts: dict[str, Any] = {}
    spans: dict[str, Span] = {}
    for p in params:
        v = p.value
        allow(v)  # `as=text`, `map(†row)`: fine here, errors in a call
        shorthand = type(v) is Reference and p.span == v.span
        if p.name == "over" or (shorthand and over is None):
            over = v
            continue
        spans[p.name] = p.span
        opts[p.name] = v.value if type(v) is Literal else to_json(v)
    ok = True
    if over is None:
        err("E501", "map needs the list to go over: map(†input.items) or map(over=[...])", tool_span)
        ok = False
    fields, errors = convert_options(opts)
    for key, message in errors:
        err("E501", message, spans.get(key, tool_span))
        ok = False
    if not ok:
        return None
    return MapSpec(over, body, result=result, span=span, **fields)  # type: ignore[arg-type]


def map_options(spec: MapSpec) -> list[tuple[str, Any]]:
    """The options a map sets away from their defaults, as ``(name, JSON value)``: spelled
    the same in every form (``tolerate`` a count, or a percentage as ``"10%"``)."""
    out: list[tuple[str, Any]] = []
    if spec.item != "item":
        out.append(("as", spec.item))
    if spec.index != "index":
        out.append(("index", spec.index))
    if spec.concurrency is not None:
        out.append(("concurrency", spec.concurrency))
    if spec.tolerate is not None:
        out.append(("tolerate", spec.tolerate))
    if spec.tolerate_percent is not None:
        out.append(("tolerate", _pct(spec.tolerate_percent)))
    return out


def map_args(spec: MapSpec, fmt: Callable[[Value], str]) -> list[str]:
    """The DSL arguments of a map: the list (bare when it is a reference), then its options
    (``as``/``index`` name variables: written bare)."""
    out = [fmt(spec.over) if type(spec.over) is Reference else f"over={fmt(spec.over)}"]
    for name, value in map_options(spec):
        out.append(f'{name}="{value}"' if type(value) is str and name == "tolerate" else f"{name}={value}")
    return out


def _pct(p: float) -> str:
    return f"{int(p)}%" if p == int(p) else f"{p}%"


# ---------------------------------------------------------------------------- JSON / YAML


def map_from_node(reader: Any, node: Any) -> MapSpec | None:
    """The ``_map`` object of a JSON/YAML call -> MapSpec, or None after reporting E501
    (``reader``: the document reader, for values, calls and diagnostics)."""
    if not node.is_object:
        reader.err("E501", f"_map must be an object with \"over\" and \"do\", got {node.describe()}", node)
        return None
    over = body = result = None
    opts: dict[str, Any] = {}
    ok = True
    for key, vnode in node.value:
        if key == "over":
            over = reader.value(vnode)
            ok = ok and over is not None
        elif key == "do":
            if not vnode.is_array:
                reader.err("E501", f"_map.do must be an array of calls, got {vnode.describe()}", vnode)
                ok = False
            else:
                n = len(reader.diags)
                body = tuple(reader.calls(vnode))
                ok = ok and len(reader.diags) == n
        elif key == "return":
            result = reader.value(vnode)
            ok = ok and result is not None
        else:
            opts[key] = vnode.value if vnode.is_scalar else vnode.to_data()
    if over is None and ok:
        reader.err("E501", "_map needs \"over\": the list to go over (\"†input.items\" or a list)", node)
        ok = False
    fields, errors = convert_options(opts)
    for key, message in errors:
        sub = node.get(key)
        reader.err("E501", message, sub if sub is not None else node)
        ok = False
    if not ok:
        return None
    return MapSpec(over, body or (), result=result, span=node.span, **fields)  # type: ignore[arg-type]


def map_document(spec: MapSpec, call_doc: Callable[[Call], dict], to_json: Callable[[Value], Any]) -> dict:
    """The ``_map`` object of a map call (``call_doc`` prints each body call)."""
    out: dict[str, Any] = {"over": to_json(spec.over), **dict(map_options(spec))}
    out["do"] = [call_doc(c) for c in spec.body]
    if spec.result is not None:
        out["return"] = to_json(spec.result)
    return out
