"""E302: the calls' dependencies have no cycle."""

from __future__ import annotations

from .rule import Rule, Scope

__all__ = ["Cycles"]


class Cycles(Rule):
    """E302: a dependency cycle (one per strongly connected component)."""

    codes = ("E302",)
    scope = Scope.PLAN

    def check_plan(self) -> None:
        ctx = self.ctx
        _, cyclic = ctx.topo()
        if not cyclic:
            return
        flow = ctx.flow
        succ = flow.successors()
        for comp in flow.cycles():
            members = set(comp)
            start = min(comp)
            # BFS from start back to start inside the component.
            parent: dict[int, int] = {}
            queue = [start]
            seen = {start}
            end = None
            qi = 0
            while qi < len(queue) and end is None:
                v = queue[qi]
                qi += 1
                for w in sorted(succ[v]):
                    if w == start:
                        end = v
                        break
                    if w in members and w not in seen:
                        seen.add(w)
                        parent[w] = v
                        queue.append(w)
            if end is None:  # pragma: no cover - an SCC always closes
                continue
            path = [end]
            while path[-1] != start:
                path.append(parent[path[-1]])
            path.reverse()  # start ... end, and end -> start closes it
            cycle = path + [start]
            ids = ctx.ids
            text = " -> ".join(ids[c] for c in cycle)
            notes = [f"{ids[a]} ({ctx.loc(a)}) -> {ids[b]} ({ctx.loc(b)}): {self.edge_reason(a, b)}"
                     for a, b in zip(cycle, cycle[1:])]
            extra = f" ({len(comp)} calls are mutually dependent)" if len(comp) > len(cycle) - 1 else ""
            ctx.diag("E302", f"dependency cycle: {text}{extra}", ctx.call_span(start), notes, call=start,
                     data={"calls": sorted(comp)})

    def edge_reason(self, a: int, b: int) -> str:
        ctx = self.ctx
        ids = ctx.ids
        for ref, ws in ctx.flow.reads(b):
            if a in ws:
                out = ctx.calls[a].output
                wrote = [r.text() for r in out.paths] if out else []
                return f"{ids[b]} reads {ref.text()}, written by {ids[a]} as {' / '.join(wrote)}"
        if a in ctx.flow.control[b]:
            return f"{ids[b]} runs after {ids[a]}"
        return "dependency"
