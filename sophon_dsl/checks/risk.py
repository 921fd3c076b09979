"""W202: a call that asks for a lower risk than its tool declares."""

from __future__ import annotations

from ..model import Call
from .rule import Rule

__all__ = ["RiskDowngrade"]


class RiskDowngrade(Rule):
    """W202: a call's @risk / _risk lower than its tool's risk (the tool's risk is used)."""

    codes = ("W202",)

    def check_calls(self) -> None:
        # most calls give no risk of their own: only those are looked at
        for i, call in enumerate(self.ctx.calls):
            if call.risk is not None:
                self.check_call(i, call)

    def check_call(self, i: int, call: Call) -> None:
        if call.risk is None:
            return
        ctx = self.ctx
        spec = ctx.sigs[i].tab.spec
        tool_risk = spec.risk if spec is not None else None
        if tool_risk is None or not tool_risk > call.risk:
            return
        # the stronger risk wins (approval follows the tool's), but a reader of the plan
        # sees the call's and would believe it lowered the bar: say which one applies
        ctx.diag("W202", f"call {ctx.ids[i]} asks for risk {call.risk.label} but tool '{call.tool}' is "
                         f"{tool_risk.label} risk: the higher risk ({tool_risk.label}) applies",
                 call.attr_span("_risk"), call=i)
