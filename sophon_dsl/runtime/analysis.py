"""The run-time view of a plan's data flow: who writes what, who waits on whom.

A reference ``†k.p`` depends on every *other* call with an output path that
overlaps it (one is a prefix of the other: writing ``†state.user`` affects
``†state.user.name`` and writing ``†state.user.name`` affects ``†state.user``).
``@after`` adds control dependencies.  This mirrors the compiler's ``deps``
and ``writers`` but keeps references apart, which the scheduler needs for
``||`` (decided as soon as the alternatives to its left are settled).
"""

from __future__ import annotations

import weakref
from operator import attrgetter
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..diagnostics import Diagnostic
from ..model import Call, Plan, Reference, iter_references

__all__ = ["Analysis", "analyze", "analyze_compiled", "overlaps"]


def overlaps(a: tuple, b: tuple) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


@dataclass
class Analysis:
    ids: list[str]
    refs: Any                                   # refs[i]: references call i reads (params + inline output)
    ref_writers: list[Any]                      # per call: {ref key: writer indexes (not itself)} or
                                                # a tuple of (ref key, writer indexes) pairs
    after: list[tuple[int, ...]]                # control deps
    deps: list[Any]                             # all deps (data + control): frozensets, or sorted
                                                # tuples of ints (from a CompiledPlan)
    dependents: list[tuple[int, ...]]           # reverse of deps
    out_keys: list[Any]                         # output path keys per call (sequences)
    diagnostics: list[Diagnostic]

    def topo_order(self) -> list[int] | None:
        """Plan-order-stable topological order, or None on a cycle."""
        import heapq

        n = len(self.ids)
        indeg = [len(d) for d in self.deps]
        heap = [i for i in range(n) if indeg[i] == 0]
        heapq.heapify(heap)
        order = []
        while heap:
            i = heapq.heappop(heap)
            order.append(i)
            for j in self.dependents[i]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    heapq.heappush(heap, j)
        return order if len(order) == n else None


def _call_refs(call: Call) -> list[Reference]:
    out: list[Reference] = []
    for p in call.params:
        out.extend(iter_references(p.value))
    if call.inline_output is not None:
        out.extend(iter_references(call.inline_output))
    return out


def analyze(plan: Plan, ids: list[str] | None = None) -> Analysis:
    calls = plan.calls
    ids = list(ids) if ids is not None else plan.call_ids()
    n = len(calls)
    out_keys: list[list[tuple]] = [
        [r.key for r in c.output.paths] if c.output is not None else [] for c in calls]
    exact: dict[tuple, list[int]] = {}
    below: dict[tuple, list[int]] = {}   # proper prefix -> writers of a longer key
    for i, keys in enumerate(out_keys):
        for k in keys:
            exact.setdefault(k, []).append(i)
            for m in range(1, len(k)):
                below.setdefault(k[:m], []).append(i)
    index_of = {cid: i for i, cid in enumerate(ids)}
    diags: list[Diagnostic] = []
    refs: list[list[Reference]] = []
    ref_writers: list[dict[tuple, tuple[int, ...]]] = []
    after: list[tuple[int, ...]] = []
    deps: list[frozenset[int]] = []
    for i, call in enumerate(calls):
        rs = _call_refs(call)
        refs.append(rs)
        rw: dict[tuple, tuple[int, ...]] = {}
        for r in rs:
            k = r.key
            if k in rw:
                continue
            ws: set[int] = set()
            for m in range(1, len(k) + 1):
                ws.update(exact.get(k[:m], ()))
            ws.update(below.get(k, ()))
            ws.discard(i)
            rw[k] = tuple(sorted(ws))
        ref_writers.append(rw)
        a: list[int] = []
        for name in call.after:
            j = index_of.get(name)
            if j is None:
                diags.append(Diagnostic("E304", f"'after' names an unknown call {name!r}", call.span))
            elif j != i:
                a.append(j)
        after.append(tuple(a))
        d: set[int] = set(a)
        for ws_ in rw.values():
            d.update(ws_)
        deps.append(frozenset(d))
    dependents: list[list[int]] = [[] for _ in range(n)]
    for i, d in enumerate(deps):
        for j in d:
            dependents[j].append(i)
    return Analysis(ids, refs, ref_writers, after, deps, [tuple(x) for x in dependents], out_keys, diags)


def effective_risk(call: Call, spec: Any):
    from ..model import Risk

    r = call.risk if call.risk is not None else Risk.NONE
    if spec is not None and getattr(spec, "risk", None) is not None and spec.risk > r:
        r = spec.risk
    return r


def _dependents(n: int, deps: list) -> list[tuple[int, ...]]:
    """The reverse of ``deps`` (ascending), with one shared empty tuple for calls nothing waits for."""
    # Tuples while short (tuples of ints are untracked by the cyclic GC, so they are never
    # promoted; one list per call would be), a list only for a call with many dependents.
    out: list[Any] = [()] * n
    lists: list[int] = []
    for i, d in enumerate(deps):
        for j in d:
            cur = out[j]
            if type(cur) is tuple:
                if len(cur) < 16:
                    out[j] = cur + (i,)
                else:
                    out[j] = [*cur, i]
                    lists.append(j)
            else:
                cur.append(i)
    for j in lists:
        out[j] = tuple(out[j])
    return out


_NO_WRITERS: Any = MappingProxyType({})


# CompiledPlan -> its Analysis, keyed by id with a weak reference (a CompiledPlan is not
# hashable): a precompiled plan run many times is analysed once.
_CACHE: dict[int, tuple[Any, Analysis]] = {}


def _forget(key: int, ref: Any) -> None:
    entry = _CACHE.get(key)
    if entry is not None and entry[0] is ref:
        del _CACHE[key]


def analyze_compiled(compiled: Any) -> Analysis:
    """The same :class:`Analysis` as :func:`analyze`, reusing a CompiledPlan's wiring.

    The compiler already resolved every parameter reference to its writers with the same
    rule; only references inside an inline ``_output`` (not reads for the compiler, but
    inputs for the runtime) need the full analysis, so such plans fall back to it.

    Per-call entries are tuples (shared empty ones for calls that read nothing) rather than
    fresh lists and dicts: the analysis lives as long as the run, and every container it
    keeps per call is one more object for the cyclic GC to promote and traverse.

    The result for one CompiledPlan is computed once and kept while the plan lives; each
    call gets its own Analysis with its own (shallow-copied) lists, sharing the immutable
    per-call entries.
    """
    key = id(compiled)
    entry = _CACHE.get(key)
    if entry is not None and entry[0]() is compiled:
        an = entry[1]
    else:
        an = _analyze_compiled(compiled)
        if an is None:
            return analyze(compiled.plan, list(compiled.ids))
        try:
            ref = weakref.ref(compiled, lambda r, key=key: _forget(key, r))
        except TypeError:  # pragma: no cover - not weak-referenceable: no caching
            return an
        _CACHE[key] = (ref, an)
    return Analysis(list(an.ids), an.refs, list(an.ref_writers), list(an.after), list(an.deps),
                    list(an.dependents), an.out_keys, list(an.diagnostics))


_after_of = attrgetter("after")


def _analyze_compiled(compiled: Any) -> Analysis | None:
    plan = compiled.plan
    calls = plan.calls
    for c in calls:
        if c.inline_output is not None and next(iter_references(c.inline_output), None) is not None:
            return None
    ids = list(compiled.ids)
    n = len(calls)
    index_of: dict[str, int] | None = None
    diags: list[Diagnostic] = []
    ref_writers: list = [_NO_WRITERS] * n
    after: list = [()] * n
    # the compact forms (sorted int tuples, flat reads) when the CompiledPlan has them
    rows = getattr(compiled, "_dep_rows", None)
    deps: list = list(rows if rows is not None else compiled.deps)
    for i, call in enumerate(calls) if any(map(_after_of, calls)) else ():
        if call.after:
            if index_of is None:
                index_of = {cid: k for k, cid in enumerate(ids)}
            a: list[int] = []
            for name in call.after:
                j = index_of.get(name)
                if j is None:
                    diags.append(Diagnostic("E304", f"'after' names an unknown call {name!r}", call.span))
                elif j != i:
                    a.append(j)
            after[i] = ta = tuple(a)
            d = deps[i]
            if ta and not set(d).issuperset(ta):
                deps[i] = tuple(sorted(set(d).union(ta))) if rows is not None else d | frozenset(ta)
    reads = getattr(compiled, "_reads", None)
    if reads is not None:
        refs_flat, ws_flat, offs = reads.refs, reads.writers, reads.offs
        for i, a, b in zip(range(n), offs, offs[1:]):
            if b > a:
                # (key, writers) pairs: tuples of strings and ints, untracked by the cyclic GC
                if b - a == 1:
                    ref_writers[i] = ((refs_flat[a].key, ws_flat[a]),)
                else:
                    seen: dict = {}
                    for k in range(a, b):
                        seen.setdefault(refs_flat[k].key, ws_flat[k])
                    ref_writers[i] = tuple(seen.items())
        refs: Any = _FlatRefs(refs_flat, offs)
    else:
        for i, per_ref in enumerate(compiled.data_deps):
            if per_ref:
                if len(per_ref) == 1:
                    ref, ws = per_ref[0]
                    ref_writers[i] = ((ref.key, ws),)
                else:
                    seen = {}
                    for ref, ws in per_ref:
                        seen.setdefault(ref.key, ws)
                    ref_writers[i] = tuple(seen.items())
        refs = _Refs(compiled.data_deps)
    return Analysis(ids, refs, ref_writers, after, deps, _dependents(n, deps), _OutKeys(calls), diags)


class _PerCall:
    """A read-only per-call sequence computed on access from ``rows`` (one row per call)."""

    __slots__ = ("rows",)

    def __init__(self, rows: Any) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        for i in range(len(self.rows)):
            yield self[i]


class _OutKeys(_PerCall):
    """``Analysis.out_keys`` read from the calls' output targets (built on access)."""

    __slots__ = ()

    def __getitem__(self, i: int) -> tuple:
        out = self.rows[i].output
        return tuple([r.key for r in out.paths]) if out is not None else ()


class _Refs(_PerCall):
    """``Analysis.refs`` read from a CompiledPlan's ``data_deps`` (no per-call copy)."""

    __slots__ = ()

    def __getitem__(self, i: int) -> tuple:
        per_ref = self.rows[i]
        return tuple([ref for ref, _ in per_ref]) if per_ref else ()


class _FlatRefs:
    """``Analysis.refs`` read from a CompiledPlan's flat reads (no per-call copy)."""

    __slots__ = ("refs", "offs")

    def __init__(self, refs: tuple, offs: tuple) -> None:
        self.refs = refs
        self.offs = offs

    def __len__(self) -> int:
        return len(self.offs) - 1

    def __getitem__(self, i: int) -> tuple:
        offs = self.offs
        if i < 0:
            i += len(offs) - 1
        return self.refs[offs[i]:offs[i + 1]]

    def __iter__(self):
        for i in range(len(self.offs) - 1):
            yield self[i]
