"""A located JSON/YAML node tree shared by the JSON and YAML readers.

Every node keeps its :class:`~sophon_dsl.diagnostics.Span` (1-based line and
column, end exclusive) and its JSON path (``$``, ``$[1]``, ``$[1]._outputPath``,
``$["odd key"]``).  Object entries keep source order and the span of each key.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
import threading
from typing import Any, Callable, Iterator, Mapping

from ..diagnostics import Span

__all__ = ["LocatedNode", "LineIndex", "LazySpanPaths", "child_path", "OBJECT", "ARRAY", "SCALAR"]

OBJECT = "object"
ARRAY = "array"
SCALAR = "scalar"

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def child_path(parent: str, key: str | int) -> str:
    """JSON path of a child: ``$.name``, ``$[3]`` or ``$["odd key"]``."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return parent + _key_step(key)


@lru_cache(maxsize=4096)
def _key_step(key: str) -> str:
    """``.name`` or ``["odd key"]`` (keys repeat across the calls of a plan: cached)."""
    if _IDENT.match(key):
        return "." + key
    return f"[{json.dumps(key, ensure_ascii=False)}]"


class LineIndex:
    """Converts 0-based character offsets into 1-based (line, column).

    Lines are separated by ``\\n`` only; a ``\\r`` before it counts as a column.
    """

    def __init__(self, text: str):
        self.text = text
        self.size = len(text)
        self.starts = [0]
        find = text.find
        i = find("\n")
        while i >= 0:
            self.starts.append(i + 1)
            i = find("\n", i + 1)

    def position(self, offset: int) -> tuple[int, int]:
        if offset < 0:
            offset = 0
        elif offset > self.size:
            offset = self.size
        line = bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1

    def span(self, start: int, end: int) -> Span:
        if start < 0:
            start = 0
        if end < start:
            end = start
        if end > self.size:
            end = self.size
            if start > end:
                start = end
        starts = self.starts
        line = bisect_right(starts, start) - 1
        first = starts[line]
        if line + 1 == len(starts) or end < starts[line + 1]:  # most nodes sit on one line
            return Span(line + 1, start - first + 1, line + 1, end - first + 1)
        l2, c2 = self.position(end)
        return Span(line + 1, start - first + 1, l2, c2)

    def point(self, offset: int) -> Span:
        """A one-character span at ``offset`` (empty at the very end of the text)."""
        end = offset + 1 if offset < len(self.text) else offset
        return self.span(offset, end)


class LazySpanPaths(Mapping):
    """``Plan.span_paths`` computed on first use.

    The JSON path of every node by its span is only read when a diagnostic is made,
    so the loaders hand this instead of the map itself: ``compute`` (typically
    reading the plan's source again) runs at most once, on the first lookup. It is
    truthy without computing anything, as a document always has a root node.
    """

    __slots__ = ("_compute", "_map", "_lock")

    def __init__(self, compute: Callable[[], Mapping[Span, str]]):
        self._compute: Callable[[], Mapping[Span, str]] | None = compute
        self._map: Mapping[Span, str] | None = None
        self._lock = threading.Lock()

    def _paths(self) -> Mapping[Span, str]:
        if self._map is None:
            with self._lock:
                if self._map is None:
                    assert self._compute is not None
                    self._map = self._compute()
                    self._compute = None  # let go of the source it closed over
        return self._map

    @property
    def computed(self) -> bool:
        return self._map is not None

    def __bool__(self) -> bool:
        return True

    def __reduce__(self):
        # pickled and deep-copied as the plain map (the lock and the closure cannot be)
        return (dict, (dict(self._paths()),))

    def __getitem__(self, span: Span) -> str:
        return self._paths()[span]

    def get(self, span: Span, default: Any = None) -> Any:
        return self._paths().get(span, default)

    def __contains__(self, span: object) -> bool:
        return span in self._paths()

    def __iter__(self) -> Iterator[Span]:
        return iter(self._paths())

    def __len__(self) -> int:
        return len(self._paths())


class _NoKeys(Mapping):
    """The ``key_spans`` of a node that is not an object: empty, shared, read-only
    (hashable, as dataclass field defaults must be)."""

    __slots__ = ()
    __hash__ = object.__hash__

    def __getitem__(self, key: str) -> Span:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


_NO_KEYS: Mapping[str, Span] = _NoKeys()


@dataclass(eq=False, slots=True)
class LocatedNode:
    """One JSON/YAML node.

    ``value`` is, by ``kind``:

    * ``"object"``: a list of ``(key, LocatedNode)`` pairs in source order
      (duplicate keys are reported by the reader and only the first is kept);
    * ``"array"``: a list of ``LocatedNode``;
    * ``"scalar"``: ``str``, ``int``, ``float``, ``bool`` or ``None``.

    ``key_spans`` maps each object key to the span of the key text.
    ``quoted`` tells whether a string scalar was written between quotes
    (used to point precisely inside strings).
    """

    kind: str
    value: Any
    span: Span
    path: str = "$"
    key_spans: Mapping[str, Span] = _NO_KEYS  # objects get their own dict from the reader
    quoted: bool = False

    # -- objects ---------------------------------------------------------
    @property
    def is_object(self) -> bool:
        return self.kind == OBJECT

    @property
    def is_array(self) -> bool:
        return self.kind == ARRAY

    @property
    def is_scalar(self) -> bool:
        return self.kind == SCALAR

    @property
    def is_string(self) -> bool:
        return self.kind == SCALAR and isinstance(self.value, str)

    def items(self) -> list[tuple[str, "LocatedNode"]]:
        return list(self.value) if self.kind == OBJECT else []

    def keys(self) -> list[str]:
        return [k for k, _ in self.value] if self.kind == OBJECT else []

    def get(self, key: str) -> "LocatedNode | None":
        if self.kind != OBJECT:
            return None
        for k, v in self.value:
            if k == key:
                return v
        return None

    def __contains__(self, key: object) -> bool:
        return self.kind == OBJECT and any(k == key for k, _ in self.value)

    def key_span(self, key: str) -> Span:
        return self.key_spans.get(key, self.span)

    def entry_span(self, key: str) -> Span:
        """From the start of ``key`` to the end of its value."""
        ks = self.key_spans.get(key)
        v = self.get(key)
        if ks is None or v is None:
            return v.span if v is not None else self.span
        return Span(ks.line, ks.column, v.span.end_line, v.span.end_column)

    # -- arrays ----------------------------------------------------------
    def __iter__(self) -> Iterator["LocatedNode"]:
        if self.kind == ARRAY:
            return iter(self.value)
        if self.kind == OBJECT:
            return iter(v for _, v in self.value)
        return iter(())

    def __len__(self) -> int:
        return len(self.value) if self.kind in (ARRAY, OBJECT) else 0

    # -- conversion --------------------------------------------------------
    def to_data(self) -> Any:
        """Plain Python data (dicts, lists, scalars) without positions. Iterative."""
        root_out: list[Any] = [None]
        stack: list[tuple[LocatedNode, Any, Any]] = [(self, root_out, 0)]
        while stack:
            node, container, slot = stack.pop()
            if node.kind == OBJECT:
                out: Any = {}
                container[slot] = out
                for k, v in node.value:
                    out[k] = None
                    stack.append((v, out, k))
            elif node.kind == ARRAY:
                out = [None] * len(node.value)
                container[slot] = out
                for i, v in enumerate(node.value):
                    stack.append((v, out, i))
            else:
                container[slot] = node.value
        return root_out[0]

    def span_paths(self) -> dict[Span, str]:
        """JSON path of every node (and of every ``key: value`` entry) by its span. Iterative."""
        out: dict[Span, str] = {}
        put = out.setdefault
        stack: list[LocatedNode] = [self]
        while stack:
            node = stack.pop()
            put(node.span, node.path)
            if node.kind == OBJECT:
                key_spans = node.key_spans
                for k, v in node.value:
                    # entry_span(k) and key_span(k), without looking k up again
                    ks = key_spans.get(k)
                    vs = v.span
                    if ks is None:
                        put(vs, v.path)
                        put(node.span, v.path)
                    else:
                        put(Span(ks.line, ks.column, vs.end_line, vs.end_column), v.path)
                        put(ks, v.path)
                    stack.append(v)
            elif node.kind == ARRAY:
                stack.extend(node.value)
        return out

    def describe(self) -> str:
        """A short type name for messages: object, array, string, number, boolean, null."""
        if self.kind != SCALAR:
            return self.kind
        v = self.value
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "boolean"
        if isinstance(v, (int, float)):
            return "number"
        return "string"
