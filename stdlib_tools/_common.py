"""Helpers shared by the tool modules: building a ToolSpec with clean schemas."""

from __future__ import annotations

import copy
import functools
import inspect
import warnings
from typing import Any, Callable

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec, schemas_from_function

from .errors import ToolError

__all__ = ["make_tool", "clean_schema"]


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = copy.deepcopy(defs[ref[len("#/$defs/"):]])
            rest = {k: v for k, v in node.items() if k != "$ref"}
            target.update(rest)
            return _inline_refs(target, defs)
        return {k: _inline_refs(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def _strip(node: Any, in_properties: bool = False) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if in_properties:
                out[k] = _strip(v)
                continue
            if k == "title" and isinstance(v, str):
                continue
            out[k] = _strip(v, in_properties=(k == "properties"))
        if (not in_properties and out.get("type") == "object" and "properties" in out
                and "additionalProperties" not in out):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def clean_schema(schema: dict | None) -> dict | None:
    """Inline ``$defs``, drop pydantic's titles, close TypedDict objects."""
    if schema is None:
        return None
    defs = schema.get("$defs", {})
    body = {k: v for k, v in schema.items() if k != "$defs"}
    return _strip(_inline_refs(body, defs))


def make_tool(fn: Callable[..., Any], name: str, risk: Risk, description: str, *,
              input_schema: dict | None = None, output_schema: dict | None = None,
              placement: str = "any") -> ToolSpec:
    """A standard tool whose schemas are derived from ``fn``'s hints and cleaned on first read
    (building every tool's pydantic schemas at start cost more than a second)."""
    def schemas() -> tuple[dict | None, dict | None]:
        derived_in = derived_out = None
        if input_schema is None or output_schema is None:
            with warnings.catch_warnings():
                # parameters named "schema" / "json" shadow BaseModel attributes: harmless here
                warnings.filterwarnings("ignore", message=".*shadows an attribute.*")
                derived_in, derived_out = schemas_from_function(fn)
        return (clean_schema(input_schema if input_schema is not None else derived_in),
                clean_schema(output_schema if output_schema is not None else derived_out))

    return ToolSpec.deferred(name, schemas, description=description, risk=risk, func=_named_failures(fn, name),
                             is_async=inspect.iscoroutinefunction(fn), origin="stdlib", placement=placement)


_GROUPS = {"datetime": "Time", "document": "Document", "files": "Files", "http": "Http", "email": "Email"}
# what a value the tool could not handle raises (an integer past the 4,300-digit limit, a
# number out of range, a structure nested past the recursion limit...)
_VALUE_ERRORS = (ValueError, TypeError, OverflowError, RecursionError, UnicodeError, KeyError, IndexError)


def _named_failures(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` whose unexpected value errors become ``<Group>.InvalidArgument`` ToolErrors, so
    every failure of a standard tool has a documented dotted code, never a raw exception."""
    group = name.split(".", 1)[0]
    code = _GROUPS.get(group, group.capitalize()) + ".InvalidArgument"

    def named(exc: Exception) -> ToolError:
        return ToolError(code, f"{name}: {type(exc).__name__}: {exc}")

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except ToolError:
                raise
            except _VALUE_ERRORS as exc:
                raise named(exc) from exc
        return run_async

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except _VALUE_ERRORS as exc:
            raise named(exc) from exc
    return run
