"""Tool declarations: the rules both readers (DSL and JSON/YAML) share.

* :func:`declaration_problems` validates a declaration's ``input`` / ``output``
  schemas against the JSON Schema metaschema of the draft they declare
  (``$schema``, default 2020-12).  Function-calling datasets write Python type
  names (``"type": "float"``, ``"dict"``, ``"tuple"``); a schema like that loads
  into no check at all, so it is an E109 at the node at fault, with the JSON
  Schema type the author probably meant.
* :func:`refine` applies a later declaration of the same tool to an earlier one
  (Acts 002, "the latest definition takes precedence"): the fields the later one
  gives replace the earlier's, the others are kept.
* :func:`value_span` finds the span of a node inside a DSL value, so the DSL
  reader can point at the same sub-node as the JSON/YAML reader.
"""

from __future__ import annotations

from dataclasses import replace
from difflib import get_close_matches
from typing import Any, Iterable, Mapping

from ..diagnostics import Span
from ..model import ListValue, ObjectValue, ToolDecl, Value

__all__ = ["DECL_FIELDS", "declaration_problems", "refine", "schema_problems", "value_span"]

# ToolDecl fields a declaration may give (a later declaration replaces only those it gives)
DECL_FIELDS = ("description", "input_schema", "output_schema", "risk", "latent")

JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
# Type names that are not JSON Schema's but that real declarations use, with the one meant
_TYPE_SYNONYMS = {
    "float": "number", "double": "number", "decimal": "number", "real": "number",
    "int": "integer", "long": "integer", "short": "integer", "bigint": "integer",
    "dict": "object", "map": "object", "mapping": "object", "hash": "object", "json": "object",
    "list": "array", "tuple": "array", "set": "array", "sequence": "array", "arr": "array",
    "str": "string", "text": "string", "char": "string",
    "bool": "boolean",
    "none": "null", "nonetype": "null", "nil": "null",
}


def _type_hint(name: Any) -> str:
    if not isinstance(name, str):
        return ""
    meant = _TYPE_SYNONYMS.get(name.lower())
    if meant is None and name.lower() in JSON_TYPES:
        meant = name.lower()  # "String", "NUMBER": JSON Schema's names are lower case
    if meant is None and name.lower() == "any":
        return "; leave \"type\" out to accept any value"
    if meant is None:
        close = get_close_matches(name.lower(), JSON_TYPES, n=1)
        meant = close[0] if close else None
    return f"; did you mean {meant!r}?" if meant else ""


def _type_message(value: Any) -> str:
    types = ", ".join(JSON_TYPES)
    if isinstance(value, list):
        if not value:
            return f"\"type\" lists no type; give one or more of {types}"
        bad = [v for v in value if v not in JSON_TYPES]
        if bad and len(set(map(repr, value))) == len(value):
            return (f"{bad[0]!r} is not a JSON Schema type{_type_hint(bad[0])} "
                    f"(the types are {types})")
        if not bad:
            return "the types listed in \"type\" must be unique"
    if isinstance(value, str):
        return f"{value!r} is not a JSON Schema type{_type_hint(value)} (the types are {types})"
    return f"\"type\" must be one of {types}, or a list of them; got {value!r}"


# Keywords the 2020-12 metaschema constrains (with its deprecated `definitions`,
# `dependencies`, `$recursive*`); any other key of a schema object is free.
_STRINGS = frozenset({"title", "description", "$comment", "format", "pattern", "$ref",
                      "contentEncoding", "contentMediaType"})
_NUMBERS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNTS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties",
                     "maxProperties", "minContains", "maxContains"})
_BOOLEANS = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})
_SCHEMA = frozenset({"items", "additionalProperties", "not", "if", "then", "else", "contains",
                     "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_CONSTRAINED = _STRINGS | _NUMBERS | _COUNTS | _BOOLEANS | _SCHEMA | _SCHEMA_MAPS | _SCHEMA_LISTS | {
    "type", "enum", "examples", "required", "multipleOf", "$id", "$schema", "$anchor", "$dynamicRef",
    "$dynamicAnchor", "$vocabulary", "dependentRequired", "dependencies", "$recursiveAnchor",
    "$recursiveRef"}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _surely_valid(schema: Any, depth: int = 0) -> bool:
    """True when ``schema`` is certainly a valid 2020-12 schema, by a walk over the keywords
    declarations use; False means "ask the metaschema".  The metaschema costs about a
    millisecond a schema, and a declaration file may hold thousands of them."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > 64:
        return False
    for key, v in schema.items():
        if key not in _CONSTRAINED:
            continue
        if key == "type":
            ok = v in JSON_TYPES if isinstance(v, str) else (
                isinstance(v, list) and bool(v) and all(isinstance(t, str) and t in JSON_TYPES for t in v)
                and len(set(v)) == len(v))
        elif key in _STRINGS:
            ok = isinstance(v, str)
        elif key in _SCHEMA_MAPS:
            ok = isinstance(v, dict) and all(_surely_valid(x, depth + 1) for x in v.values())
        elif key in _SCHEMA:
            ok = _surely_valid(v, depth + 1)
        elif key == "required":
            ok = isinstance(v, list) and all(isinstance(x, str) for x in v) and len(set(v)) == len(v)
        elif key in ("enum", "examples"):
            ok = isinstance(v, list)
        elif key in _SCHEMA_LISTS:
            ok = isinstance(v, list) and bool(v) and all(_surely_valid(x, depth + 1) for x in v)
        elif key in _NUMBERS:
            ok = _is_number(v)
        elif key in _COUNTS:
            ok = isinstance(v, int) and not isinstance(v, bool) and v >= 0
        elif key in _BOOLEANS:
            ok = isinstance(v, bool)
        else:  # $id, $schema, multipleOf...: the metaschema decides
            ok = False
        if not ok:
            return False
    return True


_VALIDATORS: dict[type, Any] = {}


def _metaschema_validator(schema: Any) -> Any:
    from jsonschema import Draft202012Validator, validators

    declared = schema.get("$schema") if isinstance(schema, dict) else None
    # validator_for looks "$schema" up as a key: anything but a string is not a draft's URI
    cls = validators.validator_for(schema, default=Draft202012Validator) \
        if isinstance(declared, str) else Draft202012Validator
    validator = _VALIDATORS.get(cls)
    if validator is None:
        validator = _VALIDATORS[cls] = cls(cls.META_SCHEMA)
    return validator


def schema_problems(schema: Any) -> list[tuple[str, tuple[str | int, ...]]]:
    """Why ``schema`` is not a valid JSON Schema: ``(message, path inside schema)`` pairs,
    one per node at fault, outermost first; empty when it is valid."""
    if _surely_valid(schema):
        return []
    found: dict[tuple[str | int, ...], str] = {}
    try:
        for error in _metaschema_validator(schema).iter_errors(schema):
            path = tuple(error.path)
            if path in found:
                continue  # one message per node: the metaschema often says the same thing twice
            keyword = list(error.schema_path)[-3:-1] == ["properties", "type"]
            found[path] = _type_message(error.instance) if keyword else _message(error)
    except RecursionError:
        return [("the schema is nested too deeply to be validated", ())]
    return sorted(((m, p) for p, m in found.items()), key=lambda mp: (len(mp[1]), repr(mp[1])))


def _message(error: Any) -> str:
    if error.context:
        from jsonschema.exceptions import best_match

        error = best_match(error.context)
    return error.message


def declaration_problems(decl: Mapping[str, Any],
                         keys: Iterable[str] = ("input", "output")) -> list[tuple[str, tuple[str | int, ...]]]:
    """:func:`schema_problems` of each schema of a declaration object, with paths from the
    declaration (``("input", "properties", "x", "type")``) and messages naming the schema."""
    out = []
    for key in keys:
        schema = decl.get(key)
        if isinstance(schema, dict):
            out += [(f"{key} schema: {message}", (key, *path)) for message, path in schema_problems(schema)]
    return out


def refine(first: ToolDecl | None, later: ToolDecl, given: Iterable[str]) -> ToolDecl:
    """``later`` applied over ``first``: the fields named in ``given`` (ToolDecl field names)
    come from ``later``, the others keep ``first``'s; the span stays the first's."""
    if first is None:
        return later
    return replace(first, **{f: getattr(later, f) for f in given if f in DECL_FIELDS})


def value_span(value: Value, path: Iterable[str | int]) -> Span | None:
    """The span of the node at ``path`` inside a DSL value (as deep as the path exists)."""
    span = value.span
    for seg in path:
        child = None
        if isinstance(value, ObjectValue) and isinstance(seg, str):
            child = next((v for k, v in reversed(value.entries) if k == seg), None)
        elif isinstance(value, ListValue) and isinstance(seg, int) and 0 <= seg < len(value.items):
            child = value.items[seg]
        if child is None:
            break
        value = child
        span = value.span or span
    return span
