"""E307: no call writes a read-only kind."""

from __future__ import annotations

from ..model import Call
from .rule import Rule

__all__ = ["ReadOnlyWrites"]


class ReadOnlyWrites(Rule):
    """E307: an output path in a read-only kind (``input``)."""

    codes = ("E307",)

    def check_calls(self) -> None:
        for i, p in self.ctx.flow.readonly_writes:
            self.report(i, p)

    def check_call(self, i: int, call: Call) -> None:
        if call.output is None:
            return
        writes = self.ctx.flow.readonly_writes
        k = len(writes)
        while k and writes[k - 1][0] == i:  # the flow appends a call's writes last
            k -= 1
        for _, p in writes[k:]:
            self.report(i, p)

    def report(self, i: int, p: int) -> None:
        ctx = self.ctx
        out = ctx.calls[i].output
        assert out is not None
        ref = out.paths[p]
        ctx.diag("E307", f"call {ctx.ids[i]} writes {ref.text()}: the '{ref.kind}' kind is read-only",
                 ref.span or out.span or ctx.call_span(i), call=i)
