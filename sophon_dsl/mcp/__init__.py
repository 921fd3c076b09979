"""Tools from Model Context Protocol servers (optional extra: ``pip install 'sophon-dsl[mcp]'``).

A server's tools become :class:`~sophon_dsl.tools.ToolSpec` objects, so
``check`` understands them and ``run`` calls them, over the official ``mcp``
Python SDK (1.x and 2.x), stdio and streamable HTTP transports.  See
``docs/mcp.md``.  The package is split by job:

* :mod:`.errors` -- the run-time error names ``Mcp.ToolError``,
  ``Mcp.Error`` and ``Mcp.ConnectionFailed``;
* :mod:`.config` -- :class:`McpServerConfig`, ``--tools mcp:...`` specs and
  ``mcpServers`` config files (no SDK needed);
* :mod:`.conversion` -- MCP tools -> ToolSpecs (schemas, risk) and call
  results -> JSON values (no SDK needed);
* :mod:`.session` -- :class:`McpToolSource`, one session as an async context
  manager in the caller's event loop;
* :mod:`.connection` -- :class:`McpConnection`, a session owned by a
  background thread for synchronous callers, :func:`shared_connection` and
  :func:`close_all`;
* :mod:`.source` -- :func:`load_mcp_tools`, what ``--tools`` uses.

Each module imports only those listed before it.
"""

from __future__ import annotations

from .config import (McpConfigError, McpServerConfig, is_mcp_config_file, is_mcp_source, load_mcp_config,
                     parse_mcp_source)
from .connection import McpConnection, close_all, shared_connection
from .conversion import convert_result, risk_from_annotations, tool_to_spec
from .errors import MCP_CONNECTION_FAILED, MCP_ERROR, MCP_TOOL_ERROR, McpToolError
from .session import McpToolSource
from .source import load_mcp_tools

__all__ = [
    "MCP_CONNECTION_FAILED",
    "MCP_ERROR",
    "MCP_TOOL_ERROR",
    "McpConnection",
    "McpConfigError",
    "McpServerConfig",
    "McpToolError",
    "McpToolSource",
    "close_all",
    "convert_result",
    "is_mcp_config_file",
    "is_mcp_source",
    "load_mcp_config",
    "load_mcp_tools",
    "parse_mcp_source",
    "risk_from_annotations",
    "shared_connection",
    "tool_to_spec",
]
