"""E303: call ids are unique."""

from __future__ import annotations

from ..model import Call
from .rule import Rule

__all__ = ["DuplicateIds"]


class DuplicateIds(Rule):
    """E303: a call reuses the id of an earlier call."""

    codes = ("E303",)

    def check_calls(self) -> None:
        ctx = self.ctx
        index = ctx.flow.index  # id -> its first call
        if len(index) == len(ctx.ids):
            return  # no duplicate
        for i, cid in enumerate(ctx.ids):
            if index[cid] != i:
                self.report(i, ctx.calls[i], index[cid])

    def check_call(self, i: int, call: Call) -> None:
        first = self.ctx.flow.index[self.ctx.ids[i]]
        if first != i:
            self.report(i, call, first)

    def report(self, i: int, call: Call, first: int) -> None:
        ctx = self.ctx
        cid = ctx.ids[i]
        ctx.diag("E303", f"duplicate call id '{cid}': call {i + 1} reuses the id of the call at {ctx.loc(first)}",
                 call.attr_span("_id") if call.id is not None else ctx.call_span(i),
                 [f"first '{cid}' is at {ctx.loc(first)}"], call=i)
