"""Planned steps as a plan of our language, so the runtime runs them like any plan.

Each step becomes one call of the tool ``goal.step`` writing ``†state.steps.<id>``.
The results of the steps it depends on are wired in as data (``inputs``): a step of the
same plan by reference to its output path, a step completed in an earlier plan (before a
replan) from ``†input.completed.<id>``. The facts known at planning time come from
``†input.facts``. The data flow therefore gives the order: independent steps run in
parallel, and a failed step's dependents are skipped by the runtime's cascade.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..model import Call, ListValue, Literal, ObjectValue, OutputTarget, Param, Plan, Reference
from .steps import PlannedStep

__all__ = ["STEP_TOOL", "STEP_INPUT_SCHEMA", "STEP_OUTPUT_SCHEMA", "steps_to_plan"]

STEP_TOOL = "goal.step"

STEP_INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "step": {"type": "string", "description": "the step's id"},
        "task": {"type": "string"},
        "success_criterion": {"type": "string"},
        "expected_findings": {"type": "array", "items": {"type": "string"}},
        "subagent_hint": {"type": ["string", "null"]},
        "inputs": {"type": "object", "description": "the results of the steps this one depends on, by id"},
        "facts": {"type": "object", "description": "facts known when the plan was made"},
    },
    "required": ["step", "task", "success_criterion"],
    "additionalProperties": False,
}

STEP_OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "output": {},
        "verdict": {"enum": ["pass", "partial"]},
        "confidence": {"type": "number"},
        "note": {"type": "string"},
        "facts": {"type": "object"},
    },
    "required": ["output", "verdict"],
}


def _dependency(dep: str, planned: set[str]) -> Reference:
    if dep in planned:
        return Reference("state", ("steps", dep))
    return Reference("input", ("completed", dep))


def steps_to_plan(goal: str, steps: Sequence[PlannedStep], *, plan_id: str = "goal") -> Plan:
    planned = {s.id for s in steps}
    calls = []
    for s in steps:
        params: list[Param] = [
            Param("step", Literal(s.id)),
            Param("task", Literal(s.task)),
            Param("success_criterion", Literal(s.success_criterion)),
            Param("expected_findings", ListValue(tuple(Literal(k) for k in s.expected_findings))),
            Param("subagent_hint", Literal(s.subagent_hint)),
            Param("inputs", ObjectValue(tuple((d, _dependency(d, planned)) for d in s.depends_on))),
            Param("facts", Reference("input", ("facts",))),
        ]
        calls.append(Call(STEP_TOOL, tuple(params), OutputTarget.of((Reference("state", ("steps", s.id)),)),
                          id=s.id, success_criterion=s.success_criterion))
    return Plan(tuple(calls), goal=goal, id=plan_id, input_schema=_input_schema(steps, planned))


def _input_schema(steps: Sequence[PlannedStep], planned: set[str]) -> dict[str, Any]:
    completed = sorted({d for s in steps for d in s.depends_on if d not in planned})
    return {"type": "object",
            "properties": {"facts": {"type": "object"},
                           "completed": {"type": "object", "properties": {c: {"type": "object"} for c in completed},
                                         "required": completed}},
            "required": ["facts", "completed"]}
