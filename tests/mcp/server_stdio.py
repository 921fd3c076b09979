"""A small real MCP server for the tests (stdio by default, streamable HTTP with ``--http PORT``).

Works with the official SDK 2.x (``MCPServer``) and 1.x (``FastMCP``).
"""

from __future__ import annotations

import sys
from typing import TypedDict

try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer as _Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

from mcp.types import ToolAnnotations

if "read_only_hint" in ToolAnnotations.model_fields:  # 2.x field names
    _READ_ONLY = ToolAnnotations(read_only_hint=True)
    _DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)
else:  # 1.x (its models accept unknown keys silently, so ask by name)
    _READ_ONLY = ToolAnnotations(readOnlyHint=True)
    _DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True)

server = _Server("sophon-test")


class Weather(TypedDict):
    city: str
    celsius: float
    conditions: str


@server.tool(annotations=_READ_ONLY)
def weather(city: str, unit: str = "c") -> Weather:
    """Current weather for a city (structured output)."""
    return {"city": city, "celsius": 21.5 if city == "Paris" else 12.0, "conditions": "sunny"}


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(structured_output=False)
def greet(name: str) -> str:
    """Say hello (plain text output)."""
    return f"Hello, {name}!"


@server.tool(structured_output=False)
def profile(user: str) -> str:
    """A JSON document returned as text."""
    import json

    return json.dumps({"user": user, "plan": "pro"})


@server.tool(annotations=_DESTRUCTIVE)
def explode(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"boom: {reason}")


@server.tool(structured_output=False)
async def nap(seconds: float) -> str:
    """Sleep, then answer (for timeouts)."""
    import anyio

    await anyio.sleep(seconds)
    return "rested"


@server.tool(structured_output=False)
def crash() -> str:
    """Kill the server process (for lost connections)."""
    import os

    os._exit(1)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--http":
        port = int(sys.argv[2])
        try:
            server.run("streamable-http", host="127.0.0.1", port=port)  # type: ignore[call-overload]
        except TypeError:  # 1.x: host and port are settings
            server.settings.host = "127.0.0.1"  # type: ignore[attr-defined]
            server.settings.port = port  # type: ignore[attr-defined]
            server.run("streamable-http")
    else:
        server.run()
