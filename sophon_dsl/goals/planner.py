"""The planner (seed 003): one heavy-tier request that turns a goal into 3-10 steps, and
after a failure one request that plans the remaining work around it (1-10 steps).

The reply is checked by :func:`~sophon_dsl.goals.steps.parse_steps`; any failure (the
provider's included) raises :class:`~sophon_dsl.goals.steps.PlannerError` at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from ..llm.provider import Message, Provider, ProviderError, collect
from .steps import HINTS, PlannedStep, PlannerError, parse_steps

__all__ = ["Planner", "StepSummary"]

_SYSTEM = f"""You plan how an agent reaches a goal. Reply with JSON only:
{{"steps": [{{"task": "...", "success_criterion": "...", "expected_findings": ["snake_case_key"],
             "depends_on": [1], "subagent_hint": "researcher"}}]}}
Rules:
- 3 to 10 steps (a replan: 1 to 10, for the remaining work only); each step is atomic: one agent, one
  bounded outcome.
- task: complete and self-contained; whoever runs it sees nothing else but the results of the steps
  it depends on and the known facts.
- success_criterion: a concrete, observable condition that shows the step is done (not the task again).
- expected_findings: snake_case keys of the facts the step should establish.
- depends_on: 1-based numbers of earlier steps of this plan (or ids of completed steps) whose
  results the step needs; independent steps run in parallel.
- subagent_hint: one of {", ".join(HINTS)}, or null."""


@dataclass(frozen=True)
class StepSummary:
    """What the planner is told about a step that already ran."""

    id: str
    task: str
    verdict: str
    note: str = ""

    def to_json(self) -> dict:
        return {"id": self.id, "task": self.task, "verdict": self.verdict, "note": self.note}


def _tools_text(tools: Sequence[Any]) -> str:
    lines = []
    for t in tools:
        first = (t.description or "").strip().split("\n", 1)[0]
        lines.append(f"- {t.name}: {first}" if first else f"- {t.name}")
    return "\n".join(lines) if lines else "(none)"


class Planner:
    """``plan(goal, ...)`` and ``replan(goal, ...)`` each send one request to ``provider``."""

    def __init__(self, provider: Provider, *, model: str | None = None, temperature: float | None = 0.2,
                 max_tokens: int | None = 2000):
        self.provider = provider
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens

    async def _ask(self, user: str) -> str:
        msgs = [Message("system", _SYSTEM), Message("user", user)]
        try:
            return await collect(self.provider, msgs, model=self.model, temperature=self.temperature,
                                 max_tokens=self.max_tokens)
        except ProviderError as exc:
            raise PlannerError(f"the planner's request failed: {exc}") from exc

    async def plan(self, goal: str, *, identity: str = "", facts: dict | None = None, tools: Sequence[Any] = (),
                   first_number: int = 1) -> list[PlannedStep]:
        """The initial plan: 3 to 10 steps."""
        user = (f"Goal: {goal}\n"
                f"Agent identity: {identity[:400] or '(none)'}\n"
                f"Known facts: {json.dumps(facts or {}, ensure_ascii=False, default=str)}\n"
                f"Tools the agents can use:\n{_tools_text(tools)}")
        return parse_steps(await self._ask(user), first_number=first_number, min_steps=3, max_steps=10)

    async def replan(self, goal: str, *, completed: Sequence[StepSummary], failed: Sequence[StepSummary],
                     facts: dict | None = None, remaining_steps: int, remaining_replans: int,
                     tools: Sequence[Any] = (), identity: str = "", first_number: int = 1) -> list[PlannedStep]:
        """A plan for the remaining work only (1 to 10 steps); completed steps are not planned again."""
        user = (f"Goal: {goal}\n"
                f"Agent identity: {identity[:400] or '(none)'}\n"
                f"Completed steps (do not plan them again; depend on them by id when you need their "
                f"results): {json.dumps([s.to_json() for s in completed], ensure_ascii=False)}\n"
                f"Failed steps: {json.dumps([s.to_json() for s in failed], ensure_ascii=False)}\n"
                f"Known facts: {json.dumps(facts or {}, ensure_ascii=False, default=str)}\n"
                f"Budget left: {remaining_steps} step(s), {remaining_replans} replan(s).\n"
                "Change the approach that failed; do not repeat the same strategy.\n"
                f"Tools the agents can use:\n{_tools_text(tools)}")
        return parse_steps(await self._ask(user), first_number=first_number, min_steps=1, max_steps=10,
                           completed=frozenset(s.id for s in completed))
