"""The bounds of a JMESPath evaluation (:mod:`sophon_dsl.jmes_bounded`), apart from the
interpreter: the runtime passes limits and catches :class:`QueryTooExpensive` on every run,
and importing them does not import ``jmespath`` (~40 ms), which loads with the first
query compiled or evaluated.  ``jmes_bounded`` re-exports every name here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .errors import SophonError

__all__ = ["DEFAULT_LIMITS", "DEFAULT_MAX_BYTES", "MAX_QUERY_DEPTH", "MAX_QUERY_STEPS", "QueryLimits",
           "QueryTooExpensive"]

MAX_QUERY_STEPS = 1_000_000  # JMESPath nodes visited plus elements flattened in one evaluation
# An expression's AST nesting: the interpreter recurses about three frames per level, so
# 128 levels stay far below Python's recursion limit wherever a run calls it from.
MAX_QUERY_DEPTH = 128
DEFAULT_MAX_BYTES = 16 << 20  # as RunOptions.max_result_bytes: a reference's value is bounded like a result


class QueryTooExpensive(SophonError):
    """A JMESPath evaluation passed one of its bounds.  ``bound``: ``"steps"``, ``"size"``,
    ``"depth"``, ``"time"`` (the deadline passed) or ``"stopped"`` (the run is stopping)."""

    def __init__(self, bound: str, message: str) -> None:
        super().__init__(message)
        self.bound = bound
        self.message = message


@dataclass(frozen=True, slots=True)
class QueryLimits:
    """The bounds of one evaluation (see the module docstring).  ``deadline`` is a
    ``time.monotonic()`` value; ``stop`` is polled with it and returns why the run is
    stopping (``"timeout"``, ``"memory"``, ``"cancelled"``...), or None while it is not."""

    max_steps: int = MAX_QUERY_STEPS
    max_bytes: int = DEFAULT_MAX_BYTES
    deadline: float | None = None
    stop: Callable[[], str | None] | None = None


DEFAULT_LIMITS = QueryLimits()
