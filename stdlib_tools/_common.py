"""Helpers shared by the tool modules: building a ToolSpec with clean schemas."""

from __future__ import annotations

import copy
import inspect
import warnings
from typing import Any, Callable

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec, schemas_from_function

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
              input_schema: dict | None = None, output_schema: dict | None = None) -> ToolSpec:
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

    return ToolSpec.deferred(name, schemas, description=description, risk=risk, func=fn,
                             is_async=inspect.iscoroutinefunction(fn), origin="stdlib")
