"""Values sampled from JSON Schemas, for dry-runs: :func:`sample`, :func:`sample_from_schema`.

A sample must satisfy the schema it samples, or a dry-run would report a plan as failed
because of the simulation rather than the plan.  :func:`sample` builds a value from the
keywords (``$ref`` into ``$defs`` / ``definitions``, ``const``, ``enum``, ``anyOf`` /
``oneOf`` / ``allOf``, ``type`` lists, required and optional properties,
``additionalProperties``, ``items`` / ``prefixItems``, ``minItems`` / ``maxItems``,
``minLength`` / ``maxLength``, simple formats, bounds and ``multipleOf``) and then checks it
with jsonschema; when the check fails it says why, so the caller can report an
"unknown sample" instead of a failure.
"""

from __future__ import annotations

import math
from typing import Any

from ..checks.schema import offline_registry

__all__ = ["sample", "sample_from_schema", "sample_problem"]

_MAX_DEPTH = 8

_FORMATS = {"date-time": "2025-01-01T00:00:00Z", "date": "2025-01-01", "time": "00:00:00Z",
            "email": "user@example.com", "idn-email": "user@example.com", "uri": "https://example.com/",
            "iri": "https://example.com/", "uri-reference": "https://example.com/", "url": "https://example.com/",
            "hostname": "example.com", "idn-hostname": "example.com", "ipv4": "192.0.2.1",
            "ipv6": "2001:db8::1", "uuid": "00000000-0000-0000-0000-000000000000",
            "duration": "P1D", "json-pointer": "/a", "regex": ".*"}


class _Sampler:
    """One schema's sampler: resolves ``$ref`` against the root it was made with."""

    def __init__(self, root: Any):
        self.root = root

    def value(self, schema: Any, depth: int = 0) -> Any:
        if schema is True or not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return None
        if isinstance(schema.get("$ref"), str):
            target = self._resolve(schema["$ref"])
            if target is not None:
                return self.value(target, depth + 1)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self._first_valid(schema["enum"], schema)
        for key in ("default", "examples"):
            if key in schema:
                candidates = schema[key] if key == "examples" and isinstance(schema[key], list) else [schema[key]]
                found = self._first_valid(candidates, schema, fallback=_NOTHING)
                if found is not _NOTHING:
                    return found
        if isinstance(schema.get("allOf"), list) and schema["allOf"]:
            return self._all_of(schema, depth)
        for key in ("oneOf", "anyOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self._one_of(schema, key, depth)
        return self._typed(schema, depth)

    # -- combinators

    def _all_of(self, schema: dict, depth: int) -> Any:
        """Every part merged into one schema when they are objects; else the first part's sample."""
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        parts = [self._deref(p) for p in schema["allOf"]] + [rest]
        if all(isinstance(p, dict) for p in parts):
            merged: dict = {}
            for part in parts:
                for key, val in part.items():
                    if key == "properties" and isinstance(val, dict):
                        merged["properties"] = {**merged.get("properties", {}), **val}
                    elif key == "required" and isinstance(val, list):
                        merged["required"] = [*merged.get("required", []), *val]
                    elif key != "allOf":
                        merged.setdefault(key, val)
            return self.value(merged, depth + 1)
        return self.value(parts[0], depth + 1)

    def _one_of(self, schema: dict, key: str, depth: int) -> Any:
        """The first branch whose sample the whole schema accepts (for oneOf: only that branch)."""
        rest = {k: v for k, v in schema.items() if k not in ("oneOf", "anyOf")}
        first = _NOTHING
        branches = [self._deref(b) for b in schema[key]]
        # a branch that only allows null last, as for type lists
        branches.sort(key=lambda b: isinstance(b, dict) and b.get("type") == "null")
        for branch in branches:
            merged = {**rest, **branch} if isinstance(branch, dict) else branch
            candidate = self.value(merged, depth + 1)
            if first is _NOTHING:
                first = candidate
            if self._valid(candidate, schema):
                return candidate
        return None if first is _NOTHING else first

    # -- by type

    def _typed(self, schema: dict, depth: int) -> Any:
        types = schema.get("type")
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not types:
            types = [_implied_type(schema)]
        # null last: a value that carries data shows the plan more than null does
        ordered = [t for t in types if t != "null"] + [t for t in types if t == "null"]
        first = _NOTHING
        for typ in ordered:
            candidate = self._of_type(typ, schema, depth)
            if first is _NOTHING:
                first = candidate
            if len(ordered) == 1 or self._valid(candidate, schema):
                return candidate
        return None if first is _NOTHING else first

    def _of_type(self, typ: Any, schema: dict, depth: int) -> Any:
        if typ == "object":
            return self._object(schema, depth)
        if typ == "array":
            return self._array(schema, depth)
        if typ == "string":
            return _string(schema)
        if typ in ("integer", "number"):
            return _number(schema, typ == "integer")
        if typ == "boolean":
            return False
        return None

    def _object(self, schema: dict, depth: int) -> dict:
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)] \
            if isinstance(schema.get("required"), list) else []
        extra = schema.get("additionalProperties", True)
        out: dict = {}
        for name, sub in props.items():
            value = self.value(sub, depth + 1)
            # an optional property is shown only when its sample is valid: it may be left out
            if name in required or self._valid(value, sub):
                out[name] = value
        for name in required:
            if name not in out:
                out[name] = self.value(extra, depth + 1) if isinstance(extra, dict) else None
        wanted = schema.get("minProperties", 0)
        k = 0
        while isinstance(wanted, int) and len(out) < wanted and extra is not False and k < wanted + 8:
            key = f"key{k}"
            if key not in out:
                out[key] = self.value(extra, depth + 1) if isinstance(extra, dict) else None
            k += 1
        return out

    def _array(self, schema: dict, depth: int) -> list:
        prefix = schema.get("prefixItems")
        items = schema.get("items", {})
        if not isinstance(prefix, list) and isinstance(items, list):  # the draft 4-7 tuple form
            prefix, items = items, schema.get("additionalItems", {})
        prefix = prefix if isinstance(prefix, list) else []
        low = _int(schema.get("minItems"), 0)
        high = _int(schema.get("maxItems"), None)
        n = max(low, len(prefix) if low else min(len(prefix), 1) or 1)
        if high is not None:
            n = min(n, high)
        out = [self.value(prefix[k], depth + 1) for k in range(min(n, len(prefix)))]
        if len(out) < n and items is not False:
            base = self.value(items, depth + 1)
            out.extend(_distinct(base, n - len(out)) if schema.get("uniqueItems") else [base] * (n - len(out)))
        if isinstance(schema.get("contains"), dict) and not self._valid(out, schema):
            wanted = self.value(schema["contains"], depth + 1)
            out = [wanted, *out[1:]] if out else [wanted]
        return out

    # -- helpers

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None  # a remote reference cannot be followed offline
        node: Any = self.root
        for part in ref[1:].lstrip("/").split("/") if ref not in ("#", "#/") else ():
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def _deref(self, schema: Any) -> Any:
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < _MAX_DEPTH:
            target = self._resolve(schema["$ref"])
            if target is None:
                return schema
            schema, seen = target, seen + 1
        return schema

    def _first_valid(self, candidates: list, schema: dict, fallback: Any = None) -> Any:
        for candidate in candidates:
            if self._valid(candidate, schema):
                return candidate
        if fallback is _NOTHING:
            return fallback
        return candidates[0] if candidates else None

    def _valid(self, value: Any, schema: Any) -> bool:
        return sample_problem(value, schema, self.root) is None


class _Nothing:
    __slots__ = ()


_NOTHING = _Nothing()


def _implied_type(schema: dict) -> str | None:
    """The type a schema without ``type`` implies by its keywords (None: any value)."""
    if any(k in schema for k in ("properties", "required", "additionalProperties", "minProperties")):
        return "object"
    if any(k in schema for k in ("items", "prefixItems", "minItems", "maxItems", "contains")):
        return "array"
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return "string"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return "number"
    return None


def _int(value: Any, default: Any) -> Any:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


# tried in turn for a ``pattern`` (the check after sampling says whether one fits)
_PATTERN_GUESSES = ("string", "0", "a", "A", "a0", "example", "x-1", "2025-01-01", "user@example.com",
                    "https://example.com/")


def _string(schema: dict) -> str:
    text = _FORMATS.get(schema.get("format"), "string")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and schema.get("format") not in _FORMATS:
        import re

        try:
            text = next((g for g in _PATTERN_GUESSES if re.search(pattern, g)), text)
        except re.error:
            pass
    low = _int(schema.get("minLength"), 0)
    high = _int(schema.get("maxLength"), None)
    if len(text) < low:
        text += "x" * (low - len(text))
    if high is not None and len(text) > high:
        text = text[:high]
    return text


def _number(schema: dict, integer: bool) -> int | float:
    """The allowed value nearest to 0 (above the lower bound, below the upper one), a multiple
    of ``multipleOf`` when one is given (of 1 for an integer)."""
    low, low_open = _bound(schema, "minimum", "exclusiveMinimum")
    high, high_open = _bound(schema, "maximum", "exclusiveMaximum")
    step = schema.get("multipleOf")
    step = step if isinstance(step, (int, float)) and not isinstance(step, bool) and step > 0 else None
    if integer and (step is None or not float(step).is_integer()):
        step = 1 if step is None else step
    if step is not None:
        if low is not None or high is None:
            k = math.ceil((low if low is not None else 0) / step)
            if low_open and low is not None and k * step <= low:
                k += 1
        else:
            k = min(0, math.floor(high / step))
            if high_open and k * step >= high:
                k -= 1
        value = k * step
        return int(value) if integer and float(value).is_integer() else value
    if low is not None:
        if not low_open:
            return low
        if high is None or low + 1 < high or (low + 1 == high and not high_open):
            return low + 1
        return (low + high) / 2
    if high is not None:
        value = min(0, high)
        return high - 1 if high_open and value >= high else value
    return 0


def _bound(schema: dict, closed: str, open_: str) -> tuple[Any, bool]:
    """A bound and whether it is exclusive, for draft 6+ (a number) and draft 4 (a boolean flag)."""
    value = schema.get(open_)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value, True
    bound = schema.get(closed)
    if isinstance(bound, (int, float)) and not isinstance(bound, bool):
        return bound, value is True
    return None, False


def _distinct(base: Any, n: int) -> list:
    """``n`` values like ``base`` that differ from each other (for uniqueItems)."""
    if n <= 1:
        return [base] * n
    if isinstance(base, bool) or base is None:
        return [base] * n   # cannot vary: left for the check to refuse
    if isinstance(base, (int, float)):
        return [base + k for k in range(n)]
    if isinstance(base, str):
        return [base + ("" if k == 0 else str(k)) for k in range(n)]
    return [base] * n


def sample_problem(value: Any, schema: Any, root: Any = None) -> str | None:
    """Why ``value`` does not satisfy ``schema`` (simple formats included), or None when it
    does; ``$ref`` inside ``schema`` resolves against ``root`` (default: ``schema`` itself)."""
    if not isinstance(schema, (dict, bool)):
        return None
    import jsonschema

    document = root if isinstance(root, (dict, bool)) else schema
    try:
        cls = jsonschema.validators.validator_for(document) if isinstance(document, dict) \
            else jsonschema.Draft202012Validator
        validator = cls(document, format_checker=cls.FORMAT_CHECKER, registry=offline_registry())
        if document is not schema:
            # evolve keeps the root's resolver, so "#/$defs/..." still means the root's
            validator = validator.evolve(schema=schema)
        err = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except Exception as exc:  # noqa: BLE001 - a schema jsonschema cannot use gives no verdict
        return f"the schema cannot be checked ({type(exc).__name__}: {exc})"
    if err is None:
        return None
    where = "/".join(str(p) for p in err.absolute_path)
    return err.message + (f" (at /{where})" if where else "")


def sample(schema: Any) -> tuple[Any, str | None]:
    """``(value, problem)``: a value for ``schema`` and why it does not satisfy it (None: it does)."""
    value = _Sampler(schema).value(schema)
    return value, sample_problem(value, schema)


def sample_from_schema(schema: Any, root: Any = None, depth: int = 0) -> Any:
    """A small value for ``schema``, valid whenever :func:`sample` finds no problem."""
    return _Sampler(root if root is not None else schema).value(schema, depth)
