"""W304: a path is written with one container shape."""

from __future__ import annotations

from ..model import Reference
from .rule import Rule, Scope

__all__ = ["ContainerShapes"]


class ContainerShapes(Rule):
    """W304: a path written below both as a list (``a[0]``) and as an object (``a.x``)."""

    codes = ("W304",)
    scope = Scope.PLAN

    def check_plan(self) -> None:
        ctx = self.ctx
        wi = ctx.flow.writers
        if not wi.has_index:
            return  # no list index written: every container is an object
        first: dict[tuple, tuple[bool, tuple, int]] = {}  # parent -> (is list, key, writer)
        reported: set[tuple] = set()
        for key, ws in wi.exact.items():
            for d in range(1, len(key)):
                parent, seg = key[:d], key[d]
                as_list = type(seg) is int
                seen = first.get(parent)
                if seen is None:
                    first[parent] = (as_list, key, ws[0][0])
                    continue
                if seen[0] == as_list or parent in reported:
                    continue
                reported.add(parent)
                other_key, other = seen[1], seen[2]
                i, p = ws[0]
                where = Reference(parent[0], tuple(parent[1:])).text()
                this = Reference(key[0], tuple(key[1:])).text()
                that = Reference(other_key[0], tuple(other_key[1:])).text()
                kinds = ("a list", "an object") if as_list else ("an object", "a list")
                ctx.diag("W304", f"{where} is written as {kinds[0]} by call {ctx.ids[i]} ({this}) and as "
                                 f"{kinds[1]} by call {ctx.ids[other]} ({that}); the later write replaces "
                                 f"what the other wrote (use one shape: only indexes or only names)",
                         ctx.calls[i].output.paths[p].span or ctx.call_span(i),  # type: ignore[union-attr]
                         [f"{ctx.ids[other]} writes {that} at {ctx.loc(other)}"], call=i)
