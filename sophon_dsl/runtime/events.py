"""Run events (seed 001): what the CLI progress view and any UI subscribe to.

Types: ``plan_start``, ``plan_complete``, ``plan_failed`` (status failed,
cancelled or rejected), ``plan_step_queued`` (ready, waiting for a slot under
``max_concurrency``), ``plan_step_start`` (it runs), ``plan_step_complete``,
``plan_step_failed``, ``plan_step_skipped``, ``plan_step_cancelled``,
``plan_step_retry``, ``approval_requested``, ``approval_granted``,
``approval_rejected``, ``approval_edited``; durable runs add ``plan_resumed`` (data:
restored / in doubt / re-run counts) and ``plan_step_unknown`` (a call found in doubt);
a map call adds ``map_start`` (data: ``items``) and, per item, ``map_item_complete`` or
``map_item_failed`` (data: ``item``, its index), beside its items' own step events;
``outputs_ready`` (data: ``waiting_for``, the ids) when every call with an output path has
ended and only fire-and-forget calls are still to end (the run waits for them).

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

__all__ = ["Event", "EventBus", "EVENT_TYPES", "TERMINAL_EVENTS", "make_event", "preview"]

EVENT_TYPES = (
    "plan_start", "plan_complete", "plan_failed",
    "plan_step_queued", "plan_step_start", "plan_step_complete", "plan_step_failed", "plan_step_skipped",
    "plan_step_cancelled", "plan_step_retry",
    "approval_requested", "approval_granted", "approval_rejected", "approval_edited",
    "plan_resumed", "plan_step_unknown",
    "map_start", "map_item_complete", "map_item_failed", "outputs_ready",
)
TERMINAL_EVENTS = frozenset({"plan_complete", "plan_failed"})


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def preview(value: Any, limit: int = 200) -> str | None:
    """Compact JSON of ``value`` cut to ``limit`` characters (``…`` marks a cut)."""
    if value is None:
        return None
    t = type(value)
    if t is int:
        text = int.__repr__(value)
    elif t is bool:
        text = "true" if value else "false"
    else:
        try:
            text = _ENCODER.encode(value)
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


_FIELDS = ("type", "plan_id", "goal", "step_index", "total_steps", "status", "call_id", "tool", "attempt",
           "preview", "error", "reason", "time", "data")
_SETTERS = tuple(getattr(Event, name).__set__ for name in _FIELDS)
_new = object.__new__
_now = time.time


def make_event(type_: str, plan_id: str, goal: str | None, step_index: int | None, total_steps: int,
               status: str, call_id: str | None = None, tool: str | None = None, attempt: int | None = None,
               preview: str | None = None, error: dict | None = None, reason: str | None = None,
               data: Any = None) -> Event:
    """``Event(...)`` without the frozen dataclass's per-field ``object.__setattr__`` lookups
    (the scheduler emits two events per call)."""
    return _build((type_, plan_id, goal, step_index, total_steps, status, call_id, tool, attempt, preview,
                   error, reason, _now(), data))


def _build(fields: tuple) -> Event:
    """The :class:`Event` of a raw field tuple (in ``_FIELDS`` order, ``time`` included)."""
    ev = _new(Event)
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13 = _SETTERS
    (type_, plan_id, goal, step_index, total_steps, status, call_id, tool, attempt, preview, error, reason,
     when, data) = fields
    s0(ev, type_); s1(ev, plan_id); s2(ev, goal); s3(ev, step_index); s4(ev, total_steps)
    s5(ev, status); s6(ev, call_id); s7(ev, tool); s8(ev, attempt); s9(ev, preview)
    s10(ev, error); s11(ev, reason); s12(ev, when); s13(ev, data)
    return ev


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
        # Events emitted with emit_raw while nobody observes them stay field tuples (which the
        # cyclic GC untracks) until the history is read; ``history`` turns them into Events.
        self._log: list = []
        self._raw = 0               # how many entries of _log may still be tuples
        self.closed = False
        self._pending: set = set()

    @property
    def history(self) -> list[Event]:
        """Every event emitted so far, oldest first."""
        log = self._log
        if self._raw:
            for k, e in enumerate(log):
                if type(e) is tuple:
                    log[k] = _build(e)
            self._raw = 0
        return log

    def snapshot(self) -> "EventHistory":
        """The events emitted so far, as a list built only when first read."""
        return EventHistory(self, len(self._log))

    def add_callback(self, cb: Callable[[Event], Any]) -> None:
        self._callbacks.append(cb)

    @property
    def observed(self) -> bool:
        """Whether anything besides the history sees events (callbacks or subscribers)."""
        return bool(self._callbacks or self._queues)

    def emit_raw(self, fields: tuple) -> None:
        """Emit the event whose fields (``_FIELDS`` order, ``time`` included) are ``fields``.

        Unobserved, it is recorded as the tuple itself and built on demand; observers get
        the :class:`Event` at once, exactly as from :meth:`emit`."""
        if self._callbacks or self._queues:
            self.emit(_build(fields))
            return
        self._log.append(fields)
        self._raw += 1
        if fields[0] in TERMINAL_EVENTS:
            self.close()

    def emit(self, event: Event) -> None:
        self._log.append(event)
        if not self._callbacks and not self._queues:
            if event.type in TERMINAL_EVENTS:
                self.close()
            return
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


class EventHistory:
    """A run's events up to a point, turned into :class:`Event` objects when first read."""

    __slots__ = ("bus", "count", "events")

    def __init__(self, bus: EventBus, count: int) -> None:
        self.bus = bus
        self.count = count
        self.events: list[Event] | None = None

    def get(self) -> list[Event]:
        if self.events is None:
            self.events = self.bus.history[: self.count]
            self.bus = None  # type: ignore[assignment]
        return self.events
