"""What a run returns: status, resolved state, output, one record per call, the log."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .errors import ErrorInfo

__all__ = ["CALL_STATUSES", "CallRecord", "RUN_STATUSES", "RunResult"]

RUN_STATUSES = ("succeeded", "failed", "cancelled", "rejected")
CALL_STATUSES = ("succeeded", "failed", "skipped", "cancelled", "pending")


@dataclass
class CallRecord:
    """The record of one call. ``status`` is one of :data:`CALL_STATUSES`.

    ``caught`` is True when the call failed but its branching output path
    delivered the error object to its last alternative (the plan does not fail
    because of it).  ``written`` lists the output paths it wrote.
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
    written: list[str] = field(default_factory=list)
    branch: str | None = None
    output: Any = None
    started: float | None = None   # monotonic clock, for benchmarks and dry-run
    ended: float | None = None

    def to_json(self) -> dict:
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

    def __repr__(self) -> str:
        # Short on purpose: asyncio.run() formats the finished main task (and so its
        # result) while restoring the SIGINT handler; the full dataclass repr of a
        # 10,000-call result took longer than running the calls.
        err = f", error={self.error.error!r}" if self.error else ""
        return (f"RunResult(status={self.status!r}, plan_id={self.plan_id!r}, calls={len(self.calls)}, "
                f"log={len(self.log)}{err})")

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    def call(self, call_id: str) -> CallRecord:
        for c in self.calls:
            if c.id == call_id:
                return c
        raise KeyError(call_id)

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "state": self.state,
            "output": self.output,
            "calls": [c.to_json() for c in self.calls],
            "error": self.error.to_json() if self.error is not None else None,
            "log": self.log,
        }

    def dumps(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=indent, default=str)
