"""E305: a plan has at most ``max_calls`` calls."""

from __future__ import annotations

from ..model import Call
from .rule import Rule

__all__ = ["CallLimit"]


class CallLimit(Rule):
    """E305: more calls than the caller's ``max_calls``."""

    codes = ("E305",)

    def check_calls(self) -> None:
        ctx = self.ctx
        limit, n = ctx.max_calls, len(ctx.calls)
        if limit is not None and n > limit:
            extra = ctx.calls[limit]
            ctx.diag("E305", f"plan has {n} calls; at most {limit} are allowed", extra.span or extra.tool_span,
                     call=limit)

    def check_call(self, i: int, call: Call) -> None:
        # streaming: the total is not known yet, so every call past the limit is named
        limit = self.ctx.max_calls
        if limit is not None and i >= limit:
            self.ctx.diag("E305", f"call {self.ctx.ids[i]} is beyond the limit of {limit} calls per plan",
                          call.span or call.tool_span, call=i)
