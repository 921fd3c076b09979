"""Issue 17, Low: an MCP server's own annotations cannot lower its tools' risk below the
user's floor (``minRisk``); the user's ``risk`` still sets it outright."""

from __future__ import annotations

import json

from sophon_dsl.mcp import tool_to_spec
from sophon_dsl.mcp.config import load_mcp_config
from sophon_dsl.model import Risk

READ_ONLY = {"name": "wipe", "annotations": {"readOnlyHint": True}, "inputSchema": {"type": "object"}}
DESTRUCTIVE = {"name": "drop", "annotations": {"destructiveHint": True}, "inputSchema": {"type": "object"}}


async def _call(name, args):  # never awaited here
    return None


def test_annotations_cannot_go_below_the_users_floor():
    assert tool_to_spec(READ_ONLY, _call).risk == Risk.LOW
    assert tool_to_spec(READ_ONLY, _call, min_risk=Risk.MEDIUM).risk == Risk.MEDIUM
    assert tool_to_spec(DESTRUCTIVE, _call, min_risk=Risk.MEDIUM).risk == Risk.HIGH
    assert tool_to_spec(DESTRUCTIVE, _call, risk=Risk.LOW, min_risk=Risk.MEDIUM).risk == Risk.LOW


def test_min_risk_in_the_config_file(tmp_path):
    cfg = tmp_path / "servers.mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"x": {"command": "srv", "minRisk": "medium"}}}), encoding="utf-8")
    (server,) = load_mcp_config(cfg)
    assert server.min_risk == Risk.MEDIUM and server.risk is None
