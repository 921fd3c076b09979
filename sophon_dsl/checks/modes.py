"""E401, E402, E206, E207, E209: inline outputs, the calls that need an executor or code,
and the activity a call names."""

from __future__ import annotations

import difflib

from ..model import Call, Mode
from .rule import Rule

__all__ = ["Activities", "InlineOutputs", "MissingImplementations"]


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
                             f"executor is available: name a model with --provider (sophon-dsl run), pass "
                             f"executor= (the Python API), or give the call its result inline (-> value)",
                     ctx.call_span(i), call=i)


class MissingImplementations(Rule):
    """E207: a call to an explicit tool (latent: false) that has no Python function."""

    codes = ("E207",)

    def check_calls(self) -> None:
        ctx = self.ctx
        if not ctx.require_implementations:
            return
        table = ctx.table
        for call in ctx.calls:  # an activity named runs instead of the tool: its table too
            if call.activity is not None:
                table(call.activity)
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
        name = call.activity
        spec = ctx.sigs[i].tab.spec if name is None else ctx.table(name).spec  # whose code runs
        if spec is not None and spec.explicit and spec.func is None:
            what = f"uses {call.tool!r}" if name is None else f"names activity {name!r}"
            ctx.diag("E207", f"call {ctx.ids[i]} {what}, declared as an activity (latent: false), "
                             f"but no implementation is registered: pass its Python function in tools",
                     ctx.call_span(i) if name is None else call.attr_span("_activity"), call=i)


class Activities(Rule):
    """E209: a call's ``_activity`` names no registered activity (a tool with code, or declared latent: false)."""

    codes = ("E209",)

    def check_calls(self) -> None:
        check = self.check_call
        for i, call in enumerate(self.ctx.calls):
            if call.activity is not None:
                check(i, call)

    def check_call(self, i: int, call: Call) -> None:
        name = call.activity
        if name is None:
            return
        ctx = self.ctx
        spec = ctx.table(name).spec  # tables are per name and dropped with the tools
        if spec is not None and not spec.latent:
            return
        if spec is not None:
            why = f"'{name}' is a latent tool (no code), and an activity is code"
        else:
            why = f"no activity '{name}' is registered"
            hint = self._hint(name)
            if hint:
                why += f"; did you mean '{hint}'?"
        ctx.diag("E209", f"call {ctx.ids[i]} names activity '{name}' to run tool '{call.tool}', but {why} "
                         f"(register a Python function under that name in tools)",
                 call.attr_span("_activity"), call=i, data={"activity": name})

    def _hint(self, name: str) -> str | None:
        cache = self.ctx.cache  # dropped with the tools when a streamed header changes
        names = cache.get("E201 names")  # shared with E201's "did you mean"
        if names is None:
            names = cache["E201 names"] = list(self.ctx.tools)
        codes = [n for n in names if not self.ctx.tools[n].latent]
        hint = difflib.get_close_matches(name, codes, n=1, cutoff=0.6)
        return hint[0] if hint else None
