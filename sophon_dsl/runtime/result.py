"""What a run returns: status, resolved state, output, one record per call, the log."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from ..errors import SophonError
from .errors import ErrorInfo
from .state import LogSnapshot, iso_time

__all__ = ["Attempt", "CALL_STATUSES", "CallRecord", "RUN_STATUSES", "RunResult", "UnknownCallId", "attempts_of",
           "new_record"]


class UnknownCallId(SophonError, KeyError):
    """:meth:`RunResult.call` of an id the run has no call for (a ``KeyError`` too)."""

    code = "Result.UnknownCall"

RUN_STATUSES = ("succeeded", "failed", "cancelled", "rejected", "waiting")
CALL_STATUSES = ("succeeded", "failed", "skipped", "cancelled", "pending")


@dataclass(slots=True, eq=False)
class Attempt:
    """One attempt of a call that was attempted more than once: its number (from 1), when it
    started and ended (``time.time()`` timestamps; ``ended`` None while it runs) and how it
    ended (``status``: ``running``, ``succeeded``, ``failed`` or ``cancelled``; ``error`` the
    failure).  The backoff before a retry is the gap between one attempt's end and the next
    one's start."""

    attempt: int
    started: float
    ended: float | None = None
    status: str = "running"
    error: ErrorInfo | None = None

    def close(self, when: float, status: str, error: ErrorInfo | None) -> None:
        self.ended, self.status, self.error = when, status, error

    def to_json(self) -> dict:
        """As ``RunResult.to_json`` shows it: times as ISO 8601 text."""
        return {"attempt": self.attempt, "started_at": iso_time(self.started),
                "ended_at": iso_time(self.ended) if self.ended is not None else None,
                "status": self.status, "error": self.error.to_json() if self.error is not None else None}

    def stored(self) -> dict:
        """As a durable store keeps it: times as POSIX timestamps."""
        return {"attempt": self.attempt, "started": self.started, "ended": self.ended, "status": self.status,
                "error": self.error.to_json() if self.error is not None else None}

    @classmethod
    def from_stored(cls, data: dict) -> "Attempt":
        err = data.get("error")
        return cls(data["attempt"], data["started"], data.get("ended"), data.get("status") or "failed",
                   ErrorInfo(err["error"], err.get("cause", "")) if err else None)


@dataclass
class CallRecord:
    """The record of one call. ``status`` is one of :data:`CALL_STATUSES`.

    ``caught`` is True when the call failed but its branching output path
    delivered the error object to its last alternative (the plan does not fail
    because of it).  ``written`` lists the output paths it wrote.  ``attempt_log``
    holds one :class:`Attempt` per attempt of a call attempted more than once (a retry,
    the advisor's alternative), None for the others: their one attempt is the call's own
    ``started_at`` .. ``ended_at`` (see :func:`attempts_of`).
    """

    id: str
    tool: str
    index: int
    status: str = "pending"
    attempts: int = 0
    error: ErrorInfo | None = None
    reason: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    caught: bool = False
    written: list[str] = None  # type: ignore[assignment]  # a list; see the property below
    branch: str | None = None
    output: Any = None
    started: float | None = None   # monotonic clock, for benchmarks and dry-run
    ended: float | None = None
    alternative: dict | None = None  # the advisor's proposal after a failure (runtime.retry)
    # (like ``alternative``, a class default: a record made by new_record has it only once it
    # is retried, so a run of calls attempted once pays nothing for it)
    attempt_log: list[Attempt] | None = None

    def to_json(self) -> dict:
        # the keys below are added only when they hold something: the shape of a call that
        # ran once is the one programs read before they existed
        if self.alternative is None and self.attempt_log is None:
            return self._json()
        out = self._json()
        if self.alternative is not None:
            out["alternative"] = self.alternative
        if self.attempt_log is not None:
            out["attempt_log"] = [a.to_json() for a in self.attempt_log]
        return out

    def _json(self) -> dict:
        return {
            "id": self.id,
            "tool": self.tool,
            "status": self.status,
            "attempts": self.attempts,
            "error": self.error.to_json() if self.error else None,
            "reason": self.reason,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }


@dataclass
class RunResult:
    """The complete record of a run.

    ``state`` maps each kind (``state``, ``data``, ...; not ``input``) to its
    resolved data; ``log`` is the append-only audit trail (list of message
    dicts); ``error`` is the plan-level error (Plan.Timeout, Approval.Rejected,
    Plan.Cancelled) when there is one.
    """

    status: str
    state: dict
    output: Any
    calls: list[CallRecord]
    log: list[dict]
    plan_id: str = ""
    goal: str | None = None
    error: ErrorInfo | None = None
    events: list = field(default_factory=list, repr=False)
    run_id: str | None = None  # minted per run (a durable run's key in its store)

    def __repr__(self) -> str:
        # Short on purpose: asyncio.run() formats the finished main task (and so its
        # result) while restoring the SIGINT handler; the full dataclass repr of a
        # 10,000-call result took longer than running the calls.
        err = f", error={self.error.error!r}" if self.error else ""
        return (f"RunResult(status={self.status!r}, plan_id={self.plan_id!r}, calls={len(self.calls)}, "
                f"log={_log_len(self)}{err})")

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    def call(self, call_id: str) -> CallRecord:
        for c in self.calls:
            if c.id == call_id:
                return c
        raise UnknownCallId(call_id)

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "state": self.state,
            "output": self.output,
            "calls": [c.to_json() for c in self.calls],
            "error": self.error.to_json() if self.error is not None else None,
            "log": self.log,
            "run_id": self.run_id,
        }

    def dumps(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=indent, default=str)


def _get_events(self: RunResult) -> list:
    ev = self.__dict__["events"]
    if type(ev) is not list:
        ev = self.__dict__["events"] = ev.get()  # an EventHistory: built on first read
    return ev


def _set_events(self: RunResult, value: Any) -> None:
    self.__dict__["events"] = value


# ``events`` is read through a property so that the scheduler can hand over its event
# history without building 2 Event objects per call up front (most callers never read
# them); readers always get the same list of Event objects.
RunResult.events = property(_get_events, _set_events, doc="The run's events, oldest first.")  # type: ignore[assignment]


def _get_written(self: CallRecord) -> list:
    w = self._written
    if type(w) is not list:
        # the scheduler keeps the output References it wrote; readers get their texts
        w = self._written = [] if w is None else [x if type(x) is str else x.text() for x in w]
    return w


def _set_written(self: CallRecord, value: Any) -> None:
    # an ordinary attribute, not ``__dict__["written"]``: reading ``__dict__`` gives every
    # record a dict object of its own, which the cyclic GC tracks and promotes
    self._written = value


# ``written`` is always a list of path texts for readers; until someone reads it the
# scheduler keeps the paths as a tuple of References (None: nothing written), formatted
# on first read.
CallRecord.written = property(_get_written, _set_written,  # type: ignore[assignment]
                              doc="The output paths this call wrote (a list).")


def _add_written(self: CallRecord, paths: tuple) -> None:
    """Record output paths (References or texts) the call wrote: kept as the given tuple
    until someone reads ``written`` (usually the call's own ``output.paths``: no new object)."""
    w = self._written
    if type(w) is list:
        w.extend(p if type(p) is str else p.text() for p in paths)
    elif w is None:
        self._written = paths
    else:
        self._written = w + paths


CallRecord.add_written = _add_written  # type: ignore[attr-defined]


_new = object.__new__


def new_record(call_id: str, tool: str, index: int) -> CallRecord:
    """``CallRecord(call_id, tool, index)`` (a pending record) without the dataclass
    ``__init__``'s keyword handling and property setters: a run creates one record per
    call up front.  Every attribute is set, in the order ``__init__`` sets them, so that
    all records share one attribute layout (CPython then keeps no dict per record)."""
    rec = _new(CallRecord)
    rec.id = call_id
    rec.tool = tool
    rec.index = index
    rec.status = "pending"
    rec.attempts = 0
    rec.error = None
    rec.reason = None
    rec._started_at = None
    rec._ended_at = None
    rec.caught = False
    rec._written = None
    rec.branch = None
    rec.output = None
    rec.started = None
    rec.ended = None
    return rec


def _stamp_property(attr: str, set_: Callable[[CallRecord, Any], None], doc: str) -> property:
    """A ``CallRecord`` time as ISO 8601 text; the scheduler stores a ``time.time()``
    timestamp and it is formatted on first read (most runs never read it).  ``set_`` stores
    ``attr`` itself: the scheduler sets both times of every call, and a plain attribute store
    costs no ``setattr`` call on top of the property's."""

    def get(self: CallRecord) -> str | None:
        v = getattr(self, attr)
        if type(v) is float:
            v = iso_time(v)
            set_(self, v)
        return v

    return property(get, set_, doc=doc)


def _set_started_at(self: CallRecord, value: Any) -> None:
    self._started_at = value


def _set_ended_at(self: CallRecord, value: Any) -> None:
    self._ended_at = value


def raw_times(rec: CallRecord) -> tuple[Any, Any]:
    """``(started, ended)`` as kept: timestamps until someone formats them (a durable store
    commits these, not the text)."""
    return rec._started_at, rec._ended_at


def started_stamp(rec: CallRecord) -> float | None:
    """When the call started, as a ``time.time()`` timestamp (also once ``started_at`` was
    read and formatted)."""
    v = rec._started_at
    if v is None or type(v) is float:
        return v
    return _parse_iso(v)


def _parse_iso(text: str) -> float:
    """:func:`~.state.iso_time` read back: the middle of the microsecond the text names, so
    that formatting it again gives the same text (iso_time truncates to the microsecond)."""
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return dt.replace(microsecond=0).timestamp() + (dt.microsecond + 0.5) / 1e6


def attempts_of(rec: CallRecord) -> list[Attempt]:
    """The call's attempts: its ``attempt_log``, or for a call that ran once, that attempt
    (the call's own start and end), or none for a call that never started."""
    if rec.attempt_log is not None:
        return rec.attempt_log
    start = started_stamp(rec)
    if start is None or rec.attempts != 1:  # (several attempts, not logged: a record of an older version)
        return []
    end = rec._ended_at
    if end is not None and type(end) is not float:
        end = _parse_iso(end)
    status = rec.status if rec.status in ("succeeded", "failed", "cancelled") else "running"
    return [Attempt(1, start, end, status, rec.error if status == "failed" else None)]


def written_so_far(rec: CallRecord) -> Any:
    """What the call wrote as kept: None, a tuple of References, or (once read) a list of
    path texts; unlike ``written`` it formats nothing."""
    return rec._written


CallRecord.started_at = _stamp_property(  # type: ignore[assignment]
    "_started_at", _set_started_at, "When the call started (ISO 8601, UTC), or None.")
CallRecord.ended_at = _stamp_property(  # type: ignore[assignment]
    "_ended_at", _set_ended_at, "When the call ended (ISO 8601, UTC), or None.")


def _log_len(self: RunResult) -> int:
    lg = self.__dict__.get("log")
    return lg.count if isinstance(lg, LogSnapshot) else len(lg or ())


def _get_log(self: RunResult) -> list:
    lg = self.__dict__["log"]
    if type(lg) is not list:
        lg = self.__dict__["log"] = lg.to_json()  # a LogSnapshot: built on first read
    return lg


def _set_log(self: RunResult, value: Any) -> None:
    self.__dict__["log"] = value


# ``log`` (a list of message dicts) is built when first read: two containers per message,
# allocated for every run whether or not anyone looks at the audit trail.
RunResult.log = property(_get_log, _set_log, doc="The state log: one dict per message.")  # type: ignore[assignment]
