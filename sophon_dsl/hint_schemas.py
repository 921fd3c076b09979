"""JSON Schemas of the plain type hints, written out without pydantic (issue 30, start-up).

Most tools take and return JSON data (``str``, ``int``, ``list[str]``, ``dict | None``...).
Importing pydantic and building a model for them costs more than the rest of a
``sophon-dsl check`` (~0.1-0.2 s of CPU), so :func:`tools.schemas_from_function` asks
:func:`hint_schema` first and falls back to pydantic for every other hint (models,
dataclasses, enums, ``Literal``, ``Annotated``, TypedDicts, tuples...) and every default
that is not a plain scalar.  The schemas are exactly pydantic's, down to the order of the
keys (``tests/test_hint_schemas.py`` compares both, as JSON text): what a user sees in
``schema`` output or in a prompt does not depend on which path made it.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Any

__all__ = ["hint_schema", "plain_default"]

_SCALARS: dict[Any, dict] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}
_ANY = (Any, object)
_LISTS = (list, typing.List)
_DICTS = (dict, typing.Dict)
_UNIONS = (typing.Union, types.UnionType)


def hint_schema(hint: Any) -> dict | None:
    """The JSON Schema pydantic gives ``hint`` (without a title), or None when ``hint`` is
    not one of the plain hints written out here."""
    schema = _schema(hint)
    return None if schema is None else _sorted(schema)


def plain_default(value: Any) -> bool:
    """Whether a parameter's default shows in the schema as it is (None, a bool, an int, a
    finite float, a str, of exactly those types): pydantic serialises any other."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    return value is None or kind in (bool, int, str)


def _schema(hint: Any) -> dict | None:
    scalar = _SCALARS.get(hint) if _hashable(hint) else None
    if scalar is not None:
        return dict(scalar)
    if hint in _ANY:
        return {}
    if hint in _LISTS:
        return {"items": {}, "type": "array"}
    if hint in _DICTS:
        return {"additionalProperties": True, "type": "object"}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in _LISTS and len(args) == 1:
        item = _schema(args[0])
        return None if item is None else {"items": item, "type": "array"}
    if origin in _DICTS and len(args) == 2 and args[0] is str:
        value = True if args[1] in _ANY else _schema(args[1])
        return None if value is None else {"additionalProperties": value, "type": "object"}
    if origin in _UNIONS:
        # pydantic lists the members in order with null last (``int | None | str`` gives
        # integer, string, null); a member that is any value is left to pydantic
        members = [a for a in args if a is not type(None)]
        if any(m in _ANY for m in members):
            return None
        schemas = [_schema(m) for m in members]
        if any(s is None for s in schemas):
            return None
        if len(members) < len(args):
            schemas.append({"type": "null"})
        return {"anyOf": schemas}
    return None


def _hashable(hint: Any) -> bool:
    try:
        hash(hint)
    except TypeError:
        return False
    return True


def _sorted(schema: Any) -> Any:
    """pydantic's key order: every object's keys sorted (no ``properties`` map here)."""
    if isinstance(schema, dict):
        return {key: _sorted(schema[key]) for key in sorted(schema)}
    if isinstance(schema, list):
        return [_sorted(item) for item in schema]
    return schema
