"""``sophon_dsl.current_call()``: which run and call a tool's code is running for.

Nothing is recorded per call (a context variable set for every call costs more than the
rest of a no-op call's bookkeeping): in the event loop, the current task is the runner's
``run_call(i, ...)`` coroutine, whose frame names the call; a sync tool runs in the thread
pool with the call it runs for in a thread-local, set by the local invoker.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["CURRENT", "CurrentCall", "current_call", "in_thread_for"]

_thread = threading.local()
# For code that runs a call outside the local runner (a scale-out worker): ``(run id, an
# object with the call's ``id`` and ``attempts``)``; consulted before the runner's task.
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

    @property
    def traceparent(self) -> str | None:
        """The W3C ``traceparent`` of the call's span when the run is traced (issue 29), else
        None (sophon_dsl.telemetry is imported by every run; unloaded, nothing is traced)."""
        tel = sys.modules.get("sophon_dsl.telemetry")
        return tel.traceparent(self.run_id, self.call_id) if tel is not None else None


def current_call() -> CurrentCall | None:
    """The call the calling code runs for, or None outside a run's tool."""
    given = getattr(_thread, "call", None)
    if given is not None:
        return given
    outside = CURRENT.get()
    if outside is not None:
        run_id, rec = outside
        return CurrentCall(run_id or "", rec.id, rec.attempts)
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no event loop in this thread
        return None
    frame = getattr(task.get_coro(), "cr_frame", None) if task is not None else None
    if frame is None or frame.f_code.co_name != "run_call":
        return None
    where = frame.f_locals
    state = getattr(where.get("self"), "state", None)  # the CallRunner's RunState
    i = where.get("i")
    if state is None or not isinstance(i, int):
        return None
    rec = state.records[i]
    return CurrentCall(state.run_id or "", rec.id, rec.attempts)


def in_thread_for(call: CurrentCall | None, func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` in a worker thread, with ``call`` as the thread's current call."""
    _thread.call = call
    try:
        return func(*args)
    finally:
        _thread.call = None
