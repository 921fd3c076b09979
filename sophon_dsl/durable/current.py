"""``sophon_dsl.current_call()``: which run and call a tool's code is running for.

The runner sets one context variable per call (its task's own context); the local
invoker runs sync tools with a copy of that context, so thread-pool tools see it too.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = ["CURRENT", "CurrentCall", "current_call"]

# (run id, the call's CallRecord): the record is live, so ``attempt`` is the current one
CURRENT: ContextVar[tuple | None] = ContextVar("sophon_current_call", default=None)


@dataclass(frozen=True, slots=True)
class CurrentCall:
    """``key`` (``{run_id}:{call_id}``, the same on every attempt and after a resume) is what
    a tool passes to a service as its idempotency key."""

    run_id: str
    call_id: str
    attempt: int

    @property
    def key(self) -> str:
        return f"{self.run_id}:{self.call_id}"

    @property
    def idempotency_key(self) -> str:
        return self.key


def current_call() -> CurrentCall | None:
    """The call the calling code runs for, or None outside a run's tool."""
    cur: Any = CURRENT.get()
    if cur is None:
        return None
    run_id, rec = cur
    return CurrentCall(run_id or "", rec.id, rec.attempts)
