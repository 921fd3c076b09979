"""A goal in the run store: a goal that ends ``hitl`` with nobody to ask is kept there,
status ``waiting``, and continues later from any process with the person's answer
(``GoalRunner.aresume``; ``sophon-dsl approve RUN_ID [--reject]``).

The store's run row holds ``spec = {"kind": "goal", "input", "meta", "checkpoint"}``: the
loop's state (facts, every step's record and result, the plans, the counters) and the steps
waiting for a person with what their sub-agent produced. Everything is JSON.
"""

from __future__ import annotations

from typing import Any

from .result import StepRecord, StepStatus
from .steps import PlannedStep

__all__ = ["GOAL_KIND", "decision_name", "dump_state", "load_state"]

GOAL_KIND = "goal"


def decision_name(run_id: str) -> str:
    """The one decision a waiting goal asks for: it answers every step that waits."""
    return f"goal:{run_id}:hitl"


def _step(data: dict) -> PlannedStep:
    return PlannedStep(data["id"], data["task"], data["success_criterion"], tuple(data.get("expected_findings", ())),
                       tuple(data.get("depends_on", ())), data.get("subagent_hint"))


def _record(data: dict) -> StepRecord:
    return StepRecord(data["id"], data["task"], StepStatus(data["status"]), data.get("verdict"),
                      data.get("confidence"), data.get("note", ""), data.get("plan", 0))


def dump_state(loop: Any) -> dict:
    last = loop.last
    return {"facts": loop.facts, "completed": loop.completed, "replans": loop.replans, "steps_run": loop.steps_run,
            "plans": loop.plans,
            "records": [{**r.to_json(), "plan": r.plan} for r in loop.records.values()],
            "last_steps": [s.to_json() for s in last.steps] if last is not None else [],
            "last_number": last.number if last is not None else 0,
            "pending": loop.pending}


def load_state(loop: Any, data: dict) -> list[PlannedStep]:
    """Put ``data`` back into ``loop``; returns the steps of the plan that was waiting."""
    loop.facts = dict(data["facts"])
    loop.completed = dict(data["completed"])
    loop.replans = data["replans"]
    loop.steps_run = data["steps_run"]
    loop.plans = list(data["plans"])
    loop.records = {r["id"]: _record(r) for r in data["records"]}
    loop.pending = list(data["pending"])
    return [_step(s) for s in data["last_steps"]]
