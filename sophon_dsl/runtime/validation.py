"""Tool input and output validation: one compiled validator per distinct schema.

A fast structural pre-check (:func:`sophon_dsl.checks.schema.fast_schema_check`) answers
"certainly valid" for the plain schemas ``@tool`` derives from type hints; jsonschema
decides everything else.  Validators are cached per schema text and shared by runs.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from ..checks.schema import always_valid, fast_schema_check, literal_types, offline_validator
from ..model import ListValue, Literal, ObjectValue

__all__ = ["RESULT_TOO_LARGE", "SchemaValidator", "json_size", "schema_validator", "static_verdict",
           "statically_valid"]

RESULT_TOO_LARGE = "Result.TooLarge"  # a result (or a run's results) over its size bound


def json_size(value: Any, limit: int) -> int | None:
    """About how many bytes ``value`` takes as JSON text, a sub-value shared by several
    parents counted at each place (as serializing it would: a list holding ten references
    to one list, nested nine times, is a billion values in JSON) but measured once, so the
    walk costs the distinct containers, not the expansion; it stops as soon as the size
    passes ``limit``.  None when ``value`` holds something that is not plain JSON data
    (or a cycle): measure it converted."""
    t = type(value)
    if t is not dict and t is not list and t is not tuple:
        return _leaf_size(value)
    memo: dict[int, int] = {}
    open_ids = {id(value)}
    frames: list[list[Any]] = [[value, _children(value), _own_size(value)]]
    while frames:
        frame = frames[-1]
        acc = frame[2]
        descended = False
        for child in frame[1]:
            ct = type(child)
            if ct is dict or ct is list or ct is tuple:
                known = memo.get(id(child))
                if known is None:
                    if id(child) in open_ids:
                        return None  # a cycle: not JSON data
                    frame[2] = acc
                    open_ids.add(id(child))
                    frames.append([child, _children(child), _own_size(child)])
                    descended = True
                    break
                acc += known
            else:
                size = _leaf_size(child)
                if size is None:
                    return None
                acc += size
            if acc > limit:
                return acc
        if descended:
            continue
        frames.pop()
        node = frame[0]
        open_ids.discard(id(node))
        memo[id(node)] = acc
        if not frames:
            return acc
        parent = frames[-1]
        parent[2] += acc
        if parent[2] > limit:
            return parent[2]
    return 0


def _leaf_size(v: Any) -> int | None:
    t = type(v)
    if t is str:
        return len(v) + 2
    if t is int:
        return v.bit_length() * 30103 // 100000 + 2 if _int_fits(v) else None
    if t is float or t is bool or v is None:
        return 5
    return None


MAX_INT_DIGITS = 4300  # Python's int <-> str limit: a longer integer cannot be written as JSON
_INT_LIMIT: list[int] = []


def _int_fits(value: int) -> bool:
    if value.bit_length() < 14_000:  # under 4,215 digits: no big comparison needed
        return True
    if not _INT_LIMIT:
        _INT_LIMIT.append(10 ** MAX_INT_DIGITS)
    return abs(value) < _INT_LIMIT[0]


def _own_size(node: Any) -> int:
    """Brackets, separators and (for an object) quoted keys: what a container adds."""
    if type(node) is dict:
        return 2 + sum(len(k) + 4 if type(k) is str else 1 << 62 for k in node)
    return 2 + len(node)


def _children(node: Any) -> Any:
    return iter(node.values()) if type(node) is dict else iter(node)


_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated"})


def statically_valid(value: Any, schema: Any, depth: int = 0) -> bool:
    """Whether every value ``value`` (a parameter's value tree) can produce is certainly
    valid under ``schema``, so the run need not check it.

    Literals are checked here; a reference is provable only where the schema accepts
    anything (its writer's result was checked against the writer's output schema, not
    against this one); a list or object of those is provable when the schema accepts that
    container with no constraint but its items' or properties' schemas (a type, or an
    ``anyOf`` with one such branch)."""
    if depth > 16:
        return False
    fast = _fast_check(schema)
    if fast is always_valid:
        return True
    tv = type(value)
    if tv is Literal:
        return fast is not None and fast(value.value)
    if tv is ListValue:
        items = _part(schema, "array", "items")
        if items is None:
            return False
        return _fast_check(items) is always_valid or all(statically_valid(x, items, depth + 1)
                                                         for x in value.items)
    if tv is ObjectValue:
        props = _part(schema, "object", "additionalProperties")
        if props is None:
            return False
        return _fast_check(props) is always_valid or all(statically_valid(x, props, depth + 1)
                                                         for _, x in value.entries)
    return False


def static_verdict(value_type: type, schema: Any) -> bool | None:
    """:func:`statically_valid` for every value tree of type ``value_type`` at once, when the
    answer does not depend on the tree: True or False; None when it does (a literal, or a
    list or object whose items' schema constrains them).  Lets a run decide once per tool
    and parameter what it would otherwise decide once per call."""
    if _fast_check(schema) is always_valid:
        return True
    if value_type is ListValue or value_type is ObjectValue:
        part = _part(schema, "array", "items") if value_type is ListValue else \
            _part(schema, "object", "additionalProperties")
        if part is None:
            return False
        return True if _fast_check(part) is always_valid else None
    return None if value_type is Literal else False


_FAST: dict[int, tuple[Any, Any]] = {}


def _fast_check(schema: Any) -> Any:
    """``fast_schema_check(schema)``, computed once per schema object (tool schemas live
    as long as their tools; the entry keeps the schema alive so its id stays its own)."""
    hit = _FAST.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_FAST) >= 4096:
        _FAST.clear()
    fast = fast_schema_check(schema)
    _FAST[id(schema)] = (schema, fast)
    return fast


_PARTS: dict[tuple[int, str], tuple[Any, Any]] = {}


def _part(schema: Any, type_name: str, part: str) -> Any:
    """:func:`_container_part`, computed once per schema object and container type."""
    key = (id(schema), type_name)
    hit = _PARTS.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_PARTS) >= 4096:
        _PARTS.clear()
    found = _container_part(schema, type_name, part)
    _PARTS[key] = (schema, found)
    return found


def _container_part(schema: Any, type_name: str, part: str) -> Any:
    """The schema of the parts (``items`` / ``additionalProperties``) of a container type
    ``schema`` accepts with nothing else to say, or None."""
    if isinstance(schema, dict) and isinstance(schema.get("anyOf"), list) and \
            set(schema) - _ANNOTATIONS == {"anyOf"}:
        for branch in schema["anyOf"]:
            found = _container_part(branch, type_name, part)
            if found is not None:
                return found
        return None
    if not isinstance(schema, dict) or schema.get("type") != type_name:
        return None
    if set(schema) - _ANNOTATIONS - {"type", part}:
        return None
    sub = schema.get(part, True)
    return True if sub == {} else sub


_NONE: frozenset[type] = frozenset()


class SchemaValidator:
    """``check(value)`` -> None or a message: fast pre-check, then jsonschema for the rest.

    ``full`` may be None when ``fast`` is given: jsonschema's validator is then built (and
    jsonschema imported) only for the first value the fast check cannot vouch for."""

    __slots__ = ("accepts", "fast", "full", "schema")

    def __init__(self, fast: Callable[[Any], bool] | None, full: Any, schema: Any = None) -> None:
        self.fast = fast
        self.full = full
        self.schema = schema
        # the scalar types every value of which the schema accepts (``{"type": "integer"}``:
        # int), so a hot caller skips ``check`` for them at one set lookup (``fast`` says True
        # for exactly these values; two calls per checked result or argument otherwise)
        self.accepts: frozenset[type] = (literal_types(schema) or _NONE) if fast is not None else _NONE

    def check(self, value: Any) -> str | None:
        fast = self.fast
        if fast is not None and fast(value):
            return None
        if self.full is None:
            self.full = offline_validator(self.schema)
        errors = sorted(self.full.iter_errors(value), key=_position)
        if not errors:
            return None
        # every problem at once (in the value's order), so one fix does not reveal the next
        shown = [_one_error(e) for e in errors[:_MAX_SHOWN]]
        if len(errors) > _MAX_SHOWN:
            shown.append(f"and {len(errors) - _MAX_SHOWN} more")
        return "; ".join(shown)


_MAX_SHOWN = 10  # problems named in one message


def _position(err: Any) -> tuple:
    return tuple((isinstance(s, str), s) for s in err.absolute_path)


def _one_error(err: Any) -> str:
    where = "/".join(str(p) for p in err.absolute_path)
    return f"{err.message}" + (f" (at /{where})" if where else "")


_VALIDATORS: dict[str, SchemaValidator | None] = {}


def schema_validator(schema: Any) -> SchemaValidator | None:
    """The (cached) validator of a tool schema; None when there is nothing to check
    (no schema, an empty one, or one jsonschema rejects as a schema)."""
    if not isinstance(schema, dict) or not schema:
        return None
    try:
        key = json.dumps(schema, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        key = None
    if key is not None and key in _VALIDATORS:
        return _VALIDATORS[key]
    fast = fast_schema_check(schema)
    v: SchemaValidator | None
    if fast is not None:  # a valid schema (fast_schema_check says so): jsonschema waits for a value
        v = SchemaValidator(fast, None, schema)
    else:
        import jsonschema

        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
            v = SchemaValidator(None, offline_validator(schema))
        except jsonschema.SchemaError:
            v = None
    if key is not None:
        if len(_VALIDATORS) >= 1024:
            _VALIDATORS.clear()
        _VALIDATORS[key] = v
    return v
