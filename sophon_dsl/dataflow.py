"""The data flow of a plan: who writes each path, who reads it, and what waits for what.

One analysis serves the checker, the runtime, dry-run and streaming alike
(``docs/design.md``).  The rules it implements (``spec/language.md``, Edges):

* a call *writes* every path of its output target (all alternatives of ``||``,
  all paths of ``&&``); writes to a read-only kind (``input``) are not indexed
  but remembered in :attr:`DataFlow.readonly_writes` for the checker (E307);
* a call *reads* every reference in its parameter values (whole values,
  expression operands, template parts, at any depth); references inside an
  inline ``_output`` are inputs for the runtime but not reads for the checker,
  so they are kept apart (:attr:`DataFlow.inline_reads`);
* a read of ``(kind, *path)`` depends on every *other* call writing the same
  key, a prefix of it or an extension of it, wherever it stands in the text;
* ``@after`` adds control edges.

Cost: building is linear in the plan (plus edges).  A read is resolved with one
dictionary lookup per prefix of its key, stopping at the first prefix nothing
is written below.  Writer sets of many calls (a prefix read over thousands of
writers) are shared between readers instead of copied per reader.

:class:`DataFlow` can also grow one call at a time (:meth:`DataFlow.add_call`),
which is how streamed replies are wired: a new writer of a path that an
earlier call reads becomes one more dependency of that reader, found through
the read index without rescanning the plan.
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from itertools import accumulate
from operator import attrgetter, itemgetter
from typing import Any, Iterable

from .model import Call, Expression, ListValue, Literal, ObjectValue, Reference, Template, Value
from .maps import outer_reads
from .values import references

__all__ = [
    "BUILTIN_KINDS",
    "READ_ONLY_KINDS",
    "CallIds",
    "DataFlow",
    "GroupWiring",
    "IdIndex",
    "Read",
    "WriterIndex",
    "base_kind",
]

#: Reference kinds that are always known.  Any other kind must be written by a call.
BUILTIN_KINDS = frozenset({"input", "state", "data"})
#: Kinds that plans may read but never write.
READ_ONLY_KINDS = frozenset({"input"})

_EMPTY: tuple = ()
_NO_CALLS: frozenset[int] = frozenset()


def base_kind(kind: str) -> str:
    """``state@A`` (instance A's state, Acts 013) behaves as ``state``; other kinds are themselves."""
    return kind.partition("@")[0]


def _key(kind: str, path: tuple) -> tuple:
    return (kind, path[0]) if len(path) == 1 else (kind, *path)


_second = itemgetter(1)  # an object entry's value
_call_id = attrgetter("id")


def _has_fallback(value: Value) -> bool:
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        tv = type(v)
        if tv is Expression and v.op == "||":
            return True
        if tv is ListValue:
            stack.extend(v.items)
        elif tv is ObjectValue:
            stack.extend(x for _, x in v.entries)
    return False


def _overlapping(exact: dict, below: dict, key: tuple) -> list:
    """What an index (``exact``: key -> entries, ``below``: proper prefix -> entries of
    longer keys) holds for ``key``, a prefix of it or an extension of it."""
    out: list = []
    for k in range(1, len(key) + 1):
        hit = exact.get(key[:k])
        if hit:
            out.extend(hit)
    ext = below.get(key)
    if ext:
        out.extend(ext)
    return out


_AUTO_ID = re.compile(r"c([1-9][0-9]*)\Z")


class CallIds(Sequence):
    """Each call's id, made when read: its label / ``_id``, else ``c<N>`` with N its
    1-based position (``Plan.call_ids``); ids appended for later calls (streaming, map
    items) are kept where they are not the call's own.

    A list held one string per call (about 60 bytes with its slot, 0.1 KB with the id
    index) for the diagnostics that name a few of them.  Reads go to ``calls``, the
    flow's list of calls, which grows with it.  :meth:`DataFlow.listed_ids` turns the
    flow's ids into a list again when they are read per call (a run)."""

    __slots__ = ("_calls", "_given", "_n")

    def __init__(self, calls: list[Call], n: int | None = None) -> None:
        self._calls = calls
        self._given: dict[int, str] = {}  # position -> an id other than the call's own
        self._n = len(calls) if n is None else n

    def own(self, i: int) -> str:
        """The id call ``i`` has of itself: its label, else ``c<i + 1>``."""
        cid = self._calls[i].id
        return f"c{i + 1}" if cid is None else cid

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # type: ignore[override]
        if type(i) is slice:
            return [self[k] for k in range(*i.indices(self._n))]
        n = self._n
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("call index out of range")
        if self._given:
            cid = self._given.get(i)
            if cid is not None:
                return cid
        cid = self._calls[i].id
        return f"c{i + 1}" if cid is None else cid

    def __iter__(self):
        return iter(self.listed())

    def append(self, cid: str) -> None:
        """The id of the call just appended to ``calls``."""
        i = self._n
        self._n = i + 1
        if cid != self.own(i):
            self._given[i] = cid

    def extend(self, ids: Iterable[str]) -> None:
        for cid in ids:
            self.append(cid)

    def listed(self) -> list[str]:
        """The ids as a list."""
        out = [f"c{i}" if c.id is None else c.id for i, c in enumerate(self._calls[:self._n], 1)]
        for i, cid in self._given.items():
            out[i] = cid
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (CallIds, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


class IdIndex(Mapping):
    """Call id -> the first call with that id, over a :class:`CallIds` (``DataFlow.index``).

    Holds only the ids that are not ``c<N>`` of their own position N (labels, mostly); a
    ``c<N>`` is looked up as position N - 1.  ``setdefault(cid, i)`` notes the id of the
    call just appended (the dict's own call, as the flow grows)."""

    __slots__ = ("_ids", "_named", "_taken", "_count", "_done")

    def __init__(self, ids: CallIds) -> None:
        self._ids = ids
        self._named: dict[str, int] = {}   # id -> first position, for ids not c<own position>
        self._taken: set[int] = set()      # k: some named id is c<k + 1>
        self._count = 0                    # distinct ids
        calls = ids._calls[:len(ids)]
        if not ids._given and list(map(_call_id, calls)).count(None) == len(calls):
            self._count = len(calls)  # no labels: every id is c<own position>, all distinct
            calls = []
        for i, call in enumerate(calls):
            if call.id is not None or ids._given:
                self._note(i, ids[i])
            elif i not in self._taken:
                self._count += 1
        self._done = len(ids)      # positions noted

    def _note(self, i: int, cid: str) -> None:
        if cid == f"c{i + 1}":
            if i not in self._taken:
                self._count += 1
            return
        named = self._named
        if cid in named:
            return
        named[cid] = i
        m = _AUTO_ID.match(cid)
        if m is not None:
            k = int(m.group(1)) - 1
            self._taken.add(k)
            if k < i and self._ids[k] == cid:
                return  # call k (earlier) has it already
        self._count += 1

    def setdefault(self, cid: str, i: int) -> int:  # type: ignore[override]
        """Note ``cid``, the id of call ``i`` (the next position; calls are noted in order,
        after ``CallIds`` has them); returns the first call with that id."""
        if i == self._done:
            self._note(i, cid)
            self._done = i + 1
        return self[cid]

    def get(self, cid: Any, default: Any = None) -> Any:
        j = self._named.get(cid) if type(cid) is str else None
        m = _AUTO_ID.match(cid) if type(cid) is str else None
        if m is not None:
            k = int(m.group(1)) - 1
            ids = self._ids
            if k < len(ids) and (j is None or k < j) and ids[k] == cid:
                return k
        return default if j is None else j

    def __getitem__(self, cid: str) -> int:
        j = self.get(cid)
        if j is None:
            raise KeyError(cid)
        return j

    def __contains__(self, cid: object) -> bool:
        return self.get(cid) is not None

    def __iter__(self):
        seen: set[str] = set()
        for cid in self._ids:
            if cid not in seen:
                seen.add(cid)
                yield cid

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class Read:
    """One read of a call: the reference and the calls that may write it."""

    __slots__ = ("ref", "writers")

    def __init__(self, ref: Reference, writers: tuple[int, ...]) -> None:
        self.ref = ref
        self.writers = writers

    def __iter__(self):  # unpacks as ``ref, writers``
        yield self.ref
        yield self.writers

    def __repr__(self) -> str:
        return f"Read({self.ref.text()}, {self.writers!r})"


class WriterIndex:
    """Written key -> its writers, and proper prefix of a written key -> writers below it.

    Writers are ``(call index, output path index)`` pairs, read through :attr:`exact`
    (key ``(kind, *path)`` -> tuple of pairs), :attr:`below` (proper prefix -> list of
    pairs), :meth:`at` and :meth:`items`.

    Stored per kind, by the writer's own path tuple (the model's, which the readers of
    the path share): a key tuple, a pair and a tuple per written path were about 0.16 KB
    per call of a plan's check.  A writer stored alone is its call index when it writes
    its first output path (the common case), else the tuple of its pairs; the lists of
    writers below a prefix hold call indexes for first paths and pairs for the others.
    """

    __slots__ = ("paths", "subs", "kinds", "multi", "branching", "has_index", "_top", "_shared", "_ones")

    def __init__(self) -> None:
        self.paths: dict[str, dict[tuple, Any]] = {}   # kind -> written path -> writers
        self.subs: dict[str, dict[tuple, list]] = {}   # kind -> proper prefix of a written path -> writers below
        self.kinds: set[str] = set()       # kinds some call writes
        self.multi: list[tuple] = []       # keys with more than one writer
        self.branching = False             # some output has `||` alternatives
        self.has_index = False             # some written path has a list index
        self._top: dict[str, tuple] = {}   # kind -> (writers of (kind,), writers below it, paths, subs)
        self._shared: dict[tuple, tuple[int, ...]] = {}  # key -> every writer (large sets)
        self._ones: list[tuple[int] | None] = []  # j -> (j,): one tuple for every read of j alone

    def add(self, i: int, p: int, kind: str, path: tuple) -> None:
        """Index call ``i``'s output path ``p`` (``kind`` and the path of the reference)."""
        paths = self.paths.get(kind)
        if paths is None:
            paths = self.paths[kind] = {}
            subs = self.subs[kind] = {}
            self.kinds.add(kind)
        else:
            subs = self.subs[kind]
        entry = i if p == 0 else (i, p)
        w = paths.get(path)
        if w is None:
            paths[path] = i if p == 0 else (entry,)
        else:
            if type(w) is int:
                w = ((w, 0),)
            if len(w) == 1:
                self.multi.append((kind, *path))
            paths[path] = (*w, (i, p))
        if path:
            for x in path:
                if type(x) is int:
                    self.has_index = True
                    break
            for k in range(len(path)):
                sub = path[:k]
                b = subs.get(sub)
                if b is None:
                    subs[sub] = [entry]
                else:
                    b.append(entry)
        if self._top:
            self._top.pop(kind, None)
        if self._shared:
            self._shared.clear()

    def add_outputs(self, calls: Sequence[Call], positions: Sequence[int], readonly: list) -> None:
        """Index the output paths of ``calls`` (a whole plan, call ``positions[k]`` is
        ``calls[k]``) as :meth:`add` would one by one; writes to a read-only kind are listed
        in ``readonly`` as ``(call, path index)`` instead.  The common output, one path of
        one name that no call before wrote (``†state.n3 = ...``), is indexed inline."""
        add = self.add
        all_paths = self.paths
        self._top.clear()  # (the inline writes below do not drop what resolve() cached)
        self._shared.clear()
        kind_at = None   # the kind of the last fast write, with its paths and the writers below (kind,)
        kpaths: dict = {}
        below: list = []
        for i, call in zip(positions, calls):
            out = call.output
            if out is None:
                continue
            refs = out.paths
            if len(refs) == 1:
                ref = refs[0]
                kind, path = ref.kind, ref.path
                if kind is kind_at and len(path) == 1 and type(path[0]) is str and path not in kpaths:
                    kpaths[path] = i
                    below.append(i)
                    continue
            elif out.is_branching:
                self.branching = True
            kind_at = None
            for p, ref in enumerate(refs):
                kind = ref.kind
                if kind in READ_ONLY_KINDS or "@" in kind and base_kind(kind) in READ_ONLY_KINDS:
                    readonly.append((i, p))
                    continue
                add(i, p, kind, ref.path)
                if p == 0 and len(refs) == 1:
                    under = self.subs[kind].get(_EMPTY)
                    if under is not None:
                        kind_at, kpaths, below = kind, all_paths[kind], under

    # -- reading the index as (kind, *path) keys and (call, path index) pairs ---------

    def at(self, key: tuple) -> tuple[tuple[int, int], ...]:
        """The writers of exactly ``key``, as pairs (empty: none)."""
        paths = self.paths.get(key[0])
        w = paths.get(key[1:]) if paths else None
        if w is None:
            return _EMPTY
        return ((w, 0),) if type(w) is int else w

    def under(self, key: tuple) -> list[tuple[int, int]]:
        """The writers of keys that ``key`` is a proper prefix of, as pairs (empty: none)."""
        subs = self.subs.get(key[0])
        b = subs.get(key[1:]) if subs else None
        if not b:
            return []
        return [(e, 0) if type(e) is int else e for e in b]

    def items(self):
        """Every written key with its writers (pairs), kind by kind in first-write order."""
        for kind, paths in self.paths.items():
            for path, w in paths.items():
                yield (kind, *path), ((w, 0),) if type(w) is int else w

    def overlapping(self) -> bool:
        """Whether some written key is a proper prefix of another written key."""
        subs = self.subs
        return any(not paths.keys().isdisjoint(subs[kind]) for kind, paths in self.paths.items())

    @property
    def exact(self) -> "Mapping[tuple, tuple[tuple[int, int], ...]]":
        """Written key -> its writers (a read-only view)."""
        return _WrittenKeys(self)

    @property
    def below(self) -> "Mapping[tuple, list[tuple[int, int]]]":
        """Proper prefix of a written key -> the writers below it (a read-only view)."""
        return _PrefixKeys(self)

    def one_name_reads(self, calls: int) -> tuple[dict[str, tuple[Any, dict]], list]:
        """For :meth:`DataFlow._wire_all`: (kind -> ``(paths.get, subs)`` for each kind no
        call writes whole, the shared one-writer tuples by call position).

        A read of a one-name path ``(name,)`` of such a kind, whose ``paths.get`` is an int
        ``j`` (one writer, its first output path) and which is not in ``subs`` (nothing is
        written below it), has the writers ``(j,)``, as :meth:`resolve` finds, unless ``j``
        is the reader.  The list of shared ``(j,)`` tuples (None where not made yet) covers
        the positions below ``calls``."""
        ones = self._ones
        if len(ones) < calls:
            ones.extend([None] * (calls - len(ones)))
        table = {kind: (paths.get, self.subs[kind]) for kind, paths in self.paths.items() if _EMPTY not in paths}
        return table, ones

    def resolve(self, kind: str, path: tuple, reader: int | None) -> tuple[int, ...]:
        """The calls other than ``reader`` that may write ``(kind, *path)``, sorted."""
        top = self._top.get(kind)
        if top is None:
            paths = self.paths.get(kind)
            if paths is None:
                return _EMPTY  # nothing writes this kind
            subs = self.subs[kind]
            top = self._top[kind] = (paths.get(_EMPTY), subs.get(_EMPTY), paths, subs)
        first, more = top[0], None
        if not path:
            ext = top[1]
            if ext:
                if first is None:
                    first = ext
                else:
                    more = [ext]
        elif top[1] is not None:  # something is written below (kind,)
            paths, subs = top[2], top[3]
            if len(path) > 1:
                complete = True
                for k in range(1, len(path)):
                    sub = path[:k]
                    hit = paths.get(sub)
                    if hit is not None:
                        if first is None:
                            first = hit
                        else:
                            more = [hit] if more is None else more + [hit]
                    if sub not in subs:
                        complete = False
                        break  # nothing is written below sub: no longer prefix, no extension
            else:
                complete = True
            if complete:
                hit = paths.get(path)
                if hit is not None:
                    if first is None:
                        first = hit
                    else:
                        more = [hit] if more is None else more + [hit]
                ext = subs.get(path)
                if ext:
                    if first is None:
                        first = ext
                    else:
                        more = [ext] if more is None else more + [ext]
        if first is None:
            return _EMPTY
        if more is None:
            if type(first) is int:
                j = first
            elif len(first) == 1:
                j = first[0]
                if type(j) is not int:
                    j = j[0]
            else:
                j = -1
            if j >= 0:
                if j == reader:
                    return _EMPTY
                ones = self._ones
                if j >= len(ones):
                    ones.extend([None] * (j + 1 - len(ones)))
                one = ones[j]
                if one is None:
                    one = ones[j] = (j,)
                return one
            if len(first) < 8:
                return tuple(sorted({e if type(e) is int else e[0] for e in first} - {reader}))
        # Many writers (a prefix read over a wide fan-out): one sorted tuple per key, shared
        # by every reader that is not itself among the writers.
        key = (kind, *path)
        every = self._shared.get(key)
        if every is None:
            hits = (first,) if more is None else (first, *more)
            every = self._shared[key] = tuple(sorted({
                e if type(e) is int else e[0] for hit in hits for e in ((hit,) if type(hit) is int else hit)}))
        if reader is not None:
            at = bisect_left(every, reader)
            if at < len(every) and every[at] == reader:
                return every[:at] + every[at + 1:]
        return every


class _IndexView(Mapping):
    """A read-only view of a :class:`WriterIndex` as ``(kind, *path) -> writers``; ``_find``
    gives a key's writers (empty when none)."""

    __slots__ = ("_index",)

    def __init__(self, index: WriterIndex) -> None:
        self._index = index

    def _find(self, key: tuple) -> Any:
        raise NotImplementedError

    def _by_kind(self) -> dict:
        """kind -> {path: ...}: the keys this view lists, by kind."""
        raise NotImplementedError

    def __iter__(self):
        for kind, paths in self._by_kind().items():
            for path in paths:
                yield (kind, *path)

    def __len__(self) -> int:
        return sum(len(paths) for paths in self._by_kind().values())

    def __getitem__(self, key: tuple) -> Any:
        w = self._find(key) if type(key) is tuple and key else None
        if not w:
            raise KeyError(key)
        return w

    def get(self, key: tuple, default: Any = None) -> Any:
        w = self._find(key) if type(key) is tuple and key else None
        return w if w else default


class _WrittenKeys(_IndexView):
    """:attr:`WriterIndex.exact`: written key -> its writers as pairs."""

    __slots__ = ()

    def _find(self, key: tuple) -> tuple[tuple[int, int], ...]:
        return self._index.at(key)

    def __contains__(self, key: object) -> bool:
        return type(key) is tuple and bool(key) and bool(self._index.at(key))

    def _by_kind(self) -> dict:
        return self._index.paths

    def items(self):  # type: ignore[override]
        return self._index.items()

    def __repr__(self) -> str:
        return repr(dict(self._index.items()))


class _PrefixKeys(_IndexView):
    """:attr:`WriterIndex.below`: proper prefix of a written key -> the writers below it."""

    __slots__ = ()

    def _find(self, key: tuple) -> list[tuple[int, int]]:
        return self._index.under(key)

    def __contains__(self, key: object) -> bool:
        if type(key) is not tuple or not key:
            return False
        subs = self._index.subs.get(key[0])  # type: ignore[index]
        return bool(subs) and bool(subs.get(key[1:]))  # type: ignore[index]

    def _by_kind(self) -> dict:
        return self._index.subs

    def __repr__(self) -> str:
        return repr({key: self[key] for key in self})


class GroupWiring:
    """How the calls of every copy of a group (a map's body) are wired among themselves,
    worked out once (:meth:`DataFlow.add_group`).

    ``known``: per read of the group's calls, in :meth:`DataFlow.reads` order (inline
    output last), the writers as offsets within the group, or None for a read wired
    against the flow.  ``plain``: when every call's parameters are literals or whole
    references (no map, inline output or ``@after``), per call ``(positions of its
    reference parameters, their offsets from known, its dependencies as offsets or None
    when a read is wired against the flow)``, which :meth:`DataFlow.add_group` follows
    without walking the calls; else None."""

    __slots__ = ("known", "plain")

    def __init__(self, calls: Sequence[Call], known: Sequence[tuple[int, ...] | None]) -> None:
        self.known = tuple(known)
        self.plain: tuple | None = None
        plan = []
        at = 0
        for call in calls:
            if call.map is not None or call.inline_output is not None or call.after:
                return
            where = []
            for x, p in enumerate(call.params):
                tv = type(p.value)
                if tv is Reference:
                    where.append(x)
                elif tv is not Literal:
                    return
            rels = self.known[at:at + len(where)]
            at += len(where)
            drel = None
            if all(r is not None for r in rels):
                drel = tuple(sorted({y for r in rels for y in r}))  # type: ignore[union-attr]
            plan.append((tuple(where), rels, drel))
        if at == len(self.known):
            self.plain = tuple(plan)

    def __iter__(self):  # what add_group reads when it walks the calls
        return iter(self.known)


def _merge_writers(d: tuple, acc: set | None, w: tuple) -> tuple[tuple, set | None]:
    """A call's dependencies so far (``d``: the first writers tuple met, shared; ``acc``: a
    set once a second one differs) with writers ``w`` added (not empty, not ``d``)."""
    if d is _EMPTY:
        return w, acc
    if acc is None:
        return d, {*d, *w}
    acc.update(w)
    return d, acc


class DataFlow:
    """The data-flow graph of a plan's calls (see the module docstring).

    Per call ``i``: its reads are ``reads(i)`` (references in source order, each with
    its writers); ``control[i]`` the calls its ``@after`` names; ``deps[i]`` every call
    it waits for as a sorted tuple of indexes (data + control); ``run_deps[i]`` the same
    plus the writers of references inside an inline ``_output`` (what the runtime waits
    for).  ``unknown_after`` lists ``(call, name)`` for ``@after`` names that are no
    call's id; ``readonly_writes`` lists ``(call, path index)`` writes to read-only kinds.
    """

    def __init__(self, ids: Sequence[str] = ()) -> None:
        self.calls: list[Call] = []
        self.ids: list[str] = list(ids)
        self.index: dict[str, int] = {}
        self.writers = WriterIndex()
        self.read_refs: list[Reference] = []
        self.read_writers: list[tuple[int, ...]] = []
        self.read_offs: list[int] = [0]
        self.control: list[frozenset[int]] = []
        self.deps: list[tuple[int, ...]] = []
        self.inline_reads: dict[int, tuple[Read, ...]] = {}
        self.fallbacks: set[int] = set()   # calls reading a `||` expression
        self.unknown_after: list[tuple[int, str]] = []
        self.readonly_writes: list[tuple[int, int]] = []
        self.backward = True          # every dependency points to an earlier call
        self.has_maps = False         # some call is a map (sophon_dsl.maps)
        self._dependents: list[Any] | None = None
        self._readers: dict[tuple, list[int]] | None = None   # streaming: key -> read slots
        self._readers_below: dict[tuple, list[int]] | None = None
        self._pending_after: dict[str, list[int]] = {}       # streaming: id named before it came
        self._positions: tuple[int, ...] = ()                # build(): 0..n-1, see there

    # -- building ----------------------------------------------------------------

    @classmethod
    def build(cls, calls: Sequence[Call], ids: Sequence[str] | None = None) -> "DataFlow":
        """The whole plan's flow at once (every write indexed before any read resolves).
        ``ids`` None: each call's own id (``Plan.call_ids``), made when read (:class:`CallIds`)."""
        flow = cls(() if ids is None else ids)
        flow.calls = list(calls)
        # one int object per position, shared by the index, the writers, the read offsets
        # and the order (an int above 256 is 32 bytes; a plan's tables held four per call)
        positions = flow._positions = tuple(range(len(flow.calls)))
        if ids is None:
            flow.ids = CallIds(flow.calls)  # type: ignore[assignment]
            flow.index = IdIndex(flow.ids)  # type: ignore[arg-type, assignment]
        else:
            index: dict[str, int] = {}
            for i, cid in zip(positions, flow.ids):
                index.setdefault(cid, i)
            flow.index = index
        flow.writers.add_outputs(calls, positions, flow.readonly_writes)
        flow._wire_all(calls)
        return flow

    def _wire_all(self, calls: Sequence[Call]) -> None:
        """:meth:`_wire` for every call of a whole plan, in one loop (the checker's and so
        every run's setup cost: locals hoisted out of the per-call path).

        A call's references are listed first (parameters in order, as :meth:`_wire` finds
        them), then resolved in one loop; a one-name read of a kind nobody writes whole
        (``†state.n3``: the common read) is resolved inline from the writer index
        (:meth:`WriterIndex.one_name_reads`), the others through :meth:`WriterIndex.resolve`."""
        windex = self.writers
        resolve = windex.resolve
        quick, ones = windex.one_name_reads(len(calls))
        quick_get = quick.get
        refs, wss = self.read_refs, self.read_writers
        ref_add, ws_add = refs.append, wss.append
        offs_add, control_add, deps_add = self.read_offs.append, self.control.append, self.deps.append
        collect_value = self._collect_value
        backward = True
        positions = self._positions
        n = len(positions)
        for i, call in enumerate(calls):
            d = _EMPTY
            acc = None
            for p in call.params:
                v = p.value
                tv = type(v)
                if tv is Literal:
                    continue
                if tv is Reference:
                    items: Any = (v,)
                elif tv is ListValue:
                    items = v.items
                elif tv is ObjectValue:  # (as a list: its entries in order)
                    items = map(_second, v.entries)
                else:
                    items = (v,)
                for x in items:
                    if type(x) is not Reference:
                        if type(x) is not Literal:  # references inside: listed, then resolved below
                            at = len(refs)
                            collect_value(i, x)
                            for r in refs[at:]:
                                w = resolve(r.kind, r.path, i)
                                ws_add(w)
                                if w and w is not d:
                                    d, acc = _merge_writers(d, acc, w)
                        continue
                    ref_add(x)
                    path = x.path
                    q = quick_get(x.kind)
                    if q is not None and len(path) == 1 and type(j := q[0](path)) is int and j != i \
                            and path not in q[1]:
                        w = ones[j]
                        if w is None:
                            w = ones[j] = (j,)
                    else:
                        w = resolve(x.kind, path, i)
                    ws_add(w)
                    if not w or w is d:
                        continue
                    # (_merge_writers inline: the common read, once per reference of the plan)
                    if d is _EMPTY:
                        d = w
                    elif acc is None:
                        acc = {*d, *w}
                    else:
                        acc.update(w)
            if call.map is not None:  # a map also reads what its body reads outside the item
                self.has_maps = True
                for r in outer_reads(call.map):
                    ref_add(r)
                    w = resolve(r.kind, r.path, i)
                    ws_add(w)
                    if w and w is not d:
                        d, acc = _merge_writers(d, acc, w)
            end = len(refs)
            offs_add(positions[end] if end < n else end)
            if call.after:
                ctl = self._after(i, call)
                control_add(ctl)
                if ctl:
                    acc = {*d, *ctl} if acc is None else acc | ctl
            else:
                control_add(_NO_CALLS)
            if acc is not None:
                d = tuple(sorted(acc))
            if d and d[-1] >= i:  # (only @after can name the call itself)
                backward = False
            deps_add(d)
            if call.inline_output is not None:
                self._wire_inline(i, call)
        if not backward:
            self.backward = False

    def _collect_value(self, i: int, value: Value) -> None:
        """List the references of a value that is not a plain reference, in the order
        :meth:`_wire_value` reads them (and note whether it has a `||`); their writers are
        resolved by the caller (:meth:`_wire_all`)."""
        refs = self.read_refs
        stack: list[Any] = [value]
        while stack:
            v = stack.pop()
            tv = type(v)
            if tv is Reference:
                refs.append(v)
            elif tv is ListValue:
                stack.extend(reversed(v.items))
            elif tv is ObjectValue:
                stack.extend([x for _, x in reversed(v.entries)])
            elif tv is Expression:
                if v.op == "||":
                    self.fallbacks.add(i)
                refs.extend(v.operands)
            elif tv is Template:
                for part in v.parts:
                    if type(part) is Reference:
                        refs.append(part)

    def _index_writes(self, i: int, call: Call) -> None:
        out = call.output
        if out is None:
            return
        paths = out.paths
        if out.is_branching:
            self.writers.branching = True
        add = self.writers.add
        for p, ref in enumerate(paths):
            kind = ref.kind
            if kind in READ_ONLY_KINDS or "@" in kind and base_kind(kind) in READ_ONLY_KINDS:
                self.readonly_writes.append((i, p))
            else:
                add(i, p, kind, ref.path)

    def _wire(self, i: int, call: Call, resolve: Any = None) -> None:
        """Resolve call ``i``'s reads and ``@after`` names; append its dependencies.
        (``resolve``: where a read's writers come from, the writer index by default.)"""
        resolve = resolve or self.writers.resolve
        refs, wss = self.read_refs, self.read_writers
        start = len(refs)
        for p in call.params:
            v = p.value
            tv = type(v)
            if tv is Reference:
                refs.append(v)
                wss.append(resolve(v.kind, v.path, i))
            elif tv is ListValue:
                for x in v.items:
                    tx = type(x)
                    if tx is Reference:
                        refs.append(x)
                        wss.append(resolve(x.kind, x.path, i))
                    elif tx is not Literal:
                        self._wire_value(i, x, resolve)
            elif tv is not Literal:
                self._wire_value(i, v, resolve)
        if call.map is not None:  # (as in _wire_all)
            self.has_maps = True
            for r in outer_reads(call.map):
                refs.append(r)
                wss.append(resolve(r.kind, r.path, i))
        end = len(refs)
        self.read_offs.append(end)
        ctl = self._after(i, call) if call.after else _NO_CALLS
        self.control.append(ctl)
        if end > start:
            if end - start == 1 and not ctl:
                d = wss[start]
            else:
                acc = set(ctl)
                for k in range(start, end):
                    acc.update(wss[k])
                d = tuple(sorted(acc))
        else:
            d = tuple(sorted(ctl)) if ctl else _EMPTY
        if d and d[-1] >= i:  # (only @after can name the call itself)
            self.backward = False
        self.deps.append(d)
        if call.inline_output is not None:
            self._wire_inline(i, call, resolve)

    def _wire_inline(self, i: int, call: Call, resolve: Any = None) -> None:
        resolve = resolve or self.writers.resolve
        inline = tuple(Read(r, resolve(r.kind, r.path, i)) for r in references(call.inline_output))
        if inline:
            self.inline_reads[i] = inline
            if _has_fallback(call.inline_output):
                self.fallbacks.add(i)

    def _wire_value(self, i: int, value: Value, resolve: Any = None) -> None:
        """The reads of a value that is not a plain reference (and whether it has a `||`):
        :meth:`_collect_value`'s references, each with its writers."""
        resolve = resolve or self.writers.resolve
        refs, wss = self.read_refs, self.read_writers
        at = len(refs)
        self._collect_value(i, value)
        for r in refs[at:]:
            wss.append(resolve(r.kind, r.path, i))

    def _after(self, i: int, call: Call) -> frozenset[int]:
        found = set()
        index = self.index
        for name in call.after:
            j = index.get(name)
            if j is None:
                self.unknown_after.append((i, name))
            else:
                found.add(j)  # a call after itself is a cycle (E302), kept as an edge
        return frozenset(found)

    def listed_ids(self) -> list[str]:
        """The ids as a list and the index as a dict from here on (a run reads them per
        call; a flow built without ids makes them when read); returns the list."""
        if type(self.ids) is not list:
            self.ids = ids = self.ids.listed()
            index = dict(zip(ids, self._positions if len(self._positions) == len(ids) else range(len(ids))))
            if len(index) != len(ids):  # a duplicate id: the first call with it
                index = {}
                for i, cid in enumerate(ids):
                    index.setdefault(cid, i)
            self.index = index
        return self.ids

    # -- growing (streamed plans) ------------------------------------------------

    def add_call(self, call: Call, cid: str) -> list[tuple[int, int]]:
        """Append one call (streaming) and wire it against the calls so far.

        Returns the new edges to *earlier* calls as ``(reader, writer)`` pairs: the new
        call writes a path an earlier call reads (a forward reference now has a writer),
        or an earlier ``@after`` named the new call's id.  Cost: proportional to the
        call, its reads and those edges.
        """
        if self._readers is None:
            self._index_reads(0, len(self.read_refs))
        i = len(self.calls)
        self.calls.append(call)
        self.ids.append(cid)
        self.index.setdefault(cid, i)
        self._index_writes(i, call)
        start = len(self.read_refs)
        self._wire(i, call)
        self._index_reads(start, len(self.read_refs))
        new: list[tuple[int, int]] = []
        out = call.output
        if out is not None:
            for ref in out.paths:
                if base_kind(ref.kind) in READ_ONLY_KINDS:
                    continue
                for slot in self._readers_of(_key(ref.kind, ref.path) if ref.path else (ref.kind,)):
                    reader = self._reader_of(slot)
                    if reader == i:
                        continue
                    ws = self.read_writers[slot]
                    if i not in ws:
                        self.read_writers[slot] = (*ws, i)  # i is the largest index so far
                        if i not in self.deps[reader]:
                            self.deps[reader] = (*self.deps[reader], i)
                            new.append((reader, i))
        for reader in self._pending_after.pop(cid, ()):
            if reader != i and i not in self.deps[reader]:
                self.control[reader] = self.control[reader] | {i}
                self.deps[reader] = (*self.deps[reader], i)
                self.unknown_after.remove((reader, cid))
                new.append((reader, i))
        for j, name in self.unknown_after:
            if j == i:
                self._pending_after.setdefault(name, []).append(i)
        if new:
            self.backward = False
        dependents = self._dependents
        if dependents is not None:  # kept up to date rather than rebuilt per arrival
            dependents.append([])
            for d in self.run_deps(i):
                self._add_dependent(d, i)
            for reader, _ in new:
                self._add_dependent(i, reader)
        return new

    def add_group(self, calls: Sequence[Call], ids: Sequence[str],
                  known: Sequence[tuple[int, ...] | None]) -> range:
        """Append calls whose wiring among themselves was worked out once for all their
        copies (a map item's calls: its body analysed once, ``sophon_dsl.maps``).

        ``known`` holds, for each read of the group's calls (call by call, each in
        :meth:`reads` order, inline output last), the writers as offsets within the group,
        or None for a read wired against the flow like :meth:`add_call`'s.  The group
        writes only its own paths (an item's kinds): no earlier call gains an edge, and its
        writes are not indexed.  Cost: the calls and their reads, no lookup for a known read."""
        if type(known) is GroupWiring and known.plain is not None:
            first = self.group_joiner(known)(calls, ids)
            return range(first, first + len(calls))
        first = len(self.calls)
        self.calls.extend(calls)
        self.ids.extend(ids)
        index = self.index
        for k, cid in enumerate(ids):  # every id first: an @after may name a later call of the group
            index.setdefault(cid, first + k)
        real = self.writers.resolve
        slots = len(self.read_refs)
        unknown = len(self.unknown_after)
        nxt = iter(known).__next__

        def resolve(kind: str, path: tuple, reader: int) -> tuple[int, ...]:
            rel = nxt()
            if rel is None:
                return real(kind, path, reader)
            if not rel:
                return _EMPTY
            return (first + rel[0],) if len(rel) == 1 else tuple([first + x for x in rel])

        wire = self._wire
        for b, call in enumerate(calls):
            wire(first + b, call, resolve)
        for j, name in self.unknown_after[unknown:]:  # named before it came (as in add_call)
            self._pending_after.setdefault(name, []).append(j)
        if self._readers is not None:  # a growing plan: a later arrival may write an outer read
            self._index_reads(slots, len(self.read_refs))
        dependents = self._dependents
        if dependents is not None:
            dependents.extend([] for _ in calls)
            for i in range(first, first + len(calls)):
                for d in self.run_deps(i):
                    self._add_dependent(d, i)
        return range(first, first + len(calls))

    def group_joiner(self, known: "GroupWiring") -> Any:
        """``join(calls, ids) -> first index``: :meth:`add_group` of one group of ``known``'s
        wiring, for adding many (a map's items).  What add_group looks up per group is looked
        up here once (the per-read and per-call lists grow in place, never replaced), and a
        group whose calls are plain (``known.plain``) is wired from its plan: no closure, walk
        or test per read; then ``join(calls, ids, groups)`` adds several groups at once."""
        plan = known.plain if type(known) is GroupWiring else None
        if plan is None:
            add_group = self.add_group

            def join_any(calls: Sequence[Call], ids: Sequence[str], groups: int = 1) -> int:
                assert groups == 1
                return add_group(calls, ids, known).start
            return join_any
        all_calls = self.calls  # (ids and index are read per group: listed_ids may replace them)
        refs, wss, all_deps = self.read_refs, self.read_writers, self.deps
        ref_add, ws_add = refs.append, wss.append
        offs_add, control_add, deps_add = self.read_offs.append, self.control.append, all_deps.append
        real = self.writers.resolve
        inner = any(drel for _, _, drel in plan) or any(drel is None for _, _, drel in plan)

        size = len(plan)

        def join(calls: Sequence[Call], ids: Sequence[str], groups: int = 1) -> int:
            """Add ``groups`` groups (their calls and ids one group after the other)."""
            first = i = len(all_calls)
            all_calls.extend(calls)
            self.ids.extend(ids)
            index = self.index
            for cid in ids:
                index.setdefault(cid, i)
                i += 1
            i = group = first
            b = 0
            slots = len(refs)
            for call, (where, rels, drel) in zip(calls, plan if groups == 1 else plan * groups):
                if b == size:  # the next group
                    group += size
                    b = 0
                b += 1
                params = call.params
                start = len(refs)
                for x, rel in zip(where, rels):
                    v = params[x].value
                    ref_add(v)
                    if rel is None:
                        ws_add(real(v.kind, v.path, i))
                    elif not rel:
                        ws_add(_EMPTY)
                    elif len(rel) == 1:
                        ws_add((group + rel[0],))
                    else:
                        ws_add(tuple([group + y for y in rel]))
                end = len(refs)
                offs_add(end)
                control_add(_NO_CALLS)
                if drel is not None:  # every read known: the dependencies worked out once
                    d = wss[start] if end - start == 1 else tuple([group + y for y in drel]) if drel else _EMPTY
                elif end - start == 1:
                    d = wss[start]
                else:
                    acc: set = set()
                    for k in range(start, end):
                        acc.update(wss[k])
                    d = tuple(sorted(acc))
                if d and d[-1] >= i:
                    self.backward = False
                deps_add(d)
                i += 1
            if self._readers is not None:  # a growing plan: a later arrival may write an outer read
                self._index_reads(slots, len(refs))
            dependents = self._dependents
            if dependents is not None:
                dependents.extend([[] for _ in calls])
                if inner:
                    add_dependent = self._add_dependent
                    for i in range(first, first + len(calls)):
                        for d in all_deps[i]:
                            add_dependent(d, i)
            return first
        return join

    def _add_dependent(self, d: int, i: int) -> None:
        assert self._dependents is not None
        cur = self._dependents[d]
        if type(cur) is not list:
            cur = self._dependents[d] = list(cur)
        cur.append(i)

    def _index_reads(self, start: int, end: int) -> None:
        if self._readers is None:
            self._readers, self._readers_below = {}, {}
        readers, below = self._readers, self._readers_below
        assert below is not None
        for slot in range(start, end):
            key = self.read_refs[slot].key
            readers.setdefault(key, []).append(slot)
            for k in range(1, len(key)):
                below.setdefault(key[:k], []).append(slot)

    def _readers_of(self, key: tuple) -> list[int]:
        """Read slots whose key is ``key``, a prefix of it or an extension of it."""
        assert self._readers is not None and self._readers_below is not None
        return _overlapping(self._readers, self._readers_below, key)

    def _reader_of(self, slot: int) -> int:
        return bisect_left(self.read_offs, slot + 1) - 1

    # -- questions ---------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.calls)

    def reads(self, i: int) -> tuple[Read, ...]:
        """Call ``i``'s reads (parameter references in source order) with their writers."""
        a, b = self.read_offs[i], self.read_offs[i + 1]
        refs, wss = self.read_refs, self.read_writers
        return tuple(Read(refs[k], wss[k]) for k in range(a, b))

    def read_range(self, i: int) -> range:
        """Positions of call ``i``'s reads in :attr:`read_refs` / :attr:`read_writers`."""
        return range(self.read_offs[i], self.read_offs[i + 1])

    def run_deps(self, i: int) -> tuple[int, ...]:
        """What the runtime waits for: :attr:`deps` plus the writers read by inline output."""
        inline = self.inline_reads.get(i)
        if inline is None:
            return self.deps[i]
        acc = set(self.deps[i])
        for r in inline:
            acc.update(r.writers)
        return tuple(sorted(acc))

    def dependents(self) -> list[tuple[int, ...]]:
        """For each call, the calls that wait for it (the reverse of :meth:`run_deps`).

        Entries are tuples (ints in a tuple are not tracked by the cyclic GC, a list per
        call would be, for as long as the run lives); a streamed plan's entries become
        lists when they grow."""
        if self._dependents is None:
            # counted into one flat list first, not a list per call: a burst of 10,000
            # short-lived lists is promoted by the cyclic GC and brings a full collection
            n = len(self.calls)
            inline = self.inline_reads
            deps = self.deps if not inline else [self.run_deps(i) for i in range(n)]
            count = [0] * (n + 1)
            for ds in deps:
                for d in ds:
                    count[d + 1] += 1
            count = list(accumulate(count))  # count[d]: where d's dependents start in flat
            flat = [0] * count[n]
            pos = count[:n]
            for i, ds in enumerate(deps):
                for d in ds:
                    flat[pos[d]] = i
                    pos[d] += 1
            self._dependents = [tuple(flat[a:b]) if a != b else _EMPTY for a, b in zip(count, count[1:])]
        return self._dependents

    def topo_order(self) -> tuple[tuple[int, ...], bool]:
        """A topological order (smallest index first among ready calls) and whether the
        graph has a cycle (then the calls on cycles come last, in position order)."""
        n = len(self.calls)
        if self.backward:
            return (self._positions if len(self._positions) == n else tuple(range(n))), False
        indeg = [len(d) for d in self.deps]
        succ = self.successors()
        heap = [i for i in range(n) if indeg[i] == 0]
        heapq.heapify(heap)
        order = []
        while heap:
            i = heapq.heappop(heap)
            order.append(i)
            for s in succ[i]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(heap, s)
        if len(order) == n:
            return tuple(order), False
        done = set(order)
        order.extend(i for i in range(n) if i not in done)
        return tuple(order), True

    def successors(self) -> list[list[int]]:
        """Edges from a dependency to its dependents over :attr:`deps` (checker edges)."""
        succ: list[list[int]] = [[] for _ in self.calls]
        for i, ds in enumerate(self.deps):
            for d in ds:
                succ[d].append(i)
        return succ

    def sccs(self) -> list[list[int]]:
        """Strongly connected components (Tarjan, iterative) over :meth:`successors`."""
        succ = self.successors()
        n = len(succ)
        index_of = [-1] * n
        low = [0] * n
        on_stack = [False] * n
        stack: list[int] = []
        out: list[list[int]] = []
        counter = 0
        for root in range(n):
            if index_of[root] != -1:
                continue
            work = [(root, 0)]
            while work:
                v, pos = work[-1]
                if pos == 0:
                    index_of[v] = low[v] = counter
                    counter += 1
                    stack.append(v)
                    on_stack[v] = True
                recurse = False
                edges = succ[v]
                while pos < len(edges):
                    w = edges[pos]
                    pos += 1
                    if index_of[w] == -1:
                        work[-1] = (v, pos)
                        work.append((w, 0))
                        recurse = True
                        break
                    if on_stack[w]:
                        low[v] = min(low[v], index_of[w])
                if recurse:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
                if low[v] == index_of[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack[w] = False
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
        return out

    def cycles(self) -> list[list[int]]:
        """The strongly connected components that are cycles (size > 1, or a self-edge)."""
        return [c for c in self.sccs() if len(c) > 1 or c[0] in self.deps[c[0]]]

    def reaches(self, a: int, b: int, pos: Sequence[int]) -> bool:
        """Whether ``b`` (transitively) depends on ``a``; ``pos`` is each call's place in a
        topological order, used to prune the search."""
        deps = self.deps
        if a in deps[b]:
            return True
        limit = pos[a]
        stack = [b]
        seen = {b}
        while stack:
            v = stack.pop()
            for d in deps[v]:
                if d == a:
                    return True
                if d not in seen and pos[d] > limit:
                    seen.add(d)
                    stack.append(d)
        return False

    def all_read_keys(self, extra: Iterable[Reference] = ()) -> tuple[set[tuple], set[tuple]]:
        """Every key read (plus ``extra`` references) and every proper prefix of one."""
        keys: set[tuple] = set()
        below: set[tuple] = set()
        for r in (*self.read_refs, *extra):
            key = r.key
            keys.add(key)
            for k in range(1, len(key)):
                below.add(key[:k])
        return keys, below
