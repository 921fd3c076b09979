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

from .common import (EXIT_FAIL, EXIT_OK, UsageError, approver_for, keep_last, parse_json_arg, ready_provider,
                     until_done_or_interrupted)
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
    return None if spec is None else ready_provider(spec, model)


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
    progress, final = _watch(args.json)
    approve = approver_for(args.approve)
    # A step that needs a person asks only a person (or the explicit --approve answer):
    # off a terminal and without --approve the run stops 'hitl' rather than guessing.
    person = approve if args.approve is not None or approve == "ask" else None
    cascade = getattr(args, "cascade", None) or "skip"
    agent = Agent(provider, tools=registry, max_turns=args.max_turns, approve=approve, model=args.model,
                  on_event=progress, run_options={"cascade": cascade})
    store, run_id = _store(args)
    try:
        runner = GoalRunner(agent, planner_provider=planner, evaluator_provider=evaluator,
                            max_goal_steps=args.max_goal_steps, max_replans=args.max_replans,
                            subagent_turns=args.max_turns, approve=person, on_event=progress, store=store,
                            store_meta=_meta(args), cascade=cascade)
    except ValueError as exc:       # MAX_GOAL_STEPS / MAX_REPLAN_ATTEMPTS that are not numbers
        raise UsageError(str(exc)) from None
    if run_id is not None:
        print(f"goal run id: {run_id}", file=sys.stderr)
    try:
        result = asyncio.run(until_done_or_interrupted(runner.arun(args.goal, input=input_value, run_id=run_id),
                                                        final))
    finally:
        if store is not None:
            store.close()
    return _report(args, result)


def _store(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The run store the goal is recorded in (unless --no-store) and the goal's run id."""
    import uuid

    from .store import open_cli_store

    if args.no_store:
        return None, None
    return open_cli_store(args.store), f"goal-{uuid.uuid4().hex[:12]}"


def _meta(args: argparse.Namespace) -> dict:
    """What ``sophon-dsl approve`` needs to continue the goal in another process."""
    from .store import tool_meta
    from ..durable.trust import seal_meta

    return seal_meta({**tool_meta(args), "planner_provider": args.planner_provider,
                      "evaluator_provider": args.evaluator_provider, "max_turns": args.max_turns,
                      "max_goal_steps": args.max_goal_steps, "max_replans": args.max_replans,
                      "approve": args.approve})


def _watch(as_json: bool) -> tuple[Any, dict[str, Any]]:
    """The goal's event callback (the progress lines unless ``as_json``) and where it keeps
    the last result (a cancelled goal's steps reached)."""
    return keep_last("goal_done", None if as_json else GoalProgress())


def continue_goal(args: argparse.Namespace, store: Any, row: dict) -> int:
    """``sophon-dsl approve RUN_ID`` on a goal: rebuild the runner from what the goal kept
    (tools, providers, limits) and continue it with the stored answer."""
    from .store import stored_config, tool_args
    from ..goals import GoalResumeError, GoalRunner
    from ..llm.agent import Agent

    # the tools, providers and approval mode come from the row only when it can vouch for
    # them (durable/trust.py); the limits are plain numbers and always do
    stored = (row.get("spec") or {}).get("meta") or {}
    meta = {**{k: v for k in ("max_turns", "max_goal_steps", "max_replans")
                for v in [stored.get(k)] if isinstance(v, int) and not isinstance(v, bool) and v > 0},
            **stored_config(args, row)}
    for k in ("provider", "model"):  # (given again on the command line)
        if getattr(args, k, None):
            meta[k] = getattr(args, k)
    registry, _notes = registry_for(tool_args(args, meta))
    approve = approver_for(meta.get("approve"))
    progress, final = _watch(args.json)
    agent = Agent(_provider(meta.get("provider"), meta.get("model")), tools=registry,
                  max_turns=meta.get("max_turns") or 4, approve=approve, model=meta.get("model"), on_event=progress)
    runner = GoalRunner(agent, planner_provider=_provider(meta.get("planner_provider")),
                        evaluator_provider=_provider(meta.get("evaluator_provider")),
                        max_goal_steps=meta.get("max_goal_steps"), max_replans=meta.get("max_replans"),
                        subagent_turns=meta.get("max_turns") or 4, on_event=progress, store=store,
                        store_meta=stored)  # (the row keeps the meta it had: its seal still holds)
    try:
        result = asyncio.run(until_done_or_interrupted(runner.aresume(args.run_id), final))
    except GoalResumeError as exc:
        print(f"sophon-dsl {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAIL
    return _report(args, result)


def _report(args: argparse.Namespace, result: Any) -> int:
    if result is None:
        print("goal cancelled", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print(result.dumps())
    else:
        ex = result.to_json()["goal_execution"]
        print(f"goal {result.status.value}: {ex['steps_run']} step(s) run, {ex['replans']} replan(s)"
              + (f": {result.error}" if result.error else ""), file=sys.stderr)
        if result.status.value == "hitl" and result.run_id:
            print(f"  waiting for a person: sophon-dsl approve {result.run_id} [--reject]", file=sys.stderr)
        print(json.dumps({"output": result.output, "facts": result.facts}, ensure_ascii=False, indent=2,
                         default=str))
    return EXIT_OK if result.ok else EXIT_FAIL
