"""The run's context: an append-only log of data messages and its resolved view.

Every write is a :class:`Message` ``(kind, path, value, method, call, date)``
appended to the log; nothing is ever changed in place.  Reads resolve as in
Acts 008: newest to oldest, a ``set`` stops the search, ``merge`` (deep),
``assign`` (shallow), ``push`` and ``concat`` collect and are applied oldest
to newest.  Folding the log chronologically with path-scoped writes gives
exactly that result, so :class:`StateLog` keeps one materialised view per
kind, updated incrementally on each append.
"""

from __future__ import annotations

import copy
import time
from math import isfinite
from dataclasses import dataclass
from enum import Enum
from datetime import datetime, timezone
from typing import Any, Iterable

from ..model import OutputMethod

__all__ = ["MISSING", "Message", "StateLog", "apply_write", "get_path", "json_copies", "json_copy", "iso_time",
           "now_iso", "to_json_value"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


_clock = time.time
_iso_cache: list = [None, ""]  # [whole second, "YYYY-MM-DDTHH:MM:SS"]


def now_iso() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    return iso_time(_clock())


def iso_time(t: float) -> str:
    """A POSIX timestamp as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (UTC).

    The run records raw timestamps (``time.time()``, three per call) and formats them
    only when a record, a log message or the JSON result is read; the date and time of
    day are formatted once per second, only the microseconds each call."""
    sec = int(t)
    cache = _iso_cache
    if cache[0] != sec:
        cache[1] = datetime.fromtimestamp(sec, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        cache[0] = sec
    us = int((t - sec) * 1e6)
    return f"{cache[1]}.{us if us < 999999 else 999999:06d}Z"


_ATOMIC = frozenset({str, int, float, bool, type(None)})
_SET = OutputMethod.SET


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (fast path for scalars and plain dicts / lists).

    JSON values built by :func:`to_json_value` share no containers and have no
    cycles, so a plain recursive copy is a deep copy; anything else goes to
    :func:`copy.deepcopy`."""
    t = type(value)
    if t in _ATOMIC:
        return value
    if t is dict:  # copied at once, then only the containers in it walked (no comprehension frame)
        atomic = _ATOMIC
        out = value.copy()
        for k, v in out.items():
            if type(v) not in atomic:
                out[k] = json_copy(v)
        return out
    if t is list:
        atomic = _ATOMIC
        return [v if type(v) in atomic else json_copy(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return copy.deepcopy(value)


def json_copies(value: Any) -> tuple[Any, Any]:
    """Two deep copies of a JSON value, independent of it and of each other, made in one
    walk (what :meth:`StateLog.write` keeps: the message's and the view's): each container
    is copied twice where it is visited (``dict.copy``, ``list.copy``) and only the
    containers inside it are walked, so a list of small objects (a map's result) costs one
    Python frame per object instead of two per copy.  Non-JSON values go to
    :func:`json_copy` (the same copies as two calls of it)."""
    t = type(value)
    atomic = _ATOMIC
    if t is dict:
        a = value.copy()
        b = value.copy()
        for k, v in a.items():
            if type(v) not in atomic:
                a[k], b[k] = json_copies(v)
        return a, b
    if t is list:
        a = value.copy()
        b = value.copy()
        for n, v in enumerate(a):
            tv = type(v)
            if tv in atomic:
                continue
            if tv is dict:  # (the dict branch above, inline: a list of objects, as a map's result)
                c = v.copy()
                d = v.copy()
                for k, x in c.items():
                    if type(x) not in atomic:
                        c[k], d[k] = json_copies(x)
                a[n] = c
                b[n] = d
            else:
                a[n], b[n] = json_copies(v)
        return a, b
    if t in atomic:
        return value, value
    a = json_copy(value)
    return a, json_copy(a)


def get_path(root: Any, path: Iterable) -> Any:
    """The value at ``path`` inside ``root``, or :data:`MISSING`."""
    cur = root
    for seg in path:
        ts = type(seg)
        if ts is str and type(cur) is dict:  # the common steps first, at two type tests
            cur = cur.get(seg, MISSING)
            if cur is MISSING:
                return MISSING
        elif ts is int and type(cur) is list:
            if -len(cur) <= seg < len(cur):
                cur = cur[seg]
            else:
                return MISSING
        elif isinstance(seg, int) and not isinstance(seg, bool):
            if isinstance(cur, list) and -len(cur) <= seg < len(cur):
                cur = cur[seg]
            else:
                return MISSING
        elif isinstance(cur, dict) and seg in cur:
            cur = cur[seg]
        else:
            return MISSING
    return cur


def _deep_merge(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for k, v in new.items():
            out[k] = _deep_merge(out[k], v) if k in out else v
        return out
    return new


def _combine(old: Any, new: Any, method: OutputMethod) -> Any:
    if method is OutputMethod.SET or old is MISSING:
        if method is OutputMethod.PUSH:
            return [new]
        if method is OutputMethod.CONCAT:
            return list(new) if isinstance(new, list) else [new]
        return new
    if method is OutputMethod.MERGE:
        return _deep_merge(old, new)
    if method is OutputMethod.ASSIGN:
        if isinstance(old, dict) and isinstance(new, dict):
            return {**old, **new}
        return new
    if method is OutputMethod.PUSH:
        return [*old, new] if isinstance(old, list) else [old, new]
    if method is OutputMethod.CONCAT:
        items = new if isinstance(new, list) else [new]
        return [*old, *items] if isinstance(old, list) else [old, *items]
    raise AssertionError(f"unknown output method {method!r}")  # OutputMethod has these five


def apply_write(root: Any, path: tuple, value: Any, method: OutputMethod) -> Any:
    """Return a new root with ``value`` combined at ``path``; ``root`` is not mutated
    (containers along the path are copied, the rest is shared)."""
    if not path:
        return _combine(root, value, method)
    seg, rest = path[0], path[1:]
    if isinstance(seg, int) and not isinstance(seg, bool):
        lst = list(root) if isinstance(root, list) else []
        old = lst[seg] if seg < len(lst) else MISSING
        while len(lst) <= seg:
            lst.append(None)
        lst[seg] = apply_write(old, rest, value, method)
        return lst
    obj = dict(root) if isinstance(root, dict) else {}
    obj[seg] = apply_write(obj.get(seg, MISSING), rest, value, method)
    return obj


def _apply_in_place(root: Any, path: tuple, value: Any, method: OutputMethod) -> Any:
    """Like :func:`apply_write` but mutates the view's own containers (O(depth) per write).

    Safe because the view never shares objects: messages keep their own copy and
    every read hands out a copy."""
    if not path:
        return _combine(root, value, method)
    if not isinstance(root, (dict, list)) or (isinstance(path[0], int) != isinstance(root, list)):
        root = [] if isinstance(path[0], int) and not isinstance(path[0], bool) else {}
    node = root
    for depth, seg in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, list):
            old = node[seg] if seg < len(node) else MISSING
            while len(node) <= seg:
                node.append(None)
        else:
            old = node.get(seg, MISSING)
        if last:
            node[seg] = _combine(old, value, method)
            break
        nxt = path[depth + 1]
        want_list = isinstance(nxt, int) and not isinstance(nxt, bool)
        if want_list and not isinstance(old, list):
            old = []
            node[seg] = old
        elif not want_list and not isinstance(old, dict):
            old = {}
            node[seg] = old
        node = old
    return root


@dataclass(frozen=True, slots=True)
class Message:
    """One data message of the log. ``call`` is the writing call's id (None for initial data)."""

    seq: int
    kind: str
    path: tuple
    value: Any
    method: OutputMethod
    call: str | None
    date: str

    def to_json(self) -> dict:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "path": list(self.path),
            "value": self.value,
            "method": self.method.value,
            "call": self.call,
            "date": self.date,
        }


_METHODS = {m.value: m for m in OutputMethod}


def _date(d: str | float) -> str:
    """A log entry's date: given as text, or recorded as a timestamp (formatted here)."""
    return d if type(d) is str else iso_time(d)


class StateLog:
    """Append-only log with an incrementally maintained resolved view per kind.

    Entries are kept as plain tuples ``(kind, path, value, method name, call, date)``, the
    date as text or as a ``time.time()`` timestamp formatted when read (the position is the sequence
    number): a tuple of strings and numbers is untracked by the cyclic GC, whereas one object per
    write stays tracked for the whole run.
    :attr:`messages` builds the :class:`Message` objects when asked.
    """

    def __init__(self) -> None:
        self._entries: list[tuple] = []
        self._views: dict[str, Any] = {}

    @property
    def messages(self) -> list[Message]:
        """The log as :class:`Message` objects, oldest first (built on each access)."""
        return [Message(seq, e[0], e[1], e[2], _METHODS[e[3]], e[4], _date(e[5]))
                for seq, e in enumerate(self._entries)]

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self, start: int = 0) -> list[tuple]:
        """The raw entries from ``start`` on: ``(kind, path, value, method value, call,
        date)`` tuples, the date a timestamp (what a durable store commits, unformatted)."""
        return self._entries[start:]

    def append(self, kind: str, path: tuple, value: Any, method: OutputMethod = OutputMethod.SET,
               call: str | None = None, date: str | None = None) -> Message:
        """Append a write; returns its :class:`Message`."""
        self.write(kind, path, value, method, call, date)
        entries = self._entries
        e = entries[-1]
        return Message(len(entries) - 1, e[0], e[1], e[2], method, e[4], _date(e[5]))

    def write(self, kind: str, path: tuple, value: Any, method: OutputMethod = OutputMethod.SET,
              call: str | None = None, date: str | None = None) -> None:
        """:meth:`append` without building the returned :class:`Message`."""
        if type(value) in _ATOMIC:
            view_value = value
        else:  # the message and the view each get their own copy
            value, view_value = json_copies(value)
        if type(path) is not tuple:
            path = tuple(path)
        # the date is kept as a timestamp and formatted when the log is read (see _date);
        # ``_value_`` is ``method.value`` without the enum property's lookup
        self._entries.append((kind, path, value, method._value_, call, date or _clock()))
        views = self._views
        if method is _SET and len(path) == 1:
            # the common case (``†kind.name`` = result): no need to walk
            root = views.get(kind, MISSING)
            seg = path[0]
            if type(seg) is str:
                if type(root) is dict:
                    root[seg] = view_value
                    return
                if root is MISSING:  # a kind's first write (every map item's local data)
                    views[kind] = {seg: view_value}
                    return
        views[kind] = _apply_in_place(views.get(kind, MISSING), path, view_value, method)

    def get(self, kind: str, path: tuple = ()) -> Any:
        """The resolved value at ``kind.path`` (shared; copy before handing out), or MISSING."""
        root = self._views.get(kind, MISSING)
        if root is MISSING or not path:  # (the whole kind: a map item's local data)
            return root
        if len(path) == 1 and type(root) is dict and type(path[0]) is str:
            return root.get(path[0], MISSING)  # the common case: †kind.name
        return get_path(root, path)

    def kinds(self) -> list[str]:
        return list(self._views)

    def resolved(self, exclude: Iterable[str] = ()) -> dict[str, Any]:
        skip = set(exclude)
        return {k: json_copy(v) for k, v in self._views.items() if k not in skip and v is not MISSING}

    def to_json(self, count: int | None = None) -> list[dict]:
        """The log (its first ``count`` messages) as a list of message dicts."""
        entries = self._entries if count is None else self._entries[:count]
        return [{"seq": seq, "kind": kind, "path": list(path), "value": value, "method": method,
                 "call": call, "date": date if type(date) is str else iso_time(date)}
                for seq, (kind, path, value, method, call, date) in enumerate(entries)]

    def snapshot(self) -> "LogSnapshot":
        """The log as it is now; :meth:`LogSnapshot.to_json` builds the dicts when asked."""
        return LogSnapshot(self, len(self._entries))


class LogSnapshot:
    """The first ``count`` messages of a :class:`StateLog` (entries are never changed)."""

    __slots__ = ("log", "count")

    def __init__(self, log: StateLog, count: int) -> None:
        self.log = log
        self.count = count

    def to_json(self) -> list[dict]:
        return self.log.to_json(self.count)


def to_json_value(value: Any) -> Any:
    """Normalise a tool result to plain JSON with pydantic's serializer: pydantic models,
    dataclasses, tuples, sets, datetimes, UUIDs, decimals, enums...  Anything it cannot
    describe (an arbitrary object, a circular structure) raises ``ValueError``, which the
    runtime reports as ``Tool.OutputInvalid`` instead of storing a made-up string; so do
    NaN and the infinities, which JSON has no numbers for."""
    t = type(value)
    if value is None or t is str or t is int or t is bool:
        return value
    if t is float:
        if not isfinite(value):
            raise ValueError(f"{value!r} is not a JSON number")
        return value
    if isinstance(value, Enum):
        return to_json_value(value.value)
    if isinstance(value, (str, int, float)):  # subclasses (IntFlag, str subclasses...): plain values
        base = str if isinstance(value, str) else int if isinstance(value, int) else float
        return to_json_value(base(value) if base is not str else str.__str__(value))
    from pydantic_core import to_jsonable_python

    out = to_jsonable_python(value)
    bad = _non_finite(out, "$")
    if bad is not None:
        raise ValueError(f"{bad[1]!r} is not a JSON number (at {bad[0]})")
    return out


def _non_finite(value: Any, where: str) -> tuple[str, float] | None:
    """The JSON path and value of the first NaN or infinity inside ``value``, if any."""
    t = type(value)
    if t is float:
        return None if isfinite(value) else (where, value)
    if t is dict:
        for k, v in value.items():
            if type(v) in _CONTAINERS_OR_FLOAT:
                hit = _non_finite(v, f"{where}.{k}")
                if hit is not None:
                    return hit
    elif t is list:
        for n, v in enumerate(value):
            if type(v) in _CONTAINERS_OR_FLOAT:
                hit = _non_finite(v, f"{where}[{n}]")
                if hit is not None:
                    return hit
    return None


_CONTAINERS_OR_FLOAT = frozenset({dict, list, float})
