"""Run events (seed 001): what the CLI progress view and any UI subscribe to.

Types: ``plan_start``, ``plan_complete``, ``plan_failed`` (status failed,
cancelled or rejected), ``plan_step_start``, ``plan_step_complete``,
``plan_step_failed``, ``plan_step_skipped``, ``plan_step_cancelled``,
``plan_step_retry``, ``approval_requested``, ``approval_granted``,
``approval_rejected``, ``approval_edited``.

Every event carries the plan id, goal, step index (0-based position of the
call in the plan, None for plan-level events), total steps, status and, for
completed steps, a truncated JSON preview of the output.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

__all__ = ["Event", "EventBus", "EVENT_TYPES", "TERMINAL_EVENTS", "preview"]

EVENT_TYPES = (
    "plan_start", "plan_complete", "plan_failed",
    "plan_step_start", "plan_step_complete", "plan_step_failed", "plan_step_skipped",
    "plan_step_cancelled", "plan_step_retry",
    "approval_requested", "approval_granted", "approval_rejected", "approval_edited",
)
TERMINAL_EVENTS = frozenset({"plan_complete", "plan_failed"})


def preview(value: Any, limit: int = 200) -> str | None:
    """Compact JSON of ``value`` cut to ``limit`` characters (``…`` marks a cut)."""
    if value is None:
        return None
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    plan_id: str
    goal: str | None
    step_index: int | None
    total_steps: int
    status: str
    call_id: str | None = None
    tool: str | None = None
    attempt: int | None = None
    preview: str | None = None
    error: dict | None = None
    reason: str | None = None
    time: float = field(default_factory=time.time)
    data: Any = None

    def to_json(self) -> dict:
        return {
            "type": self.type, "plan_id": self.plan_id, "goal": self.goal,
            "step_index": self.step_index, "total_steps": self.total_steps, "status": self.status,
            "call_id": self.call_id, "tool": self.tool, "attempt": self.attempt,
            "preview": self.preview, "error": self.error, "reason": self.reason, "time": self.time,
        }


class EventBus:
    """Fan-out of events to callbacks and async-iterator subscribers.

    Callbacks may be plain functions or coroutine functions (scheduled, not
    awaited inline).  A callback that raises is ignored: observers never break
    a run.  Subscribers created before the run starts see every event.
    """

    def __init__(self, callbacks: Any = None) -> None:
        if callbacks is None:
            self._callbacks: list[Callable[[Event], Any]] = []
        elif callable(callbacks):
            self._callbacks = [callbacks]
        else:
            self._callbacks = list(callbacks)
        self._queues: list[asyncio.Queue] = []
        self.history: list[Event] = []
        self.closed = False
        self._pending: set = set()

    def add_callback(self, cb: Callable[[Event], Any]) -> None:
        self._callbacks.append(cb)

    def emit(self, event: Event) -> None:
        self.history.append(event)
        for cb in self._callbacks:
            try:
                out = cb(event)
                if inspect.isawaitable(out):
                    task = asyncio.ensure_future(out)
                    self._pending.add(task)
                    task.add_done_callback(self._pending.discard)
            except Exception:  # noqa: BLE001 - observers must not break the run
                pass
        for q in self._queues:
            q.put_nowait(event)
        if event.type in TERMINAL_EVENTS:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for q in self._queues:
            q.put_nowait(None)

    def subscribe(self, replay: bool = True) -> AsyncIterator[Event]:
        """An async iterator of events; ends after the terminal event.

        With ``replay`` (default) it first yields the events already emitted.
        """
        q: asyncio.Queue = asyncio.Queue()
        if replay:
            for ev in self.history:
                q.put_nowait(ev)
        if self.closed:
            q.put_nowait(None)
        else:
            self._queues.append(q)
        return self._iterate(q)

    async def _iterate(self, q: asyncio.Queue) -> AsyncIterator[Event]:
        try:
            while True:
                ev = await q.get()
                if ev is None:
                    return
                yield ev
        finally:
            if q in self._queues:
                self._queues.remove(q)

    async def drain(self) -> None:
        """Wait for coroutine callbacks still running."""
        if self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
