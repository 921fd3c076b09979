"""E401, E402, E206, E207: inline outputs and the calls that need an executor or code."""

from __future__ import annotations

from ..model import Call, Mode
from .rule import Rule

__all__ = ["InlineOutputs", "MissingImplementations"]


class InlineOutputs(Rule):
    """E401 inline _output in lazy mode; E402 on an activity; E206 latent call, no executor."""

    codes = ("E401", "E402", "E206")

    def check_calls(self) -> None:
        ctx = self.ctx
        check = self.check_call
        if ctx.require_executor:
            sigs = ctx.sigs
            for i, call in enumerate(ctx.calls):
                if call.inline_output is not None or sigs[i].tab.latent:
                    check(i, call)
        else:
            for i, call in enumerate(ctx.calls):
                if call.inline_output is not None:
                    check(i, call)

    def check_call(self, i: int, call: Call) -> None:
        ctx = self.ctx
        inline = call.inline_output
        tab = ctx.sigs[i].tab
        latent = tab.latent
        is_activity = not latent or call.activity is not None
        cid = ctx.ids[i]
        if inline is not None:
            out_span = call.attr_span("_output")
            if ctx.plan.mode is Mode.LAZY:
                ctx.diag("E401", f"call {cid} has an inline _output but the plan is in lazy mode (a lazy plan "
                                 f"only plans; it executes nothing)", out_span, call=i)
            if is_activity:
                what = f"activity '{call.activity}'" if call.activity else f"activity tool '{call.tool}'"
                ctx.diag("E402", f"call {cid} has an inline _output but runs {what}; only latent calls carry "
                                 f"their output inline", out_span, call=i)
        elif ctx.require_executor and tab.spec is not None and not is_activity:
            ctx.diag("E206", f"call {cid} uses latent tool '{call.tool}' (no implementation) and no LLM "
                             f"executor is available", ctx.call_span(i), call=i)


class MissingImplementations(Rule):
    """E207: a call to an explicit tool (latent: false) that has no Python function."""

    codes = ("E207",)

    def check_calls(self) -> None:
        ctx = self.ctx
        if not ctx.require_implementations:
            return
        for tab in ctx.tables.values():
            spec = tab.spec
            if spec is not None and spec.explicit and spec.func is None:
                break
        else:
            return  # every tool used has code, or is latent
        super().check_calls()

    def check_call(self, i: int, call: Call) -> None:
        ctx = self.ctx
        if not ctx.require_implementations or call.inline_output is not None:
            return
        spec = ctx.sigs[i].tab.spec
        if spec is not None and spec.explicit and spec.func is None:
            ctx.diag("E207", f"call {ctx.ids[i]} uses {call.tool!r}, declared as an activity (latent: false), "
                             f"but no implementation is registered: pass its Python function in tools",
                     ctx.call_span(i), call=i)
