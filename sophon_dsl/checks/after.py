"""E304: ``@after`` names an existing call."""

from __future__ import annotations

import difflib

from ..model import Call
from .rule import Rule

__all__ = ["UnknownAfter"]


class UnknownAfter(Rule):
    """E304: an ``@after`` name that is no call's id (among the calls so far)."""

    codes = ("E304",)

    def check_calls(self) -> None:
        for i, name in self.ctx.flow.unknown_after:
            self.report(i, name)

    def check_call(self, i: int, call: Call) -> None:
        if not call.after:
            return
        unknown = self.ctx.flow.unknown_after
        k = len(unknown)
        while k and unknown[k - 1][0] == i:  # the flow appends a call's names last
            k -= 1
        for _, name in unknown[k:]:
            self.report(i, name)

    def report(self, i: int, name: str) -> None:
        ctx = self.ctx
        hint = difflib.get_close_matches(name, list(ctx.flow.index), n=1, cutoff=0.6)
        msg = f"'after' of call {ctx.ids[i]} names unknown call '{name}'"
        if hint:
            msg += f"; did you mean '{hint[0]}'?"
        ctx.diag("E304", msg, ctx.calls[i].attr_span("_after"), call=i)
