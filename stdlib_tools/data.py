"""Data tools over JSON values: ``data.query`` (JMESPath), ``data.pick``, ``data.merge``,
``data.set`` and ``data.validate`` (JSON Schema)."""

from __future__ import annotations

import copy
import re
from typing import Annotated, Any

import jmespath
from typing_extensions import TypedDict

from sophon_dsl.jmes_bounded import MAX_QUERY_STEPS, QueryLimits, QueryTooExpensive, compile_query, search
from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from ._common import Field, make_tool
from .config import StdlibConfig, uses_config
from .errors import ToolError
from .limits import RESULT_TOO_LARGE

__all__ = ["MAX_QUERY_STEPS", "bounded_search", "build", "deep_merge", "parse_path", "set_path", "get_path",
           "ValidationResult"]

Path = Annotated[str | list[str | int],
                 Field(description='a dotted path such as "a.b[0].c", or a list of keys and indexes')]

_PATH_TOKEN = re.compile(r"""\.?([^.\[\]]+)|\[(-?\d+)\]|\[["']([^"']*)["']\]""")


def parse_path(path: str | list[str | int]) -> list[str | int]:
    """``"a.b[0].c"`` or ``["a", "b", 0, "c"]`` -> ``["a", "b", 0, "c"]``."""
    if isinstance(path, (list, tuple)):
        return list(path)
    text = str(path)
    if text in ("", "."):
        return []
    out: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _PATH_TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ToolError("Data.InvalidPath", f"cannot parse path {text!r} at position {pos}")
        name, index, quoted = m.groups()
        out.append(int(index) if index is not None else quoted if quoted is not None else name)
        pos = m.end()
    return out


def get_path(value: Any, path: list[str | int]) -> Any:
    cur = value
    for seg in path:
        if isinstance(cur, dict) and isinstance(seg, str) and seg in cur:
            cur = cur[seg]
        elif isinstance(cur, list) and isinstance(seg, int) and -len(cur) <= seg < len(cur):
            cur = cur[seg]
        else:
            raise KeyError(seg)
    return cur


def set_path(value: Any, path: list[str | int], new: Any) -> Any:
    """A copy of ``value`` with ``new`` at ``path``; missing objects are created,
    a list index equal to the length appends."""
    if not path:
        return copy.deepcopy(new)
    root = copy.deepcopy(value) if value is not None else ({} if isinstance(path[0], str) else [])
    cur = root
    for i, seg in enumerate(path):
        last = i == len(path) - 1
        nxt_default: Any = ({} if isinstance(path[i + 1], str) else []) if not last else None
        if isinstance(seg, str):
            if not isinstance(cur, dict):
                raise ToolError("Data.InvalidPath", f"segment {seg!r} needs an object, found "
                                f"{type(cur).__name__}")
            if last:
                cur[seg] = copy.deepcopy(new)
            else:
                if not isinstance(cur.get(seg), (dict, list)):
                    cur[seg] = nxt_default
                cur = cur[seg]
        else:
            if not isinstance(cur, list):
                raise ToolError("Data.InvalidPath", f"index {seg} needs a list, found "
                                f"{type(cur).__name__}")
            if seg == len(cur):
                cur.append(nxt_default)
            elif not -len(cur) <= seg < len(cur):
                raise ToolError("Data.InvalidPath", f"index {seg} out of range (length {len(cur)})")
            if last:
                cur[seg] = copy.deepcopy(new)
            else:
                if not isinstance(cur[seg], (dict, list)):
                    cur[seg] = nxt_default
                cur = cur[seg]
    return root


def deep_merge(base: Any, patch: Any) -> Any:
    """Objects merge key by key, recursively; anything else in ``patch`` replaces ``base``."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = deep_merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(patch)


class ValidationIssue(TypedDict):
    path: str
    message: str
    validator: str


class ValidationResult(TypedDict):
    valid: bool
    errors: list[ValidationIssue]


def _json_pointer(parts: Any) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts) or "."


def bounded_search(expression: str, value: Any, max_bytes: int = 16 << 20) -> Any:
    """``jmespath.search`` whose work, nesting and result size are bounded (ToolError past
    them): the core's interpreter (``sophon_dsl.jmes_bounded``), the one plan references
    use too."""
    try:
        compiled = compile_query(expression)
    except QueryTooExpensive as exc:
        raise ToolError("Data.InvalidQuery", f"invalid JMESPath {expression!r}: {exc.message}") from None
    try:
        return search(compiled, value, QueryLimits(max_bytes=max_bytes))
    except QueryTooExpensive as exc:
        if exc.bound == "size":
            raise ToolError(RESULT_TOO_LARGE, f"data.query would produce more than {max_bytes:,} bytes "
                            "(max_result_bytes)") from None
        raise ToolError("Data.QueryTooExpensive", exc.message) from None


@uses_config("max_result_bytes")
def build(config: StdlibConfig) -> list[ToolSpec]:
    def query(value: Any, expression: Annotated[str, Field(description="a JMESPath expression")]) -> Any:
        try:
            return bounded_search(expression, value, config.max_result_bytes)
        except jmespath.exceptions.ParseError as exc:
            raise ToolError("Data.InvalidQuery", f"invalid JMESPath {expression!r}: {exc}") from None
        except jmespath.exceptions.JMESPathError as exc:
            raise ToolError("Data.QueryFailed", str(exc)) from None

    def pick(value: dict[str, Any], keys: Annotated[list[str], Field(
            description='keys or dotted paths ("a.b") to keep')],
             strict: bool = False) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ToolError("Data.TypeError", "data.pick needs an object")
        out: Any = {}
        for key in keys:
            path = parse_path(key)
            try:
                found = get_path(value, path)
            except KeyError:
                if strict:
                    raise ToolError("Data.MissingKey", f"no value at {key!r}") from None
                continue
            out = set_path(out, path, found)
        return out

    def merge(values: Annotated[list[Any], Field(min_length=1,
              description="objects merged left to right; later values win")]) -> Any:
        result: Any = {}
        for i, v in enumerate(values):
            result = deep_merge(result, v) if i else copy.deepcopy(v)
        return result

    def set_(value: Any, path: Path, new: Annotated[Any, Field(description="the value to put")]) -> Any:
        return set_path(value, parse_path(path), new)

    def validate(value: Any, schema: dict[str, Any]) -> ValidationResult:
        import jsonschema

        from sophon_dsl.checks.schema import offline_validator, remote_refs, unfetched_message

        try:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ToolError("Data.InvalidSchema", f"invalid JSON Schema: {exc.message}") from None
        remote = remote_refs(schema, limit=1)
        if remote:  # refused before validating: a fetch would be SSRF, a silent skip a lie
            raise ToolError("Data.InvalidSchema", unfetched_message(remote[0][0]))
        validator = offline_validator(schema, format_checker=True)
        issues = [ValidationIssue(path=_json_pointer(e.absolute_path), message=e.message,
                                  validator=str(e.validator))
                  for e in sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.path)))]
        return ValidationResult(valid=not issues, errors=issues[:100])

    return [
        make_tool(query, "data.query", Risk.NONE,
                  "Evaluate a JMESPath expression over a JSON value (e.g. `items[?price < `10`].name`)."),
        make_tool(pick, "data.pick", Risk.NONE,
                  "Keep only the given keys (or dotted paths) of an object."),
        make_tool(merge, "data.merge", Risk.NONE,
                  "Deep-merge a list of objects left to right: nested objects merge, other values "
                  "(lists included) are replaced by later ones."),
        make_tool(set_, "data.set", Risk.NONE,
                  "Return a copy of a value with `new` placed at `path` (missing objects are created)."),
        make_tool(validate, "data.validate", Risk.NONE,
                  "Validate a value against a JSON Schema; returns {valid, errors[{path, message}]}."),
    ]
