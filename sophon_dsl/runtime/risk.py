"""A call's effective risk: its own ``@risk`` or its tool's, whichever is higher; and the
risk the data flow adds (issue 17, Medium 9: exfiltration with no approval).

``files.read(".env")`` then ``http.get(url=...?d=†state.env)`` are two low-risk calls, but
together they send a local file to the network.  The checker knows the edge between them,
so :func:`flow_risks` raises such a sending call to ``high``: the approval gate asks, with
the reason, before the plan runs.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..model import Call, Risk
from ..tools import ToolSpec

__all__ = ["LOCAL_DATA_TOOLS", "NETWORK_TOOLS", "RAISED_TO", "effective_risk", "flow_risks", "role_of"]

# Tools whose result is local data (files, the shell, memories) and tools that send what
# they are given off the machine.  A tool declares its own role with a ``data_flow``
# attribute ("local-source" / "network-sink") when it is not one of these names.
LOCAL_DATA_TOOLS = frozenset({"files.read", "files.list", "document.read", "shell.run", "memory.search"})
NETWORK_TOOLS = frozenset({"http.get", "http.request", "email.send"})
RAISED_TO = Risk.HIGH


def effective_risk(call: Call, spec: ToolSpec | None) -> Risk:
    r = call.risk if call.risk is not None else Risk.NONE
    if spec is not None and spec.risk > r:
        r = spec.risk
    return r


def role_of(tool: str, spec: Any) -> str | None:
    """``"local-source"``, ``"network-sink"`` or None: what a tool does with data."""
    declared = spec.data_flow if spec is not None else None
    if declared is not None:
        return declared
    if tool in LOCAL_DATA_TOOLS:
        return "local-source"
    if tool in NETWORK_TOOLS:
        return "network-sink"
    return None


def flow_risks(flow: Any, calls: Sequence[Call], ids: Sequence[str],
               get: Callable[[str], Any]) -> dict[int, str]:
    """``{call index: reason}`` for each call that sends the network data a local-data call
    produced, read directly or through any chain of other calls (data edges only: an
    ``@after`` orders calls without passing data)."""
    roles: dict[str, str | None] = {}
    for tool in {c.tool for c in calls}:
        roles[tool] = role_of(tool, get(tool))
    present = set(roles.values())
    if "local-source" not in present or "network-sink" not in present:
        return {}
    origin: dict[int, int] = {}  # call -> the local-data call whose data reaches it
    order, _cyclic = flow.topo_order()
    writers = flow.read_writers
    for i in order:
        if roles[calls[i].tool] == "local-source":
            origin[i] = i
            continue
        for k in flow.read_range(i):
            found = next((origin[w] for w in writers[k] if w in origin), None)
            if found is not None:
                origin[i] = found
                break
    out: dict[int, str] = {}
    for i, src in origin.items():
        if src != i and roles[calls[i].tool] == "network-sink":
            out[i] = (f"sends data that {ids[src]} ({calls[src].tool}) read from this machine "
                      f"to the network")
    return out
