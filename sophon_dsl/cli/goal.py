"""``sophon-dsl goal "GOAL"``: the goal loop from the command line (docs/goals.md).

::

    sophon-dsl goal "Prepare tomorrow's meetings" --tools tools.py --provider openai \\
        --planner-provider openai:gpt-4o --evaluator-provider openai:gpt-4o-mini --json

Progress goes to stderr (plans, verdicts, replans); ``--json`` prints only the result
``{"status", "output", "facts", "goal_execution": {...}}``. Exit codes: 0 complete,
1 failed / blocked / hitl / cancelled (Ctrl-C or SIGTERM: the steps reached are
printed), 2 usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from .common import EXIT_FAIL, EXIT_OK, UsageError, approver_for, on_signals, parse_json_arg
from .registry import registry_for

__all__ = ["GoalProgress", "run"]


class GoalProgress:
    """One line per goal event on ``stream``."""

    def __init__(self, stream: Any = None):
        self.stream = stream or sys.stderr

    def __call__(self, ev: Any) -> None:
        data = ev.data if isinstance(ev.data, dict) else {}
        if ev.type == "goal_plan":
            steps = data.get("steps", [])
            self._print(f"{ev.status}: {len(steps)} step(s)")
            for s in steps:
                after = f" (after {', '.join(s['depends_on'])})" if s.get("depends_on") else ""
                self._print(f"  {s['id']}: {s['task']}{after}")
        elif ev.type == "goal_step_verdict":
            self._print(f"  [{ev.call_id}] {ev.status} ({data.get('confidence')}): {data.get('note', '')}")
        elif ev.type == "goal_replan":
            failed = ", ".join(f["id"] for f in data.get("failed", []))
            self._print(f"replan {data.get('replan')}: after {failed} failed")

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


def _provider(spec: str | None, model: str | None = None) -> Any:
    from .agent import _provider as agent_provider

    return None if spec is None else agent_provider(spec, model)


def _limit(flag: str, value: int | None, least: int) -> int | None:
    if value is not None and value < least:
        raise UsageError(f"{flag} must be at least {least}")
    return value


def run(args: argparse.Namespace) -> int:
    from ..goals import GoalRunner
    from ..llm.agent import Agent

    if not args.goal.strip():
        raise UsageError("GOAL is empty: say what should be achieved")
    _limit("--max-turns", args.max_turns, 1)
    _limit("--max-goal-steps", args.max_goal_steps, 1)
    _limit("--max-replans", args.max_replans, 0)
    input_value = parse_json_arg("--input", args.input)
    reg = registry_for(args)
    registry = reg[0] if isinstance(reg, tuple) else reg
    provider = _provider(args.provider, args.model)
    planner, evaluator = _provider(args.planner_provider), _provider(args.evaluator_provider)
    shown = None if args.json else GoalProgress()
    final: dict[str, Any] = {}

    def progress(ev: Any) -> None:
        if ev.type == "goal_done":
            final["result"] = ev.data
        if shown is not None:
            shown(ev)

    approve = approver_for(args.approve)
    # A step that needs a person asks only a person (or the explicit --approve answer):
    # off a terminal and without --approve the run stops 'hitl' rather than guessing.
    person = approve if args.approve is not None or approve == "ask" else None
    agent = Agent(provider, tools=registry, max_turns=args.max_turns, approve=approve, model=args.model,
                  on_event=progress)
    try:
        runner = GoalRunner(agent, planner_provider=planner, evaluator_provider=evaluator,
                            max_goal_steps=args.max_goal_steps, max_replans=args.max_replans,
                            subagent_turns=args.max_turns, approve=person, on_event=progress)
    except ValueError as exc:       # MAX_GOAL_STEPS / MAX_REPLAN_ATTEMPTS that are not numbers
        raise UsageError(str(exc)) from None
    result = asyncio.run(_until_done_or_interrupted(runner, args.goal, input_value, final))
    if result is None:
        print("goal cancelled", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print(result.dumps())
    else:
        ex = result.to_json()["goal_execution"]
        print(f"goal {result.status.value}: {ex['steps_run']} step(s) run, {ex['replans']} replan(s)"
              + (f": {result.error}" if result.error else ""), file=sys.stderr)
        print(json.dumps({"output": result.output, "facts": result.facts}, ensure_ascii=False, indent=2,
                         default=str))
    return EXIT_OK if result.ok else EXIT_FAIL


async def _until_done_or_interrupted(runner: Any, goal: str, input_value: Any, final: dict[str, Any]) -> Any:
    """The goal's result; on Ctrl-C (or SIGTERM) the result it had reached (status cancelled)."""
    task = asyncio.ensure_future(runner.arun(goal, input=input_value))
    with on_signals(task.cancel):
        try:
            return await task
        except asyncio.CancelledError:
            return final.get("result")
