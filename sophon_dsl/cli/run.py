"""``sophon-dsl run PLAN``: run a plan against real tools, with a live progress view
(``--json``: only the RunResult)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import (EXIT_FAIL, EXIT_USAGE, UsageError, approver_for, exit_for_status, on_signals, parse_json_arg,
                     placed_in_input, print_diagnostics, print_invalid, provider_usage_error, read_plan,
                     tool_executor_from_flags)
from .progress import ProgressView
from .registry import registry_for

__all__ = ["load_runnable", "run"]


def load_runnable(args: argparse.Namespace) -> tuple | None:
    """(plan, registry, sources) for ``args.plan``, or None after printing its load errors."""
    result = read_plan(args.plan, args.from_format)
    plan = result.plan
    sources = {plan.file or "": plan.source or ""}
    if not result.ok:
        print_invalid(result.diagnostics, sources, getattr(args, "json", False))
        return None
    registry, _notes = registry_for(args)
    # warnings the reader found (the checker's come from compile_plan): `run` shows both
    args.load_warnings = [d for d in result.diagnostics if d.severity.value == "warning"]
    return plan, registry, sources


def plan_warnings(args: argparse.Namespace, plan: Any, compiled: Any) -> list:
    """The warnings ``check`` would print for this plan (reader's and checker's), with its file."""
    seen = list(getattr(args, "load_warnings", ()))
    # W305 asks for an input: when the run has one, the run checks each path itself (E310)
    has_input = args.input is not None or (plan.initial is not None and plan.initial.input is not None)
    for d in compiled.diagnostics:
        if d.severity.value == "warning" and d not in seen and not (d.code == "W305" and has_input):
            seen.append(d)
    return [d.with_file(plan.file) for d in seen]


def run(args: argparse.Namespace) -> int:
    from ..compiler import compile_plan
    from ..runtime import PlanInvalid

    if getattr(args, "smart_retry", False) and not args.provider:
        raise UsageError("--smart-retry needs --provider (the model that suggests alternatives)")
    args.tool_executor = tool_executor_from_flags(args)
    if args.tool_executor is False:
        return EXIT_USAGE
    loaded = load_runnable(args)
    if loaded is None:
        return EXIT_FAIL
    plan, registry, sources = loaded
    compiled = compile_plan(plan, registry)
    # a warning is often the reason a run does the wrong thing (W101: text sent instead of a
    # value), so `run` shows them as `check` does, before anything starts
    # (a plan with errors is refused below with every diagnostic, these included)
    warnings = plan_warnings(args, plan, compiled) if compiled.ok else []
    if warnings and args.strict:
        print_invalid(warnings, sources, args.json)
        print("run --strict: the plan has warnings: nothing was started", file=sys.stderr)
        return EXIT_FAIL
    print_diagnostics(warnings, sources, False)
    view = None if args.json else ProgressView(plan, list(compiled.ids))
    try:
        from ..runtime.watchdog import run_sync  # (asyncio.run, but a call the run abandoned does not hold it)

        outcome = run_sync(_run_async(plan, registry, args, view))
    except PlanInvalid as exc:
        placed = placed_in_input(exc.diagnostics, args.input, sources)
        print_invalid([d.with_file(plan.file) for d in placed], sources, args.json)
        print("the plan cannot run: nothing was started", file=sys.stderr)
        return EXIT_FAIL
    finally:
        if view is not None:
            view.close()
        if args.tool_executor is not None:
            args.tool_executor.close()
    if args.json:
        data = outcome.to_json()
        data["warnings"] = [d.to_dict() for d in warnings]
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        summarise(outcome)
    return exit_for_status(outcome.status)


async def _run_async(plan: Any, registry: Any, args: argparse.Namespace, view: ProgressView | None) -> Any:
    # Ctrl-C / SIGTERM are ours before anything else runs on the loop: building the options
    # opens the store and start() prepares the run, which can take a second.  A signal then,
    # left to asyncio.run's own SIGINT handler, cancelled this coroutine: the calls already
    # started were cancelled, their results never printed, and the command ended
    # "interrupted" (130) instead of with the run's summary and state (exit 1).  Under
    # on_signals a signal is a loop callback, run at the first await below, when the handle
    # exists.
    pending: dict[str, Any] = {}

    def interrupt() -> None:
        handle = pending.get("handle")
        if handle is not None:
            handle.cancel()
        prompt = pending.get("prompt")
        if prompt is not None:  # a pending "Approve?" answers no at once: the run is cancelled
            prompt.interrupt()

    with on_signals(interrupt):
        return await _start_run(plan, registry, args, view, pending).result()


def _start_run(plan: Any, registry: Any, args: argparse.Namespace, view: ProgressView | None,
               pending: dict[str, Any]) -> Any:
    """The started run's handle (also ``pending["handle"]``; its prompt ``pending["prompt"]``)."""
    from ..runtime import start
    from ..runtime.approval import PromptApprover

    approve = approver_for(args.approve)
    prompt = pending["prompt"] = PromptApprover() if approve == "ask" else None
    options: dict[str, Any] = {"approve": prompt.ask if prompt is not None else approve}
    if view is not None:
        options["on_event"] = view
    for name in ("max_concurrency", "max_threads", "timeout", "max_time", "max_memory", "max_calls",
                 "max_expanded_calls", "cascade"):
        value = getattr(args, name, None)  # (commands that share this runner may lack the budget flags)
        if value is not None:
            options[name] = value
    if args.provider:
        options["executor"] = latent_executor(args.provider, args.model, view)
        if getattr(args, "smart_retry", False):
            from ..planning.advisor import LLMAdvisor

            options["advisor"] = LLMAdvisor(options["executor"].provider, args.model)
    if args.tool_executor is not None:
        options["tool_executor"] = args.tool_executor
    from .store import run_store_options

    run_store_options(args, options)  # recorded for resume unless --no-store (docs/runtime.md)
    if args.provider and _has_steps(plan):
        options["executor"] = step_agents(options, registry, args, view)
    handle = start(plan, registry, input=parse_json_arg("--input", args.input),
                   state=parse_json_arg("--state", args.state, object_only=True), **options)
    pending["handle"] = handle
    if "store" in options:
        print(f"run id: {handle.run_id}", file=sys.stderr)
    return handle


def _has_steps(plan: Any) -> bool:
    from ..syntax.documents import STEP_TOOL

    return any(c.tool == STEP_TOOL for c in plan.calls)


def step_agents(options: dict, registry: Any, args: argparse.Namespace, view: ProgressView | None) -> Any:
    """An imported ExecutionPlan's / step list's steps run as sub-agents with the run's tools
    (goals/plan_steps.py); the other latent calls keep the latent executor built above."""
    from ..goals.plan_steps import StepAgents

    latent = options["executor"]
    run_options = {"tool_executor": options["tool_executor"]} if "tool_executor" in options else {}
    return StepAgents(latent.provider, registry, model=args.model, max_turns=getattr(args, "max_turns", None) or 4,
                      strict_tool_hints=bool(getattr(args, "hinted_tools_only", False)), approve=options["approve"],
                      on_event=view.substep if view is not None else None, run_options=run_options,
                      store=options.get("store"), latent=latent)


def latent_executor(spec: str, model: str | None, view: ProgressView | None = None) -> Any:
    from ..llm.latent import LLMLatentExecutor
    from ..llm.providers import get_provider
    from ..llm.providers.failover import FailoverProvider

    try:
        provider = get_provider(spec, model=model)
        if view is not None and isinstance(provider, FailoverProvider):
            provider.on_event = view  # the view prints a line when a request moves to the next provider
        return LLMLatentExecutor(provider, model=model)
    except Exception as exc:
        usage = provider_usage_error(spec, exc)
        if usage is None:
            raise
        raise usage from None


def _risky_names(outcome: Any) -> str:
    """``c5 (gmail.send), ...``: the calls the approval was asked for."""
    from ..runtime.approval import ApprovalRequest, describe_rejected

    for event in outcome.events:
        if event.type == "approval_requested" and isinstance(event.data, ApprovalRequest):
            return describe_rejected(event.data)
    return "see dry-run"


def summarise(outcome: Any) -> None:
    counts: dict[str, int] = {}
    for rec in outcome.calls:
        counts[rec.status] = counts.get(rec.status, 0) + 1
    # a plan that succeeds despite failed calls caught them (a `||` branch took the error)
    caught = " (caught)" if outcome.status == "succeeded" else ""
    parts = ", ".join(f"{n} {status}{caught if status == 'failed' else ''}" for status, n in sorted(counts.items()))
    # a run the plan gate leaves waiting (or rejects) has no call records: say so rather than
    # end the line at its colon
    print(f"plan {outcome.status}: {parts or 'no call started'}", file=sys.stderr)
    if outcome.status == "waiting":
        print(f"  waiting for approval: sophon-dsl approve {outcome.run_id} [--reject]", file=sys.stderr)
    if outcome.error is not None and outcome.status != "succeeded":
        err = outcome.error.to_json()
        print(f"  {err.get('error')}: {err.get('cause')}", file=sys.stderr)
        if outcome.status == "rejected" and err.get("cause") == "auto-rejected":
            print(f"  the plan has risky calls: {_risky_names(outcome)}; review it and pass --approve yes "
                  "(or ask) to run it", file=sys.stderr)
    shown: dict[str, Any] = dict(outcome.state)
    if outcome.output is not None:
        shown["output"] = outcome.output
    print(json.dumps(shown, ensure_ascii=False, indent=2, default=str))
