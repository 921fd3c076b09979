"""The spans of a JSON plan's calls, built when something first asks for one.

The JSON reader stores one :class:`SourceSpans` in every span field of the calls it
builds (``Call.span``, ``Param.span``, ``Reference.span``, ...) instead of a ``Span``
per node: a checked plan that has nothing to report never needs one, and they were
most of what a loaded plan kept (issue 9: JSON load + check <= 1.5 KB per call).

When a span is first read, the calls are built once more from the source with their
spans (``rebuild``: the same reader, so the same calls in the same order), and each
node of the plan is paired with its twin by walking both alike; from then on a span is
one dictionary lookup.  The cost is that of loading the plan again, paid once per plan
and only when a diagnostic (or a copy of a node) wants a position.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from ..model import (Call, DeferredSpans, Expression, ListValue, MapSpec, ObjectValue, OutputTarget, Param,
                     Template)

__all__ = ["SourceSpans"]


class SourceSpans(DeferredSpans):
    """Deferred spans of the calls one reader built (see the module docstring).

    ``bind(calls)`` hands over the calls as built, in order; ``rebuild()`` must return
    the same calls, in the same order, with their spans.
    """

    __slots__ = ("_rebuild", "_calls", "_twins", "_lock")

    def __init__(self, rebuild: Callable[[], Sequence[Call]]):
        self._rebuild: Callable[[], Sequence[Call]] | None = rebuild
        self._calls: Sequence[Call] = ()
        self._twins: dict[int, Any] | None = None
        self._lock = threading.Lock()

    def bind(self, calls: Sequence[Call]) -> None:
        self._calls = calls

    @property
    def built(self) -> bool:
        """Whether the spans have been built (a test's way to see that nothing asked)."""
        return self._twins is not None

    def resolve(self, node: Any, name: str) -> Any:
        twins = self._twins
        if twins is None:
            twins = self._build()
        twin = twins.get(id(node))
        return None if twin is None else getattr(twin, name)

    def _build(self) -> dict[int, Any]:
        with self._lock:
            if self._twins is None:
                assert self._rebuild is not None
                twins: dict[int, Any] = {}
                eager = self._rebuild()
                if len(eager) == len(self._calls):  # else a source that changed: no spans
                    for call, twin in zip(self._calls, eager):
                        _pair(call, twin, twins)
                self._twins = twins
                self._rebuild = None  # let go of the source it closed over
        return self._twins

    def __reduce__(self):
        # a node is copied or pickled with its spans built (its fields are read), so a
        # copy of the deferred spans themselves is never needed; None keeps it cheap
        return (type(None), ())


def _pair(node: Any, twin: Any, out: dict[int, Any]) -> None:
    """Map ``id`` of every node under ``node`` to the node at the same place under ``twin``
    (the plan's nodes live as long as the plan, so their ids stay theirs)."""
    stack = [(node, twin)]
    while stack:
        a, b = stack.pop()
        if type(a) is not type(b):
            continue  # not the same call after all: leave this branch without spans
        out[id(a)] = b
        kind = type(a)
        if kind is Call:
            stack.extend(zip(a.params, b.params))
            for x, y in ((a.output, b.output), (a.inline_output, b.inline_output), (a.map, b.map)):
                if x is not None and y is not None:
                    stack.append((x, y))
        elif kind is Param:
            stack.append((a.value, b.value))
        elif kind is OutputTarget:
            stack.extend(zip(a.paths, b.paths))
        elif kind is ListValue:
            stack.extend(zip(a.items, b.items))
        elif kind is ObjectValue:
            stack.extend((x, y) for (_, x), (_, y) in zip(a.entries, b.entries))
        elif kind is Expression:
            stack.extend(zip(a.operands, b.operands))
        elif kind is Template:
            stack.extend((x, y) for x, y in zip(a.parts, b.parts) if type(x) is not str)
        elif kind is MapSpec:
            stack.append((a.over, b.over))
            stack.extend(zip(a.body, b.body))
            if a.result is not None and b.result is not None:
                stack.append((a.result, b.result))
