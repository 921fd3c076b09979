"""``sophon-dsl agent "REQUEST"``: the execution loop from the command line.

::

    sophon-dsl agent "Find three sources on X" --tools tools.py --provider openai --model gpt-4o-mini
    sophon-dsl agent "..." --tools tools.py --provider scripted:replies.yaml --json

Live progress goes to stderr (one line per event); ``--json`` prints only
``{"status", "output", "state", "turns": [{"calls", "errors"}], "run_id"}``.  Exit codes as
for ``run``: 0 succeeded, 1 failed / rejected / cancelled, 2 usage errors (bad
flags, unreadable input, unknown provider or missing SDK, tools that do not load).

Like ``run``, the agent is recorded in the run store (``--store URL``, ``$SOPHON_DSL_STORE``,
else the per-user default; not with ``--no-store``) and its run id goes to stderr once the run is
registered (as its first turn starts);
``sophon-dsl resume RUN_ID`` continues it (:func:`resume_agent`, docs/runtime.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any, Callable

from .common import (EXIT_FAIL, EXIT_USAGE, UsageError, exit_for_status, approver_for, excerpt_lines, keep_last,
                     parse_json_arg, print_invalid, read_plan, ready_provider, tool_executor_from_flags,
                     until_done_or_interrupted)
from .registry import registry_for as _default_registry_for
from ..diagnostics import visible
from ..ids import uuid4_hex

__all__ = ["AgentProgress", "resume_agent", "run"]

_STEP = {"plan_step_start": "running", "plan_step_complete": "succeeded", "plan_step_failed": "failed",
         "plan_step_skipped": "skipped", "plan_step_cancelled": "cancelled", "plan_step_retry": "retrying"}


class AgentProgress:
    """One line per event on ``stream``: turns, calls arriving / refused, call status, approvals."""

    def __init__(self, stream: Any = None, max_turns: int = 0):
        self.stream = stream or sys.stderr
        self.max_turns = max_turns

    def _print(self, text: str) -> None:
        # tool names, ids, errors and results come from the model's reply and the tools:
        # their control and bidi characters are shown escaped, never sent to the terminal
        print(visible(text), file=self.stream, flush=True)

    def __call__(self, ev: Any) -> None:
        t = ev.type
        if t == "agent_planning" and isinstance(ev.data, dict):
            p = ev.data
            how = "plan first (lazy)" if p.get("plan") else "run as it streams (eager)"
            self._print(f"planning {p.get('mode')}: {how}, score {p.get('score')}, decided by "
                        f"{p.get('decided_by')}" + (f" ({ev.reason})" if ev.reason else ""))
        elif t == "agent_turn_start":
            turn = ev.plan_id.removeprefix("turn")
            what = "replaying the recorded reply" if ev.status == "replayed" else "asking the model"
            self._print(f"turn {turn}/{self.max_turns}: {what}")
        elif t == "agent_resumed" and isinstance(ev.data, dict):
            self._print(f"resuming agent run {ev.data.get('run_id')}: {ev.data.get('recorded_turns')} recorded turn(s)")
        elif t == "agent_call_arrived":
            self._print(f"  [{ev.call_id}] {ev.tool}: accepted")
        elif t == "agent_call_refused":
            err = ev.error or {}
            self._print(f"  [{ev.call_id}] {ev.tool}: refused ({err.get('code')}: {err.get('message')})")
        elif t in _STEP and ev.call_id:
            from .progress import step_detail

            detail = step_detail(ev)
            self._print(f"  [{ev.call_id}] {ev.tool}: {_STEP[t]}" + (f"  {detail}" if detail else ""))
        elif t == "agent_dry_run" and isinstance(ev.data, dict):
            self._print("  " + str(ev.data.get("text") or f"dry-run: {ev.data.get('status')}").replace("\n", "\n  "))
        elif t == "approval_requested" and _plan_approval(ev.data):
            from ..loader import dumps

            self._print("  plan for approval:\n    " + dumps(ev.data.plan, "dsl").rstrip().replace("\n", "\n    "))
        elif t in ("approval_granted", "approval_rejected"):
            self._print(f"  approval: {t.removeprefix('approval_')}" + (f" ({ev.reason})" if ev.reason else ""))
        elif t == "agent_turn_end":
            self._turn_end(ev.data)
        elif t == "provider_failover":
            self._print(f"  provider: {ev.reason}")

    def _turn_end(self, rec: Any) -> None:
        counts: dict[str, int] = {}
        for c in rec.calls:
            counts[c["status"]] = counts.get(c["status"], 0) + 1
        parts = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no calls"
        more = f"; {len(rec.errors)} error(s)" if rec.errors else ""
        fin = "; final output" if rec.output is not None and not rec.errors else ""
        self._print(f"turn {rec.number}: {parts}{more}{fin}")
        for err in rec.errors:
            if not err.get("id"):  # errors of a call were shown as it was refused or failed
                self._print(_turn_error(err, rec.reply))


def _turn_error(err: dict, reply: Any) -> str:
    """One error of a turn not tied to a call (a reply that does not parse, a bad final output):
    its code, where in the model's reply, and the reply's line with a caret."""
    from ..diagnostics import Span

    e = err.get("error") or {}
    if not isinstance(e, dict):
        return f"  error: {e}"
    code = e.get("code") or e.get("error") or "error"
    message = e.get("message") or e.get("cause") or ""
    line, column = e.get("line"), e.get("column")
    if not (isinstance(line, int) and isinstance(column, int)):
        return f"  error[{code}]: {message}"
    lines = excerpt_lines(reply, Span.point(line, column)) if isinstance(reply, str) else []
    return "\n".join([f"  reply:{line}:{column}: error[{code}]: {message}", *("  " + x for x in lines)])


def run(args: argparse.Namespace, registry_for: Callable[[argparse.Namespace], Any] = _default_registry_for) -> int:
    """``registry_for(args)`` returns the tool registry, or ``(registry, notes)``."""
    from ..llm.agent import Agent

    if not args.request.strip():
        raise UsageError("REQUEST is empty: say what the agent should do")
    if args.max_turns is None:  # 8, or the seed's 100 under --planning (planning.limits)
        from ..planning.limits import default_max_turns

        args.max_turns = default_max_turns(getattr(args, "planning", None))
    if args.max_turns < 1:
        raise UsageError("--max-turns must be at least 1")
    if args.max_turns > 500:  # sophon_dsl.planning.limits.HARD_LIMIT (not imported: --help stays light)
        raise UsageError("--max-turns must be at most 500 (the hard iteration limit)")
    if args.max_calls is not None and args.max_calls < 1:
        raise UsageError("--max-calls must be at least 1")
    if args.delegate_dir is not None and not os.path.isdir(args.delegate_dir):
        raise UsageError(f"--delegate-dir: {args.delegate_dir!r} is not a directory")
    tool_executor = tool_executor_from_flags(args)
    if tool_executor is False:
        return EXIT_USAGE
    input_value = parse_json_arg("--input", args.input)
    state_value = parse_json_arg("--state", args.state, object_only=True)
    given = None
    if args.plan is not None:   # the Plan message to continue from (seed 004)
        loaded = read_plan(args.plan, None)
        if not loaded.ok:
            print_invalid(loaded.diagnostics, {loaded.plan.file or "": loaded.plan.source or ""}, args.json)
            print("--plan: the plan does not load: nothing was sent", file=sys.stderr)
            if tool_executor is not None:
                tool_executor.close()
            return EXIT_FAIL
        given = loaded.plan
    reg = registry_for(args)
    registry = reg[0] if isinstance(reg, tuple) else reg
    provider = ready_provider(args.provider, args.model)
    on_event, final = keep_last("agent_done", None if args.json else AgentProgress(max_turns=args.max_turns))

    _listen_to_failover(provider, on_event)
    store, run_id = _store(args)
    if args.approve == "wait" and store is None:
        raise UsageError("--approve wait leaves the run waiting in its store: drop --no-store")
    if run_id is not None:
        on_event = _announcing(run_id, on_event)
    agent = Agent(provider, tools=registry, mode=args.mode, max_turns=args.max_turns,
                  approve=approver_for(args.approve), max_calls=args.max_calls, model=args.model,
                  on_event=on_event, delegate_dir=args.delegate_dir, planning=getattr(args, "planning", None),
                  stream_order=getattr(args, "stream_order", "any"), store=store, run_id=run_id,
                  reply_form=getattr(args, "reply_form", "dsl"),
                  max_time=args.max_time, max_tokens=args.max_tokens,
                  **({"max_reply_bytes": args.max_reply_bytes} if getattr(args, "max_reply_bytes", None) else {}),
                  store_meta=_meta(args) if store is not None else None,
                  dispatch=getattr(args, "dispatch", "streamed"), stateless=args.stateless,
                  run_options=_run_options(args, tool_executor))
    if getattr(args, "smart_retry", False):  # one suggested alternative per failed call (planning.advisor)
        from ..planning.advisor import LLMAdvisor

        agent.run_options["advisor"] = LLMAdvisor(provider, args.model)
    try:
        from ..runtime.watchdog import run_sync  # (asyncio.run, but a call a run abandoned does not hold it)

        result = run_sync(until_done_or_interrupted(
            agent.arun(args.request, input=input_value, state=state_value, plan=given), final))
    finally:
        if tool_executor is not None:
            tool_executor.close()
        if store is not None:
            store.close()
    return _report(args, result)


def _announcing(run_id: str, on_event: Callable[[Any], None]) -> Callable[[Any], None]:
    """``on_event``, which also prints ``run id: ...`` on stderr when the first turn starts:
    the run is registered in its store by then, so a printed id can always be resumed (the
    planning decision, which may ask the provider, comes before the registration)."""
    told = False

    def on(ev: Any) -> None:
        nonlocal told
        if not told and ev.type == "agent_turn_start":
            told = True
            print(f"run id: {run_id}", file=sys.stderr, flush=True)
        on_event(ev)

    return on


def _report(args: argparse.Namespace, result: Any) -> int:
    if result is None:
        print("agent cancelled", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print(result.dumps())
    else:
        print(f"agent {result.status} after {len(result.turns)} turn(s)"
              + (f": {result.error}" if result.error and result.status != "succeeded" else ""), file=sys.stderr)
        if result.status == "waiting" and result.waiting:
            calls = ", ".join(f"{c.get('id')} ({c.get('tool')})" for c in result.waiting.get("calls") or [])
            print(f"  waiting for approval of {calls or result.waiting['decision']}", file=sys.stderr)
        shown = dict(result.state)
        if result.output is not None:
            shown["output"] = result.output
        print(json.dumps(shown, ensure_ascii=False, indent=2, default=str))
    return exit_for_status(result.status)


def _run_options(args: argparse.Namespace, tool_executor: Any) -> dict | None:
    """The RunOptions the agent's turns get from the flags."""
    options: dict[str, Any] = {}
    if tool_executor is not None:
        options["tool_executor"] = tool_executor
    if getattr(args, "max_threads", None) is not None:
        options["max_threads"] = args.max_threads
    if getattr(args, "cascade", None) is not None:
        options["cascade"] = args.cascade
    return options or None


def _store(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The run store the agent is recorded in (None with --no-store) and the run's id."""
    from .store import open_cli_store

    if getattr(args, "no_store", False):
        return None, None
    return open_cli_store(getattr(args, "store", None)), uuid4_hex()


def _meta(args: argparse.Namespace) -> dict:
    """What a resume from another process needs again: the tool flags, the provider, the
    delegate directory."""
    from .store import tool_meta
    from ..durable.trust import seal_meta

    meta = tool_meta(args)
    meta["delegate_dir"] = os.path.abspath(args.delegate_dir) if args.delegate_dir else None
    return seal_meta(meta)


def resume_agent(args: argparse.Namespace, store: Any, row: dict, approve: str, unknown: str,
                 force: bool = False) -> int:
    """``sophon-dsl resume RUN_ID`` of an agent run: the run's tools, provider and model unless
    given again (``--tools``, ``--provider``, ``--model``); recorded replies are not asked for again."""
    from .store import stored_config, tool_args
    from ..durable.resume import LEASE_HELD, StoreRunError
    from ..llm.agent import Agent

    meta = stored_config(args, row)  # what the row may configure (durable/trust.py), before any import
    provider_spec = getattr(args, "provider", None) or meta.get("provider")
    if not provider_spec:
        raise UsageError(f"run {args.run_id} recorded no provider: give --provider")
    model = getattr(args, "model", None) or meta.get("model")
    registry, _notes = _default_registry_for(tool_args(args, meta))
    provider = ready_provider(provider_spec, model)
    max_turns = (row["spec"].get("options") or {}).get("max_turns") or 0
    on_event, final = keep_last("agent_done", None if args.json else AgentProgress(max_turns=max_turns))
    _listen_to_failover(provider, on_event)
    agent = Agent(provider, tools=registry, approve=approve, model=model, on_event=on_event,
                  delegate_dir=meta.get("delegate_dir"), store=store)
    try:
        result = asyncio.run(until_done_or_interrupted(agent.aresume(args.run_id, unknown=unknown, force=force),
                                                       final))
    except StoreRunError as exc:
        print(f"sophon-dsl {args.command}: {exc.error}: {exc.cause}", file=sys.stderr)
        return EXIT_FAIL if exc.error == LEASE_HELD else EXIT_USAGE
    return _report(args, result)


def _listen_to_failover(provider: Any, on_event: Callable[[Any], None]) -> None:
    """A provider list (``openai,anthropic``) tells ``on_event`` when it moves to the next one."""
    from ..llm.providers.failover import FailoverProvider

    if isinstance(provider, FailoverProvider) and provider.on_event is None:
        provider.on_event = on_event


def _plan_approval(data: Any) -> bool:
    """Whether an ``approval_requested`` event's data asks about a whole plan (its text is
    shown), not one call."""
    from ..runtime.approval import ApprovalRequest  # (the core loads when a command runs)

    return isinstance(data, ApprovalRequest) and data.kind == "plan"
