"""MCP tools and results <-> what a plan sees: :class:`ToolSpec` and JSON values.

A tool's name (with an optional prefix), description, input schema and, when the
server declares one, output schema become a ToolSpec, so ``check`` understands
it and ``run`` calls it.  Risk: ``medium`` unless the annotations say
``readOnlyHint: true`` (``low``) or ``destructiveHint: true`` (``high``); a
server-wide ``risk`` overrides both.

Results: ``structuredContent`` when present; else the text content, parsed as
JSON when it is JSON; several content blocks give a list; non-text blocks are
returned as their MCP JSON form.  ``isError`` raises :class:`McpToolError`.
Works on the SDK's models and on their JSON form alike, so nothing here needs
the SDK installed.
"""

from __future__ import annotations

import json
import re
from typing import Any, Awaitable, Callable, Mapping

from ..model import Risk
from ..tools import ToolSpec
from .errors import McpToolError

__all__ = ["CallFn", "convert_result", "risk_from_annotations", "tool_to_spec", "wire"]

def risk_from_annotations(annotations: Mapping[str, Any] | None) -> Risk:
    """``readOnlyHint: true`` -> low, ``destructiveHint: true`` -> high, otherwise medium."""
    ann = annotations or {}
    if ann.get("readOnlyHint") is True:
        return Risk.LOW
    if ann.get("destructiveHint") is True:
        return Risk.HIGH
    return Risk.MEDIUM


def _clean_schema(schema: Any) -> dict | None:
    """Drop pydantic's decorative titles (top level and per property); keep everything else."""
    if not isinstance(schema, dict):
        return None
    out = {k: v for k, v in schema.items() if k != "title"}
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: ({kk: vv for kk, vv in v.items() if kk != "title"} if isinstance(v, dict) else v)
                             for k, v in props.items()}
    return out


CallFn = Callable[[str, dict], Awaitable[Any]]


def tool_to_spec(tool: Mapping[str, Any], call: CallFn, *, prefix: str = "", risk: Risk | None = None,
                 origin: str = "mcp", min_risk: Risk | None = None) -> ToolSpec:
    """An MCP tool (its JSON form, as in ``tools/list``) -> a ToolSpec whose func awaits ``call(name, args)``.

    ``risk`` (the user's) sets the risk; else the server's annotations give it, never below
    ``min_risk`` (the user's floor: a server's own ``readOnlyHint`` is a claim, not a proof)."""
    mcp_name = str(tool["name"])
    annotations = tool.get("annotations") or {}
    description = tool.get("description") or tool.get("title") or annotations.get("title") or ""

    async def call_mcp_tool(**arguments: Any) -> Any:
        return await call(mcp_name, arguments)

    call_mcp_tool.__name__ = re.sub(r"\W", "_", mcp_name) or "mcp_tool"
    call_mcp_tool.__qualname__ = call_mcp_tool.__name__
    call_mcp_tool.__doc__ = description
    call_mcp_tool.mcp_tool_name = mcp_name  # type: ignore[attr-defined]
    input_schema = _clean_schema(tool.get("inputSchema")) or {"type": "object", "properties": {}}
    return ToolSpec(
        name=f"{prefix}{mcp_name}",
        description=description,
        input_schema=input_schema,
        output_schema=_clean_schema(tool.get("outputSchema")),
        risk=risk if risk is not None else max(risk_from_annotations(annotations), min_risk or Risk.NONE),
        func=call_mcp_tool,
        is_async=True,
        origin=origin,
    )


def wire(obj: Any) -> Any:
    """An SDK pydantic model -> its MCP JSON form (camelCase keys) in SDK 1.x and 2.x alike."""
    dump = getattr(obj, "model_dump", None)
    if dump is None:
        return obj
    return dump(mode="json", by_alias=True, exclude_none=True)


def _reject_constant(text: str) -> Any:
    raise ValueError(text)


def _text_value(text: str) -> Any:
    stripped = text.strip()
    if stripped:
        try:
            return json.loads(stripped, parse_constant=_reject_constant)
        except ValueError:
            pass
    return text


def convert_result(result: Any, tool: str = "?") -> Any:
    """A ``CallToolResult`` (model or JSON form) -> the value a plan sees; raises on ``isError``."""
    data = wire(result)
    content = data.get("content") or []
    if data.get("isError"):
        texts = [c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"]
        cause = "\n".join(t for t in texts if t)
        if not cause and data.get("structuredContent") is not None:
            cause = json.dumps(data["structuredContent"], ensure_ascii=False)
        if len(cause) > 4000:
            cause = cause[:4000] + "…"
        raise McpToolError(tool, cause, data)
    if data.get("structuredContent") is not None:
        return data["structuredContent"]
    values = [_text_value(c.get("text", "")) if isinstance(c, dict) and c.get("type") == "text" else c
              for c in content]
    if not values:
        return None
    return values[0] if len(values) == 1 else values
