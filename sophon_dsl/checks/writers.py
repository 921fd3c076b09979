"""W301: two calls that set one path (or a path and a path below it) are ordered."""

from __future__ import annotations

from typing import Sequence

from ..dataflow import DataFlow, base_kind
from ..model import Call, Expression, ListValue, ObjectValue, OutputMethod, Reference
from .rule import Rule, Scope

__all__ = ["BranchGuards", "ConcurrentWriters"]


class ConcurrentWriters(Rule):
    """W301: two unordered ``set`` writers of one path, or of a path and one below it."""

    codes = ("W301",)
    scope = Scope.PLAN
    __slots__ = ("_guards",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._guards: BranchGuards | None = None

    def check_plan(self) -> None:
        ctx = self.ctx
        wi = ctx.flow.writers
        writers = wi.exact
        overlaps = wi.overlapping()  # a written key above another
        if not overlaps and not wi.multi:
            return  # every key has one writer and none is written below another: no W301
        order, _ = ctx.topo()
        self._guards = None  # the plan may have grown since the last run (streaming)
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
            self.check_prefix_overlaps(pos, setters_of, order)
        for key, ws in writers.items():
            if len(ws) < 2:
                continue
            setters = sorted({j for j, _ in ws if calls[j].output.method is OutputMethod.SET},  # type: ignore[union-attr]
                             key=lambda j: pos[j])
            if len(setters) < 2:
                continue
            exclusive_seen = False  # some pair was exclusive: order is no longer transitive
            for at in range(1, len(setters)):
                a, b = setters[at - 1], setters[at]
                if self.other_instance(a, b):
                    continue
                if not exclusive_seen:
                    if ctx.flow.reaches(a, b, pos):
                        continue
                    if not self.exclusive(a, b, order):
                        racer: int | None = a
                    else:
                        exclusive_seen = True
                        racer = self.racer(setters, at - 1, b, pos, order)
                else:
                    racer = self.racer(setters, at, b, pos, order)
                if racer is not None:
                    a = racer
                    exclusive_seen = False  # one report per race, as for ordered chains
                    ref = Reference(key[0], tuple(key[1:]))
                    spans = [r.span for r in calls[b].output.paths if r.key == key]  # type: ignore[union-attr]
                    ctx.diag("W301", f"calls {ctx.ids[a]} ({ctx.loc(a)}) and {ctx.ids[b]} ({ctx.loc(b)}) both "
                                     f"set {ref.text()} with no order between them; the final value depends "
                                     f"on timing (add @after, or use a merging output method)",
                             (spans[0] if spans else None) or ctx.call_span(b), call=b)

    BUDGET = 8  # earlier writers compared with one writer once a branch makes order non-transitive

    def racer(self, setters: list[int], upto: int, b: int, pos: Sequence[int],
              order: Sequence[int]) -> int | None:
        """The latest of ``setters[:upto]`` (the last BUDGET) that races ``b``: same instance,
        not exclusive with it (checked first: cheaper than the order) and not before it."""
        for a in reversed(setters[max(0, upto - self.BUDGET):upto]):
            if not self.other_instance(a, b) and not self.exclusive(a, b, order) \
                    and not self.ctx.flow.reaches(a, b, pos):
                return a
        return None

    def other_instance(self, a: int, b: int) -> bool:
        """Writers in different ``_instance``s never conflict."""
        ia, ib = self.ctx.calls[a].instance, self.ctx.calls[b].instance
        return ia is not None and ib is not None and ia != ib

    def exclusive(self, a: int, b: int, order: Sequence[int]) -> bool:
        """Whether ``a`` and ``b`` need different alternatives of one branch (at most one runs)."""
        if not self.ctx.flow.writers.branching:
            return False
        guards = self._guards
        if guards is None:
            guards = self._guards = BranchGuards(self.ctx.calls, self.ctx.flow, order)
        return guards.exclusive(a, b)

    def check_prefix_overlaps(self, pos: Sequence[int], setters_of: dict[tuple, list[int]],
                              order: Sequence[int]) -> None:
        """W301 for a ``set`` of a path and an unordered ``set`` of a path below it."""
        ctx = self.ctx
        for key, lower in setters_of.items():
            for k in range(1, len(key)):
                upper = setters_of.get(key[:k])
                if not upper:
                    continue
                pair = self.unordered_pair(upper, lower, pos, order)
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

    def unordered_pair(self, xs: list[int], ys: list[int], pos: Sequence[int], order: Sequence[int],
                       budget: int = 64) -> tuple[int, int] | None:
        tried = 0
        for x in xs:
            for y in ys:
                if x == y or self.other_instance(x, y):
                    continue
                a, b = (x, y) if pos[x] < pos[y] else (y, x)
                if not self.ctx.flow.reaches(a, b, pos) and not self.exclusive(a, b, order):
                    return (x, y)
                tried += 1
                if tried >= budget:
                    return None
        return None


class BranchGuards:
    """Which branch alternatives each call needs to run, to tell exclusive writers apart.

    A call *needs* alternative ``k`` of a branching call ``B`` when it reads, outside a
    ``||`` fallback, a path whose only writer is ``B`` and that overlaps alternative ``k``
    alone (so when ``B`` takes another alternative the read is broken and the call is
    skipped), or when it reads a path all of whose writers need it, or waits (``@after``)
    for a call that needs it.  Two calls needing different alternatives of one call never
    both run.  Computed once per plan, in dependency order, only when W301 would fire.
    """

    __slots__ = ("need",)

    def __init__(self, calls: Sequence[Call], flow: DataFlow, order: Sequence[int]) -> None:
        need: list[frozenset] = [_NONE] * len(calls)
        for i in order:
            got: set = set()
            for d in flow.control[i]:
                got |= need[d]
            loose = _fallback_operands(calls[i]) if i in flow.fallbacks else ()
            for ref, writers in flow.reads(i):
                if not writers or id(ref) in loose:
                    continue
                common = None
                for w in writers:
                    mine = need[w] | _alternative(w, calls[w], ref)
                    common = mine if common is None else common & mine
                    if not common:
                        break
                if common:
                    got |= common
            if got:
                need[i] = frozenset(got)
        self.need = need

    def exclusive(self, a: int, b: int) -> bool:
        """Whether calls ``a`` and ``b`` need different alternatives of one branching call."""
        na, nb = self.need[a], self.need[b]
        if not na or not nb:
            return False
        taken = dict(na)
        return any(taken.get(call, k) != k for call, k in nb)


_NONE: frozenset = frozenset()


def _alternative(w: int, writer: Call, ref: Reference) -> frozenset:
    """``{(w, k)}`` when ``ref`` overlaps alternative ``k`` of writer ``w``'s branch alone."""
    out = writer.output
    if out is None or not out.is_branching:
        return _NONE
    kind, path = base_kind(ref.kind), ref.path
    hit = None
    for k, alt in enumerate(out.paths):
        p = alt.path
        if base_kind(alt.kind) == kind and p[:len(path)] == path[:len(p)]:
            if hit is not None:
                return _NONE
            hit = k
    return _NONE if hit is None else frozenset({(w, hit)})


def _fallback_operands(call: Call) -> set[int]:
    """Ids of the references that are alternatives of a ``||`` fallback in the parameters:
    such a read may be broken without the call being skipped."""
    ids: set[int] = set()
    stack: list = [p.value for p in call.params]
    while stack:
        v = stack.pop()
        tv = type(v)
        if tv is Expression:
            if v.op == "||":
                ids.update(id(r) for r in v.operands)
        elif tv is ListValue:
            stack.extend(v.items)
        elif tv is ObjectValue:
            stack.extend(x for _, x in v.entries)
    return ids
