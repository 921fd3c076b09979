"""W301: two calls that set one path (or a path and a path below it) are ordered."""

from __future__ import annotations

from typing import Sequence

from ..model import OutputMethod, Reference
from .rule import Rule, Scope

__all__ = ["ConcurrentWriters"]


class ConcurrentWriters(Rule):
    """W301: two unordered ``set`` writers of one path, or of a path and one below it."""

    codes = ("W301",)
    scope = Scope.PLAN

    def check_plan(self) -> None:
        ctx = self.ctx
        wi = ctx.flow.writers
        writers, below = wi.exact, wi.below
        overlaps = any(key in below for key in writers)  # a written key above another
        if not overlaps and not wi.multi:
            return  # every key has one writer and none is written below another: no W301
        order, _ = ctx.topo()
        pos = [0] * len(ctx.calls)
        for k, i in enumerate(order):
            pos[i] = k
        calls = ctx.calls
        if overlaps:
            setters_of: dict[tuple, list[int]] = {}
            for key, ws in writers.items():
                js = sorted({j for j, _ in ws if calls[j].output.method is OutputMethod.SET})  # type: ignore[union-attr]
                if js:
                    setters_of[key] = js
            self.check_prefix_overlaps(pos, setters_of)
        for key, ws in writers.items():
            if len(ws) < 2:
                continue
            setters = sorted({j for j, _ in ws if calls[j].output.method is OutputMethod.SET},  # type: ignore[union-attr]
                             key=lambda j: pos[j])
            if len(setters) < 2:
                continue
            for a, b in zip(setters, setters[1:]):
                ia, ib = calls[a].instance, calls[b].instance
                if ia is not None and ib is not None and ia != ib:
                    continue
                if not ctx.flow.reaches(a, b, pos):
                    ref = Reference(key[0], tuple(key[1:]))
                    spans = [r.span for r in calls[b].output.paths if r.key == key]  # type: ignore[union-attr]
                    ctx.diag("W301", f"calls {ctx.ids[a]} ({ctx.loc(a)}) and {ctx.ids[b]} ({ctx.loc(b)}) both "
                                     f"set {ref.text()} with no order between them; the final value depends "
                                     f"on timing (add @after, or use a merging output method)",
                             (spans[0] if spans else None) or ctx.call_span(b), call=b)

    def check_prefix_overlaps(self, pos: Sequence[int], setters_of: dict[tuple, list[int]]) -> None:
        """W301 for a ``set`` of a path and an unordered ``set`` of a path below it."""
        ctx = self.ctx
        for key, lower in setters_of.items():
            for k in range(1, len(key)):
                upper = setters_of.get(key[:k])
                if not upper:
                    continue
                pair = self.unordered_pair(upper, lower, pos)
                if pair is None:
                    continue
                a, b = sorted(pair, key=lambda j: pos[j])
                up = Reference(key[0], tuple(key[1:k])).text()
                low = Reference(key[0], tuple(key[1:])).text()
                spans = [r.span for r in ctx.calls[b].output.paths  # type: ignore[union-attr]
                         if r.key in (key, key[:k])]
                ctx.diag("W301", f"calls {ctx.ids[a]} ({ctx.loc(a)}) and {ctx.ids[b]} ({ctx.loc(b)}) set "
                                 f"overlapping paths {up} and {low} with no order between them; the final "
                                 f"value depends on timing (add @after, or use a merging output method)",
                         (spans[0] if spans else None) or ctx.call_span(b), call=b)

    def unordered_pair(self, xs: list[int], ys: list[int], pos: Sequence[int],
                       budget: int = 64) -> tuple[int, int] | None:
        calls = self.ctx.calls
        tried = 0
        for x in xs:
            for y in ys:
                if x == y:
                    continue
                ix, iy = calls[x].instance, calls[y].instance
                if ix is not None and iy is not None and ix != iy:
                    continue
                a, b = (x, y) if pos[x] < pos[y] else (y, x)
                if not self.ctx.flow.reaches(a, b, pos):
                    return (x, y)
                tried += 1
                if tried >= budget:
                    return None
        return None
