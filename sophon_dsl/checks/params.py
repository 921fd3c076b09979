"""E201, E202, E203: the tool exists and the parameter names fit its input schema."""

from __future__ import annotations

import difflib

from ..model import Call, Param
from .context import UNKNOWN_PARAM, Signature, ToolTable
from .rule import Rule

__all__ = ["ToolParams"]


class ToolParams(Rule):
    """E201 unknown tool, E202 missing required parameter, E203 name a closed schema lacks."""

    codes = ("E201", "E202", "E203")

    def check_calls(self) -> None:
        calls = self.ctx.calls
        for i, sig in enumerate(self.ctx.sigs):
            if not sig.clean:
                self.report(i, calls[i], sig)

    def check_call(self, i: int, call: Call) -> None:
        sig = self.ctx.sigs[i]
        if not sig.clean:
            self.report(i, call, sig)

    def report(self, i: int, call: Call, sig: Signature) -> None:
        ctx = self.ctx
        tab = sig.tab
        if tab.schema is not None:
            for name in sig.missing:
                ctx.diag("E202", f"call {ctx.ids[i]} to '{call.tool}' is missing required parameter '{name}'",
                         ctx.call_span(i), call=i)
        elif tab.spec is None:
            self.unknown_tool(i, call)
        if sig.entries is not None:
            for k, p in enumerate(call.params):
                if sig.entries[k] is UNKNOWN_PARAM:
                    self.unknown_param(i, call, p, tab)

    def unknown_tool(self, i: int, call: Call) -> None:
        cache = self.ctx.cache  # dropped with the tools when a streamed header changes
        hints = cache.setdefault("E201 hints", {})  # unknown tool -> its "did you mean"
        if call.tool not in hints:  # one search per unknown name, not per call
            names = cache.get("E201 names")
            if names is None:
                names = cache["E201 names"] = list(self.ctx.tools)
            hint = difflib.get_close_matches(call.tool, names, n=1, cutoff=0.6)
            if not hint:
                lowered = {n.lower(): n for n in names}
                if call.tool.lower() in lowered:
                    hint = [lowered[call.tool.lower()]]
            hints[call.tool] = hint[0] if hint else None
        msg = f"unknown tool '{call.tool}' in call {self.ctx.ids[i]}"
        if hints[call.tool]:
            msg += f"; did you mean '{hints[call.tool]}'?"
        self.ctx.diag("E201", msg, self.ctx.call_span(i), call=i)

    def unknown_param(self, i: int, call: Call, p: Param, tab: ToolTable) -> None:
        props = tab.props
        hint = difflib.get_close_matches(p.name, list(props), n=1, cutoff=0.6)
        known = ", ".join(props) if props else "none"
        msg = f"unknown parameter '{p.name}' for tool '{call.tool}' in call {self.ctx.ids[i]}"
        msg += f"; did you mean '{hint[0]}'?" if hint else f" (parameters: {known})"
        self.ctx.diag("E203", msg, p.span or p.value.span or self.ctx.call_span(i), call=i)
