"""JSON Schema helpers the checks share (lenient: anything not understood is "unknown").

:func:`fast_schema_check` is also the runtime's fast path for tool inputs and outputs
(re-exported by ``sophon_dsl.compiler``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable

from ..model import ListValue, ObjectValue, Value

__all__ = [
    "always_valid",
    "descend",
    "fast_schema_check",
    "fmt_types",
    "is_closed",
    "json_type",
    "literal_types",
    "offline_registry",
    "offline_validator",
    "pattern_allows",
    "remote_refs",
    "schema_has_path",
    "schema_types",
    "short",
    "sub_value",
    "types_compatible",
]


# A fast structural pre-check for simple JSON Schemas (shared with the runtime)

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated",
                          "readOnly", "writeOnly"})
_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    # Only answers "certainly valid"; anything else is left to jsonschema (e.g. 3.0 as integer).
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "array": lambda v: type(v) is list,
    "object": lambda v: type(v) is dict,
}


def always_valid(_v: Any) -> bool:
    return True


_SCALAR_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,), "number": (int, float), "string": (str,), "boolean": (bool,), "null": (type(None),),
    "array": (), "object": (),
}


def literal_types(schema: Any) -> frozenset[type] | None:
    """The Python types of scalar literals (str, int, float, bool, None) that ``schema``
    accepts whatever their value, when it says no more than ``type`` (and annotations):
    ``{"type": "integer"}`` -> ``{int}``; ``True`` or ``{}`` -> every scalar type; None when
    the schema says more (the value matters).  What :func:`fast_schema_check`'s predicate
    returns True for, decided by one set lookup."""
    if schema is True:
        return frozenset({str, int, float, bool, type(None)})
    if not isinstance(schema, dict):
        return None
    names = None
    for key, val in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key != "type":
            return None
        names = [val] if isinstance(val, str) else val
        if not isinstance(names, list) or not names or any(n not in _SCALAR_TYPES for n in names):
            return None
    if names is None:
        return frozenset({str, int, float, bool, type(None)})
    return frozenset(t for n in names for t in _SCALAR_TYPES[n])


def fast_schema_check(schema: Any, depth: int = 0) -> Callable[[Any], bool] | None:
    """A predicate that returns True only for values ``schema`` certainly accepts, or None
    when the schema uses anything beyond type / properties / required /
    additionalProperties / items / anyOf (then jsonschema decides every value).

    It lets the compiler (E204 on literals) and the runtime (tool inputs and
    outputs) skip jsonschema for the plain schemas ``@tool`` derives from type
    hints; a False answer only means "ask jsonschema".  A schema it returns a predicate
    for is a valid 2020-12 schema (the runtime relies on it to build no jsonschema
    validator until a value needs one)."""
    if schema is True:
        return always_valid
    if not isinstance(schema, dict) or depth > 8:
        return None
    checks: list[Callable[[Any], bool]] = []
    for key, val in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key == "type":
            names = [val] if isinstance(val, str) else val
            # (no repeated name: such a schema is invalid, and a schema this accepts is a valid one)
            if (not isinstance(names, list) or not names or any(n not in _TYPE_CHECKS for n in names)
                    or len(set(names)) != len(names)):
                return None
            preds = [_TYPE_CHECKS[n] for n in names]
            checks.append(preds[0] if len(preds) == 1 else (lambda v, ps=tuple(preds): any(p(v) for p in ps)))
        elif key == "properties":
            if not isinstance(val, dict):
                return None
            subs = {}
            for name, sub in val.items():
                f = fast_schema_check(sub, depth + 1)
                if f is None:
                    return None
                if f is not always_valid:
                    subs[name] = f
            if subs:
                items = tuple(subs.items())
                checks.append(lambda v, items=items: type(v) is not dict or all(
                    f(v[k]) for k, f in items if k in v))
        elif key == "required":
            if not isinstance(val, list) or not all(isinstance(x, str) for x in val) or len(set(val)) != len(val):
                return None
            req = tuple(val)
            checks.append(lambda v, req=req: type(v) is not dict or all(k in v for k in req))
        elif key == "additionalProperties":
            if val is True:
                continue
            if val is False:
                props = schema.get("properties")
                known = frozenset(props) if isinstance(props, dict) else frozenset()
                if schema.get("patternProperties"):
                    return None
                checks.append(lambda v, known=known: type(v) is not dict or all(k in known for k in v))
                continue
            # a schema for the other values (dict[str, int] as pydantic writes it): checked here
            # too, so a plain mapping parameter does not import jsonschema for its literals
            f = fast_schema_check(val, depth + 1)
            if f is None or schema.get("patternProperties"):
                return None
            if f is not always_valid:
                props = schema.get("properties")
                known = frozenset(props) if isinstance(props, dict) else frozenset()
                checks.append(lambda v, known=known, f=f: type(v) is not dict or all(
                    f(x) for k, x in v.items() if k not in known))
            continue
        elif key == "items":
            f = fast_schema_check(val, depth + 1)
            if f is None:
                return None
            if f is not always_valid:
                checks.append(lambda v, f=f: type(v) is not list or all(f(x) for x in v))
        elif key == "anyOf":
            if not isinstance(val, list) or not val:
                return None
            fs = [fast_schema_check(b, depth + 1) for b in val]
            if any(f is None for f in fs):
                return None
            if all(f is not always_valid for f in fs):
                checks.append(lambda v, fs=tuple(fs): any(f(v) for f in fs))
        else:
            return None
    if not checks:
        return always_valid
    if len(checks) == 1:
        return checks[0]
    cs = tuple(checks)
    return lambda v: all(c(v) for c in cs)


# ---------------------------------------------------------------------------
# Validators that never fetch a remote "$ref" (issue 17: jsonschema's default registry
# retrieves unknown URIs with urllib, no timeout, from any host: SSRF from a schema)

_OFFLINE: list[Any] = []


def offline_registry() -> Any:
    """A ``referencing`` registry whose retrieval always refuses; jsonschema adds the
    draft metaschemas (jsonschema-specifications) to it, so those still resolve."""
    if not _OFFLINE:
        import referencing
        from referencing.exceptions import NoSuchResource

        def refuse(uri: str) -> Any:
            raise NoSuchResource(ref=uri)

        _OFFLINE.append(referencing.Registry(retrieve=refuse))  # type: ignore[call-arg]
    return _OFFLINE[0]


def unfetched_message(ref: str) -> str:
    return (f"$ref {ref!r} is never fetched: remote references are not resolved "
            "(inline the schema, or refer to it locally with #/$defs/...)")


class OfflineValidator:
    """A jsonschema validator over the offline registry: a ``$ref`` it cannot resolve
    locally is reported as one validation error instead of raising (or fetching)."""

    __slots__ = ("inner",)

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def schema(self) -> Any:
        return self.inner.schema

    def iter_errors(self, value: Any) -> Any:
        from referencing.exceptions import Unresolvable

        try:
            yield from self.inner.iter_errors(value)
        except Unresolvable as exc:
            yield _unresolved_error(getattr(exc, "ref", "?"), value)

    def is_valid(self, value: Any) -> bool:
        return next(iter(self.iter_errors(value)), None) is None

    def evolve(self, **changes: Any) -> "OfflineValidator":
        return OfflineValidator(self.inner.evolve(**changes))


def _unresolved_error(ref: Any, value: Any) -> Any:
    from jsonschema.exceptions import ValidationError

    ref = str(ref)
    local = ref.startswith("#") or ref.startswith("/")
    message = f"$ref {ref!r} does not resolve inside the schema" if local else unfetched_message(ref)
    return ValidationError(message, validator="$ref", validator_value=ref, instance=value,
                           schema={"$ref": ref})


def offline_validator(schema: Any, default: Any = None, format_checker: Any = None,
                      root: Any = None) -> OfflineValidator:
    """The validator of ``schema`` (draft from ``root``'s or its own ``$schema``, else
    ``default``, else 2020-12) that resolves ``$ref`` locally and against the draft
    metaschemas only.  Raises ``jsonschema.SchemaError`` only where jsonschema would."""
    import jsonschema

    cls = jsonschema.validators.validator_for(
        root if isinstance(root, dict) else schema if isinstance(schema, dict) else {},
        default=default or jsonschema.Draft202012Validator)
    checker = cls.FORMAT_CHECKER if format_checker is True else format_checker or None
    return OfflineValidator(cls(schema, format_checker=checker, registry=offline_registry()))


def remote_refs(schema: Any, limit: int = 8) -> list[tuple[str, tuple]]:
    """The ``$ref`` values of ``schema`` that would need the network: ``(ref, path)``
    pairs, at most ``limit``.  A ref is local when it starts with ``#``, names an ``$id``
    inside the schema (after resolving against the enclosing ``$id``) or a draft metaschema."""
    from urllib.parse import urldefrag, urljoin

    ids: set[str] = set()
    refs: list[tuple[str, str, tuple]] = []
    stack: list[tuple[Any, str, tuple]] = [(schema, "", ())]
    seen = 0
    while stack and seen < 100_000:
        node, base, path = stack.pop()
        seen += 1
        if isinstance(node, dict):
            own = node.get("$id") if isinstance(node.get("$id"), str) else node.get("id")
            if isinstance(own, str) and not own.startswith("#"):
                base = urljoin(base, own)
                ids.add(urldefrag(base)[0])
            ref = node.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                refs.append((ref, urldefrag(urljoin(base, ref))[0], path))
            for key, sub in node.items():
                if isinstance(sub, (dict, list)):
                    stack.append((sub, base, (*path, key)))
        elif isinstance(node, list):
            stack.extend((sub, base, (*path, i)) for i, sub in enumerate(node) if isinstance(sub, (dict, list)))
    if not refs:
        return []
    from jsonschema_specifications import REGISTRY

    known = {urldefrag(uri)[0] for uri in REGISTRY}
    out = [(ref, path) for ref, target, path in refs if target not in ids and target not in known]
    out.sort(key=lambda rp: (len(rp[1]), repr(rp[1])))
    return out[:limit]


# ---------------------------------------------------------------------------
# JSON Schema helpers (lenient: anything not understood is "unknown")

_JSON_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "unknown"


def resolve(schema: Any, root: Any, depth: int = 0) -> Any:
    """Follow a local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) inside ``root``."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth < 32:
        ref = schema["$ref"]
        if not ref.startswith("#"):
            return None
        node = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return None
        schema = node
        depth += 1
    return schema


def schema_types(schema: Any, root: Any, depth: int = 0) -> frozenset[str] | None:
    """The JSON types a schema admits, or None when unknown / unconstrained."""
    schema = resolve(schema, root)
    if not isinstance(schema, dict) or depth > 16:
        return None
    out: set[str] | None = None
    t = schema.get("type")
    if isinstance(t, str):
        out = {t}
    elif isinstance(t, list) and all(isinstance(x, str) for x in t):
        out = set(t)
    elif "const" in schema:
        out = {json_type(schema["const"])}
    elif isinstance(schema.get("enum"), list) and schema["enum"]:
        out = {json_type(v) for v in schema["enum"]}
    else:
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                acc: set[str] = set()
                for b in branches:
                    bt = schema_types(b, root, depth + 1)
                    if bt is None:
                        return None
                    acc |= bt
                out = acc
                break
        else:
            all_of = schema.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1:
                r = schema_types(all_of[0], root, depth + 1)
                out = set(r) if r is not None else None
    if out is None:
        return None
    if schema.get("nullable") is True:
        out.add("null")
    if "unknown" in out:
        return None
    return frozenset(out)


def types_compatible(produced: frozenset[str], expected: frozenset[str]) -> bool:
    for p in produced:
        if p in expected:
            return True
        if p == "integer" and "number" in expected:
            return True
        if p == "number" and "integer" in expected:  # 3.0 is an integer; stay lenient
            return True
    return False


def fmt_types(types: Iterable[str]) -> str:
    ts = sorted(types, key=lambda t: _JSON_TYPES.index(t) if t in _JSON_TYPES else 99)
    return " or ".join(ts)


def descend(schema: Any, root: Any, path: Iterable[Any]) -> Any:
    """The sub-schema at ``path`` (None when unknown)."""
    for seg in path:
        schema = resolve(schema, root)
        if not isinstance(schema, dict):
            return None
        if isinstance(seg, int):
            prefix = schema.get("prefixItems")
            if isinstance(prefix, list) and seg < len(prefix):
                schema = prefix[seg]
                continue
            items = schema.get("items")
            if isinstance(items, list) and seg < len(items):  # draft 4-7 tuple form
                schema = items[seg]
            elif isinstance(items, dict):
                schema = items
            else:
                return None
        else:
            props = schema.get("properties")
            if isinstance(props, dict) and seg in props:
                schema = props[seg]
            elif isinstance(schema.get("additionalProperties"), dict):
                schema = schema["additionalProperties"]
            else:
                return None
    return resolve(schema, root)


def schema_has_path(schema: Any, root: Any, path: tuple, depth: int = 0) -> bool:
    """Whether a value valid under ``schema`` may have something at ``path``.

    A level whose structure is not described (no ``properties``/``items``,
    or an open ``additionalProperties``) admits any continuation.
    """
    schema = resolve(schema, root)
    if not path:
        return True
    if schema is True or schema is None or depth > 32:
        return True
    if schema is False or not isinstance(schema, dict):
        return schema is not False
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return any(schema_has_path(b, root, path, depth + 1) for b in branches)
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and all_of:
        return all(schema_has_path(b, root, path, depth + 1) for b in all_of)
    seg, rest = path[0], path[1:]
    types = schema_types(schema, root)
    if isinstance(seg, int):
        if types is not None and "array" not in types:
            return False
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and seg < len(prefix):
            return schema_has_path(prefix[seg], root, rest, depth + 1)
        items = schema.get("items")
        if isinstance(items, dict):
            return schema_has_path(items, root, rest, depth + 1)
        if items is False:
            return False
        return True
    if types is not None and "object" not in types:
        return False
    props = schema.get("properties")
    if isinstance(props, dict) and seg in props:
        return schema_has_path(props[seg], root, rest, depth + 1)
    pattern_props = schema.get("patternProperties")
    if isinstance(pattern_props, dict):
        for pat, sub in pattern_props.items():
            try:
                if re.search(pat, seg):
                    return schema_has_path(sub, root, rest, depth + 1)
            except re.error:
                return True
    add = schema.get("additionalProperties")
    if isinstance(add, dict):
        return schema_has_path(add, root, rest, depth + 1)
    if add is True:
        return True
    if add is False:
        return False
    # additionalProperties absent: described objects are closed for reading
    # purposes (a typo in a path is the likely mistake), undescribed ones open.
    return not isinstance(props, dict)


def sub_value(value: Value, path: Iterable[Any]) -> Value:
    """The value node at a JSON path inside a literal tree (for precise spans)."""
    node = value
    for seg in path:
        if isinstance(node, ListValue) and isinstance(seg, int) and seg < len(node.items):
            node = node.items[seg]
        elif isinstance(node, ObjectValue) and isinstance(seg, str) and node.get(seg) is not None:
            node = node.get(seg)  # type: ignore[assignment]
        else:
            break
    return node


def short(v: Any, limit: int = 40) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_closed(schema: dict) -> bool:
    """E203 rule: unknown names are errors unless the schema is open.

    Open: no ``properties`` at all, or ``additionalProperties`` true or a schema.
    Closed: ``properties`` given and ``additionalProperties`` false or absent.
    """
    if not isinstance(schema.get("properties"), dict):
        return schema.get("additionalProperties") is False
    add = schema.get("additionalProperties", False)
    return add is False


def pattern_allows(schema: dict, name: str) -> bool:
    """Whether a ``patternProperties`` pattern admits ``name`` (a bad regex admits all)."""
    pats = schema.get("patternProperties")
    if not isinstance(pats, dict):
        return False
    for pat in pats:
        try:
            if re.search(pat, name):
                return True
        except re.error:
            return True
    return False


def write_schema(schema: Any, root: Any, path: Iterable[Any]) -> Any:
    """What a schema says of a value written at ``path`` below it (JSON Schema semantics,
    unlike :func:`schema_has_path`: an absent ``additionalProperties`` admits any name).

    Returns the sub-schema, False when no valid value can have anything at ``path``
    (``additionalProperties: false``, ``items: false``, or a level whose ``type`` is not
    a container), or None when the schema does not say (an unconstrained level, or a
    combinator such as ``anyOf`` on the way)."""
    for seg in path:
        schema = resolve(schema, root)
        if schema is False:
            return False
        if not isinstance(schema, dict):
            return None
        if any(k in schema for k in ("anyOf", "oneOf", "allOf", "not", "if")):
            return None
        types = schema_types(schema, root)
        if isinstance(seg, int):
            if types is not None and "array" not in types:
                return False
            prefix = schema.get("prefixItems")
            if isinstance(prefix, list) and seg < len(prefix):
                schema = prefix[seg]
                continue
            items = schema.get("items")
            if items is False:
                return False
            if isinstance(items, list):  # draft 4-7 tuple form
                if seg < len(items):
                    schema = items[seg]
                    continue
                items = schema.get("additionalItems", True)
            if not isinstance(items, (dict, bool)):
                return None
            schema = items
            continue
        if types is not None and "object" not in types:
            return False
        props = schema.get("properties")
        if isinstance(props, dict) and seg in props:
            schema = props[seg]
            continue
        pats = schema.get("patternProperties")
        if isinstance(pats, dict) and pats:
            return None  # a pattern may or may not name it: left to the run-time check
        add = schema.get("additionalProperties", True)
        if not isinstance(add, (dict, bool)):
            return None
        schema = add
    schema = resolve(schema, root)
    if schema is True or schema == {}:
        return None
    return schema
