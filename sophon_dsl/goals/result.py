"""What a goal run returns: :class:`GoalResult`, one :class:`StepRecord` per step run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["GoalResult", "GoalStatus", "StepRecord", "StepStatus"]


class GoalStatus(str, Enum):
    COMPLETE = "complete"     # every step of the last plan passed (or partly passed)
    FAILED = "failed"         # planner or evaluator error, or the replan limit was reached
    BLOCKED = "blocked"       # the goal step limit stopped the loop with work left
    HITL = "hitl"             # a step needs a person and no approver was given
    CANCELLED = "cancelled"   # stopped from outside (Ctrl-C, task.cancel()); the steps reached are kept


class StepStatus(str, Enum):
    DONE = "done"             # verdict pass or partial
    FAILED = "failed"         # verdict fail (or the step's own error)
    SKIPPED = "skipped"       # a step it depends on failed
    WAITING = "waiting"       # verdict hitl, no person to ask
    CANCELLED = "cancelled"   # the goal was cancelled before the step finished


@dataclass
class StepRecord:
    id: str
    task: str
    status: StepStatus
    verdict: str | None = None
    confidence: float | None = None
    note: str = ""
    plan: int = 0             # 0 = the initial plan, n = the n-th replan

    def to_json(self) -> dict:
        return {"id": self.id, "task": self.task, "verdict": self.verdict, "confidence": self.confidence,
                "note": self.note, "status": self.status.value}


@dataclass
class GoalResult:
    status: GoalStatus
    output: Any
    facts: dict
    steps: list[StepRecord]
    replans: int
    steps_run: int
    elapsed_s: float
    error: str | None = None
    plans: list[list[dict]] = field(default_factory=list, repr=False)   # every plan's steps, as JSON
    run_id: str | None = None   # the goal's id in the run store (None: not recorded); not in to_json(),
    #                             whose keys are the CLI's contract: the CLI prints it on stderr

    @property
    def ok(self) -> bool:
        return self.status is GoalStatus.COMPLETE

    def to_json(self) -> dict:
        out = {"status": self.status.value, "output": self.output, "facts": self.facts,
               "goal_execution": {"steps": [s.to_json() for s in self.steps], "replans": self.replans,
                                  "steps_run": self.steps_run, "elapsed_s": round(self.elapsed_s, 3)}}
        if self.error is not None:
            out["error"] = self.error
        return out

    def dumps(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=indent, default=str)
