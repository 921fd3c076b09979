"""The run-time error names MCP tools fail with, and the texts that explain them.

``Mcp.ToolError``: the server ran the tool and it reported ``isError``;
``Mcp.Error``: a protocol error (unknown tool, bad request, connection closed
during a call); ``Mcp.ConnectionFailed``: the server cannot be started or
reached.  All three are :class:`~sophon_dsl.runtime.errors.RunError`, so plans
can match them in retry policies and catches.
"""

from __future__ import annotations

from ..runtime.errors import RunError

__all__ = ["MCP_CONNECTION_FAILED", "MCP_ERROR", "MCP_TOOL_ERROR", "McpToolError", "connection_failed",
           "exc_text"]

MCP_TOOL_ERROR = "Mcp.ToolError"
MCP_ERROR = "Mcp.Error"
MCP_CONNECTION_FAILED = "Mcp.ConnectionFailed"


class McpToolError(RunError):
    """The server ran the tool and reported a failure (``isError: true``)."""

    def __init__(self, tool: str, cause: str, result: dict | None = None):
        super().__init__(MCP_TOOL_ERROR, cause or f"the MCP tool {tool!r} failed")
        self.tool = tool
        self.result = result


def connection_failed(label: str, exc: BaseException | str, stderr_tail: str = "") -> RunError:
    """``Mcp.ConnectionFailed`` for the server ``label``, with the tail of its stderr when captured."""
    if isinstance(exc, str):
        msg = exc
    elif getattr(exc, "exceptions", None):  # an exception group: its leaves say what happened
        msg = exc_text(exc)
    else:
        msg = f"{type(exc).__name__}: {exc_text(exc)}"
    cause = f"cannot connect to the MCP server {label}: {msg}"
    if stderr_tail:
        cause += f"\n--- server stderr (last lines) ---\n{stderr_tail}"
    return RunError(MCP_CONNECTION_FAILED, cause)


def exc_text(exc: BaseException) -> str:
    """Readable text of an exception, unwrapping (anyio / asyncio) exception groups."""
    subs = getattr(exc, "exceptions", None)
    if subs:
        return "; ".join(f"{type(e).__name__}: {exc_text(e)}" for e in subs)
    return str(exc) or type(exc).__name__
