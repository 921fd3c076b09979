"""MCP servers as a tool source for ``--tools`` and ``load_tool_source``: :func:`load_mcp_tools`.

Every server a source names is listed over its shared
:class:`~sophon_dsl.mcp.connection.McpConnection` (kept open for the calls a
run makes); a server that cannot be listed is reported as a problem while the
others load.
"""

from __future__ import annotations

from ..runtime.errors import RunError
from ..tools import ToolSpec
from .config import McpServerConfig, parse_mcp_source
from .connection import shared_connection
from .errors import exc_text
from .session import require_sdk

__all__ = ["load_mcp_tools"]


def load_mcp_tools(source: str | McpServerConfig) -> tuple[list[ToolSpec], list[str]]:
    """Tools of every server ``source`` names, over :class:`McpConnection` (kept open for calls).

    Returns ``(tools, problems)``; a server that cannot be listed is a problem, the others load.
    The same server configuration loaded twice shares one connection (:func:`shared_connection`).
    Raises ``ValueError`` for a malformed source and ``ImportError`` without the SDK.
    """
    configs = [source] if isinstance(source, McpServerConfig) else parse_mcp_source(source)
    require_sdk()
    tools: list[ToolSpec] = []
    problems: list[str] = []
    for cfg in configs:
        conn = shared_connection(cfg)
        try:
            tools.extend(conn.tools())
        except RunError as exc:
            conn.close()
            problems.append(exc.cause)
        except Exception as exc:  # noqa: BLE001
            conn.close()
            problems.append(f"MCP server {cfg.label}: {type(exc).__name__}: {exc_text(exc)}")
    return tools, problems
