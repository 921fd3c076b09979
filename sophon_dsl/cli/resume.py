"""``sophon-dsl resume RUN_ID``: continue a recorded run (committed calls do not run again)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from .common import EXIT_FAIL, EXIT_USAGE, exit_for_status, approver_for, on_signals
from .registry import registry_for

__all__ = ["continue_run", "run"]


def run(args: argparse.Namespace) -> int:
    from .store import open_cli_store

    store = open_cli_store(args.store, create=False)
    try:
        unknown = args.unknown or ("ask" if sys.stdin is not None and sys.stdin.isatty() else "fail")
        return continue_run(args, store, approver_for(args.approve), unknown, args.force)
    finally:
        store.close()


def continue_run(args: argparse.Namespace, store: Any, approve: str, unknown: str, force: bool = False) -> int:
    """Resume ``args.run_id`` from ``store`` with the tools given now, else the run's own."""
    from .store import find_run, stored_config, tool_args
    from ..durable.resume import RUN_NOT_FOUND, StoreRunError
    from ..runtime import PlanInvalid

    row = find_run(args.command, store, args.run_id)
    if row is None:
        return EXIT_USAGE
    if row["spec"].get("kind") == "agent":  # the agent loop (docs/runtime.md, durable agent runs)
        from .agent import resume_agent

        return resume_agent(args, store, row, approve, unknown, force)
    if row["spec"].get("kind") == "goal":
        print(f"sophon-dsl {args.command}: {args.run_id} is a goal: it continues when a person answers "
              f"(sophon-dsl approve {args.run_id} [--reject])", file=sys.stderr)
        return EXIT_FAIL
    from ..durable.report import shown_status

    if shown_status(row) == "interrupted":  # say what happened before continuing it
        print(f"run {args.run_id} was interrupted (its process ended while it ran): continuing it",
              file=sys.stderr)
    meta = stored_config(args, row)  # what the row may configure (durable/trust.py), before any import
    registry, _notes = registry_for(tool_args(args, meta))
    options: dict[str, Any] = {}
    view = None if args.json else _view(row, registry)
    if view is not None:  # the calls that run now, live, as `run` shows them
        options["on_event"] = view
    provider = getattr(args, "provider", None) or meta.get("provider")
    if provider:
        from .run import latent_executor

        options["executor"] = latent_executor(provider, getattr(args, "model", None) or meta.get("model"), view)
        _step_agents(row, registry, store, approve, options, view)
    try:
        outcome = asyncio.run(_resume(args.run_id, store, registry, approve, unknown, force, options))
    except StoreRunError as exc:
        print(f"sophon-dsl {args.command}: {exc.error}: {exc.cause}", file=sys.stderr)
        return EXIT_USAGE if exc.error == RUN_NOT_FOUND else EXIT_FAIL
    except PlanInvalid as exc:
        print(f"sophon-dsl {args.command}: the recorded plan cannot run with these tools: "
              + "; ".join(d.message for d in exc.diagnostics), file=sys.stderr)
        return EXIT_FAIL
    finally:
        if view is not None:
            view.close()
    if args.json:
        print(outcome.dumps())
    else:
        from .run import summarise

        summarise(outcome)
    return exit_for_status(outcome.status)


def _step_agents(row: dict, registry: Any, store: Any, approve: str, options: dict, view: Any) -> None:
    """A resumed ExecutionPlan / step list: its steps run as sub-agents again, each resuming
    its recorded sub-agent (goals/plan_steps.py) rather than asking the model anew."""
    from ..durable.planload import load_stored_plan
    from .run import _has_steps

    try:
        plan = load_stored_plan(row["spec"]["plan"])
    except Exception:  # noqa: BLE001 - aresume reports a plan it cannot load
        return
    if not _has_steps(plan):
        return
    from ..goals.plan_steps import StepAgents

    latent = options["executor"]
    options["executor"] = StepAgents(latent.provider, registry, model=latent.model, approve=approve,
                                     on_event=view.substep if view is not None else None, store=store,
                                     latent=latent)


def _view(row: dict, registry: Any) -> Any:
    """The live progress view of a resumed plan run (None when its stored plan does not
    compile with these tools: the resume itself reports that)."""
    from ..compiler import compile_plan
    from ..durable.planload import load_stored_plan
    from .progress import ProgressView

    try:
        plan = load_stored_plan(row["spec"]["plan"])
        return ProgressView(plan, list(compile_plan(plan, registry).ids))
    except Exception:  # noqa: BLE001 - no view; aresume says what is wrong with the plan
        return None


async def _resume(run_id: str, store: Any, registry: Any, approve: str, unknown: str, force: bool,
                  options: dict) -> Any:
    from ..durable.resume import aresume
    from ..runtime.approval import PromptApprover

    prompt = PromptApprover() if approve == "ask" else None
    task = asyncio.ensure_future(aresume(run_id, store, registry, approve=prompt.ask if prompt else approve,
                                         unknown=unknown, force=force, **options))

    def interrupt() -> None:
        task.cancel()
        if prompt is not None:
            prompt.interrupt()

    with on_signals(interrupt):
        return await task
