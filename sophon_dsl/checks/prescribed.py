"""E210, E211: a call of a tool that prescribes its output path (Acts 008)."""

from __future__ import annotations

from ..model import Call
from ..outputpath import prescription, same_target, target_text
from .rule import Rule

__all__ = ["PrescribedOutputs"]


class PrescribedOutputs(Rule):
    """E210 an output path other than the tool's prescribed one; E211 a prescription that is not a path."""

    codes = ("E210", "E211")

    def check_calls(self) -> None:
        ctx = self.ctx
        seen: dict[str, object] = {}  # tool -> its prescription (None: none), looked up once
        for i, call in enumerate(ctx.calls):
            p = seen.get(call.tool, seen)
            if p is seen:
                p = seen[call.tool] = prescription(ctx.table(call.tool).spec)
            if p is not None:
                self.report(i, call, p)

    def check_call(self, i: int, call: Call) -> None:
        p = prescription(self.ctx.table(call.tool).spec)
        if p is not None:
            self.report(i, call, p)

    def report(self, i: int, call: Call, p) -> None:
        ctx = self.ctx
        if p.target is None:
            ctx.diag("E211", f"tool '{call.tool}' prescribes the output path {p.text!r} (the const of "
                             f"_outputPath in its input schema), which is not an output path such as "
                             f"\"†state.result\"", ctx.call_span(i), call=i)
            return
        out = call.output
        if out is None or same_target(out, p.target):
            return
        ctx.diag("E210", f"call {ctx.ids[i]} writes {target_text(out)}, but tool '{call.tool}' prescribes "
                         f"its output path: {target_text(p.target)}",
                 out.span or (out.paths[0].span if out.paths else None) or ctx.call_span(i), call=i)
