"""The execution loop (Acts 010 and 012): the model writes plans, the interpreter runs them.

::

    from sophon_dsl.llm.agent import Agent
    agent = Agent(provider=my_provider, tools=[search, send], mode="eager", max_turns=6)
    result = agent.run("Compare three competitors", input={"topic": "x"})
    result.status, result.output, result.to_json()

Each turn sends a request (system prompt teaching the DSL + tool signatures; the
context: input, state with its schema, the previous turn's plan as a Plan
message, the previous turn's error messages ``{call, error}``) and streams the
reply.  The reply is a *solution* ``{calls, output}``, written in the DSL (calls
plus ``return value``) or as seed-shaped JSON; the form is detected.

* eager mode: each call is checked the moment its text is complete and handed
  to the scheduler at once (:mod:`sophon_dsl.llm.stream`); latent calls may
  carry their result inline (``-> value``), others run through the LLM latent
  executor; risky calls (risk >= medium) pass the approver first;
* lazy mode: the whole plan is checked, dry-run and sent for approval before
  any call runs; a plan that fails ``check`` runs none of its calls.

After the calls of a turn have run: a non-null output (and no errors in the
turn) ends the loop; otherwise the next turn sees the new state, the plan and
the errors, so it can go on or repair.  The loop is bounded by ``max_turns``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checks.schema import offline_validator
from ..diagnostics import Diagnostic
from ..model import Call, Mode, Plan, Risk
from ..runtime.risk import effective_risk
from ..runtime.approval import ApprovalRequest, decide, normalize_approver
from ..runtime.events import Event, EventBus
from ..runtime.scheduler import RunOptions
from ..tools import ToolRegistry, ToolSpec, as_registry
from .delegate import DelegateExecutor
from .latent import LLMLatentExecutor
from .prompt import build_messages
from .provider import Message, Provider, ProviderError, check_ready
from .stream import StreamTurn, TurnOutcome, diagnostic_error

__all__ = ["Agent", "AgentResult", "TurnRecord", "warm_up"]

_WARM = False


def warm_up() -> None:
    """Build the DSL parser and import the checker once, so the first streamed call is not slow."""
    global _WARM
    if _WARM:
        return
    import jsonschema  # noqa: F401 - the checker validates literals with it

    from ..compiler import compile_plan
    from ..runtime.scheduler import Scheduler  # noqa: F401 - imported ahead of the first turn
    from ..syntax.dsl_parser import parse_dsl

    plan, _ = parse_dsl('$state.x = warm(a=1)\n')
    compile_plan(plan, tools=ToolRegistry([]))
    _WARM = True


@dataclass
class TurnRecord:
    """One turn: what the model wrote and what happened to each call."""

    number: int
    reply: str
    form: str
    plan: Plan
    calls: list[dict]
    errors: list[dict]
    status: str                 # the run's status, "invalid" (lazy, failed check) or "rejected"
    output: Any = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    dispatch_latency: dict[str, float] = field(default_factory=dict)
    dry_run: dict | None = None
    messages: list[Message] = field(default_factory=list, repr=False)
    state_after: dict | None = field(default=None, repr=False)   # every kind after the turn (None: nothing ran)
    provider_error: dict | None = None   # ProviderError.to_json() when the provider failed this turn

    def to_json(self) -> dict:
        out: dict[str, Any] = {"calls": self.calls, "errors": self.errors}
        if self.provider_error is not None:
            out["provider_error"] = self.provider_error
        return out


@dataclass
class AgentResult:
    """``status``: succeeded, failed, rejected or cancelled; ``state`` maps each kind to its data."""

    status: str
    output: Any
    state: dict
    turns: list[TurnRecord]
    error: str | None = None
    provider_error: dict | None = None   # the ProviderError that ended the run, as ProviderError.to_json()
    planning: dict | None = None   # PlanningDecision.to_json() when planning was asked for
    usage: dict | None = None      # tokens and cost of the model calls, when a budget is set

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    def to_json(self) -> dict:
        out = {"status": self.status, "output": self.output, "state": self.state,
               "turns": [t.to_json() for t in self.turns]}
        if self.error is not None and self.status != "succeeded":
            out["error"] = self.error
        if self.provider_error is not None:
            out["provider_error"] = self.provider_error
        if self.planning is not None:
            out["planning"] = self.planning
        if self.usage is not None:
            out["usage"] = self.usage
        return out

    def dumps(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=indent, default=str)


def _agent_event(type_: str, turn: int, status: str = "", *, call_id: str | None = None, tool: str | None = None,
                 reason: str | None = None, error: dict | None = None, data: Any = None) -> Event:
    return Event(type_, f"turn{turn}", None, None, 0, status, call_id=call_id, tool=tool, reason=reason,
                 error=error, data=data)


class Agent:
    """The LLM execution loop over a tool registry.

    ``provider``: a :class:`~sophon_dsl.llm.provider.Provider` (or a spec string for
    ``sophon_dsl.llm.providers.get_provider``).  ``tools``: anything
    :func:`~sophon_dsl.tools.as_registry` accepts; the standard library is added as for
    :func:`sophon_dsl.check` (``stdlib=False``, a config or group names change that; a
    :class:`~sophon_dsl.tools.ToolRegistry` is taken as the exact set of tools).  ``approve``: ``"yes"``/True,
    ``"no"``/False (default: risky calls are refused, other calls run), ``"ask"``
    (terminal prompt) or a callable (``ApprovalRequest -> decision``).
    """

    def __init__(self, provider: Any, tools: Any = None, *, mode: str | Mode = "eager", max_turns: int | None = None,
                 approve: Any = "no", max_calls: int | None = 20, model: str | None = None,
                 output_schema: Any = None, state_schema: Any = None, on_event: Any = None,
                 latent_provider: Any = None, delegates: dict | None = None,
                 delegate_dir: str | Path | None = None, max_delegate_depth: int = 3,
                 temperature: float | None = None, max_tokens: int | None = None, system: str | None = None,
                 run_options: dict | None = None, approval_risk: Risk = Risk.MEDIUM, stdlib: Any = True,
                 planning: Any = None, guards: Any = None, stream_order: str = "any", _depth: int = 0):
        if isinstance(provider, str):
            from .providers import get_provider  # written alongside this module (issue 5)

            provider = get_provider(provider)
        from ..planning.guards import Guards
        from ..planning.limits import check_max_turns, default_max_turns

        # budget, context window, tool filter, loop detector (sophon_dsl.planning.guards)
        self.guards = guards if guards is not None else Guards()
        self.provider: Provider = self.guards.wrap(provider, model)
        self.registry: ToolRegistry = as_registry(tools, stdlib=stdlib)
        self.mode = Mode(mode)
        if max_turns is None:  # 8 for one request; the seed's MaxToolIterations (100) under planning
            max_turns = default_max_turns(planning)
        check_max_turns(max_turns)   # 1 .. the hard iteration limit (500)
        self.max_turns = max_turns
        self.approve = approve if approve is not None else "no"
        self.max_calls = max_calls
        self.model = model
        self.output_schema = output_schema
        self.state_schema = state_schema
        self.on_event = on_event
        self.latent_provider = latent_provider
        self.delegates = delegates or {}
        self.delegate_dir = delegate_dir
        self.max_delegate_depth = max_delegate_depth
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.system = system
        self.run_options = dict(run_options or {})
        self.approval_risk = approval_risk
        self.stream_order = stream_order  # "any" or "written" (runtime.feed: when streamed reads are decided)
        self._depth = _depth
        # None: no planning asked for, ``mode`` runs every request; else a mode name or a
        # sophon_dsl.planning.PlanningPolicy that picks lazy (plan) or eager per request
        self.planning = planning
        self._approver = normalize_approver(self.approve)

    # -- helpers -------------------------------------------------------------------

    def prompt_tools(self) -> list[ToolSpec]:
        """The tools shown to the model: the caller's own, or the standard ones when there are none."""
        specs = list(self.registry.values())
        own = [s for s in specs if s.origin != "stdlib"]
        return own or specs

    def _emit(self, event: Event) -> None:
        cbs = self.on_event if isinstance(self.on_event, (list, tuple)) else [self.on_event] if self.on_event else []
        for cb in cbs:
            try:
                cb(event)
            except Exception:  # noqa: BLE001 - observers never break the loop
                pass

    def _options(self, eager: bool) -> RunOptions:
        opts = RunOptions()
        for k, v in self.run_options.items():
            setattr(opts, k, v)
        opts.executor = LLMLatentExecutor(self.latent_provider or self.provider, model=self.model,
                                          temperature=self.temperature)
        opts.approver = self._approver
        opts.approval_risk = self.approval_risk
        opts.approve_calls = eager
        return opts

    def _risky(self, plan: Plan, ids: list[str]) -> list[dict]:
        out = []
        for i, call in enumerate(plan.calls):
            r = effective_risk(call, self.registry.get(call.tool))
            if r >= self.approval_risk:
                out.append({"id": ids[i], "tool": call.tool, "risk": r.label, "index": i})
        return out

    # -- the loop ------------------------------------------------------------------------

    def run(self, request: str, *, input: Any = None, state: Any = None,
            instances: dict[str, dict] | None = None, planning: Any = None) -> AgentResult:
        """Synchronous :meth:`arun` (creates an event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(request, input=input, state=state, instances=instances,
                                         planning=planning))
        raise RuntimeError("Agent.run() was called inside a running event loop; use 'await agent.arun(...)'")

    async def arun(self, request: str, *, input: Any = None, state: Any = None,
                   instances: dict[str, dict] | None = None, planning: Any = None) -> AgentResult:
        """Run the loop until the model gives a final output (or ``max_turns`` pass).

        ``instances`` (Act 013): ``{id: {"input": {...}, "state": {...}}}``; a call with
        ``@instance(id)`` reads and writes that instance's data.  ``planning`` (this request's
        planning mode) wins over the agent's.

        Raises :class:`~sophon_dsl.llm.provider.ProviderError` before the first request when a
        provider cannot send one (no API key); a provider failure during a turn ends the run
        with status ``failed`` and the error in ``provider_error``.
        """
        check_ready(self.provider)
        if self.latent_provider is not None:
            check_ready(self.latent_provider)
        warm_up()
        mode, planned = await self._plan_mode(request, planning)
        kinds: dict[str, Any] = {}
        if state is not None:
            kinds["state"] = state
        inst_inputs: dict[str, Any] = {}
        for inst, data in (instances or {}).items():
            data = data or {}
            kinds[f"state@{inst}"] = data.get("state", {})
            if data.get("input") is not None:
                inst_inputs[inst] = data["input"]
        turns: list[TurnRecord] = []
        prev_plan: Plan | None = None
        prev_calls: list[dict] = []
        prev_errors: list[dict] = []
        status, output, error = "failed", None, None
        provider_error: dict | None = None
        delegate = DelegateExecutor(self, depth=self._depth)
        guard = self.guards.start(self.provider)
        try:
            for n in range(1, self.max_turns + 1):
                msgs = build_messages(
                    request, tools=guard.tools(self.prompt_tools(), request), input=input, state=kinds, state_schema=self.state_schema,
                    output_schema=self.output_schema, plan=prev_plan, plan_calls=prev_calls, errors=prev_errors,
                    mode=mode, turn=n, max_turns=self.max_turns, instance_inputs=inst_inputs,
                    system=self.system, max_calls=self.max_calls)
                self._emit(_agent_event("agent_turn_start", n, "running", data=msgs))
                record, stop = await self._turn(n, msgs, input, kinds, inst_inputs, delegate, mode)
                turns.append(record)
                self._emit(_agent_event("agent_turn_end", n, record.status, data=record))
                if record.state_after is not None:
                    kinds = {k: v for k, v in record.state_after.items() if not k.startswith("input")}
                if stop is not None:
                    status, error = stop
                    output = record.output
                    provider_error = record.provider_error
                    break
                if record.output is not None and not record.errors:
                    status, output = "succeeded", record.output
                    break
                told, loop_stop = guard.after_turn(record)
                if loop_stop is not None:   # the model was told at the stop level a turn before
                    status, error, output = "failed", loop_stop, record.output
                    break
                if guard.checkpoint(n):
                    self._emit(_agent_event("agent_progress", n, "running", data={
                        "turn": n, "max_turns": self.max_turns, "calls": sum(len(t.calls) for t in turns),
                        "usage": guard.usage()}))
                prev_plan, prev_calls, prev_errors = record.plan, record.calls, record.errors + told
                output = record.output
            else:
                error = f"no final output after {self.max_turns} turn(s)"
        except asyncio.CancelledError:
            status, error = "cancelled", "the agent was cancelled"
            result = AgentResult(status, output, kinds, turns, error, planning=planned, usage=guard.usage())
            self._emit(_agent_event("agent_done", len(turns), status, reason=error, data=result))
            raise
        result = AgentResult(status, output, kinds, turns, error, provider_error, planned, guard.usage())
        self._emit(_agent_event("agent_done", len(turns), status, reason=error, data=result))
        return result

    async def _turn(self, n: int, msgs: list[Message], input: Any, kinds: dict, inst_inputs: dict,
                    delegate: DelegateExecutor, mode: Mode | None = None) -> tuple[TurnRecord, tuple[str, str] | None]:
        mode = mode or self.mode
        eager = mode is Mode.EAGER
        bus = EventBus(self.on_event if self.on_event else None)

        def on_call(cid: str, call: Call, diags: list[Diagnostic]) -> None:
            errs = [d for d in diags if d.is_error]
            if errs:
                self._emit(_agent_event("agent_call_refused", n, "refused", call_id=cid, tool=call.tool,
                                        error=diagnostic_error(errs[0])))
            else:
                self._emit(_agent_event("agent_call_arrived", n, "accepted", call_id=cid, tool=call.tool))

        turn = StreamTurn(self.registry, mode=mode, input=input, initial=kinds, state_schema=self.state_schema,
                          max_calls=self.max_calls, options=self._options(eager), bus=bus, plan_id=f"turn{n}",
                          delegate=delegate, instance_inputs=inst_inputs, on_call=on_call,
                          order=self.stream_order)
        stop: tuple[str, str] | None = None
        try:
            async for delta in self.provider.stream(msgs, model=self.model, temperature=self.temperature,
                                                    max_tokens=self.max_tokens):
                turn.feed(delta)
        except ProviderError as exc:
            stop = ("failed", f"provider error: {exc}")
            turn.provider_error = exc.to_json()
        except BaseException:
            await asyncio.shield(turn.abort())
            raise
        dry: dict | None = None
        if eager or stop is not None:
            outcome = await turn.finish() if (eager or turn.scheduler is not None) else _invalid(turn)
            if not eager and stop is not None:
                outcome.status = "provider_failed"
        else:
            plan = turn.close_stream()
            if any(d.is_error for d in turn.diagnostics) or turn.errors:
                outcome = await turn.finish()          # nothing was dispatched: status "invalid"
            else:
                outcome, dry, stop = await self._lazy_gate(n, turn, plan, input, kinds)
        errors = list(outcome.errors)
        out = outcome.output
        if out is not None and self.output_schema is not None and not errors:
            msg = _validate(self.output_schema, out)
            if msg:
                errors.append({"call": "return", "error": {"code": "Output.Invalid", "message": msg}})
        record = TurnRecord(n, outcome.reply, outcome.form, outcome.plan, outcome.calls, errors, outcome.status,
                            out, outcome.diagnostics, outcome.dispatch_latency, dry, msgs,
                            outcome.state if outcome.result is not None else None, turn.provider_error)
        return record, stop

    async def _plan_mode(self, request: str, planning: Any) -> tuple[Mode, dict | None]:
        """The mode this request runs in, and the planning decision when planning was asked for
        (sophon_dsl.planning: plan -> lazy, else eager)."""
        chosen = planning if planning is not None else self.planning
        if chosen is None:
            return self.mode, None
        from ..planning.modes import PlanningPolicy, decide

        decision = await decide(request, PlanningPolicy.of(chosen), depth=self._depth,
                                provider=self.latent_provider or self.provider, model=self.model)
        report = decision.to_json()
        self._emit(_agent_event("agent_planning", 0, "plan" if decision.plan else "direct",
                                reason=decision.fallback, data=report))
        return (Mode.LAZY if decision.plan else Mode.EAGER), report

    async def _lazy_gate(self, n: int, turn: StreamTurn, plan: Plan, input: Any,
                         kinds: dict) -> tuple[TurnOutcome, dict | None, tuple[str, str] | None]:
        """Lazy mode: dry-run, approval, then run the checked plan."""
        from ..runtime.dryrun import adry_run

        dry = None
        try:
            report = await adry_run(plan, turn.registry.with_plan_decls(plan.tools), input=input,
                                    state=kinds.get("state"))
            dry = report.to_json()
            dry["text"] = report.to_text()
        except Exception as exc:  # noqa: BLE001 - a failed simulation is information, not a stop
            dry = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
        self._emit(_agent_event("agent_dry_run", n, str(dry.get("status")), data=dry))
        risky = self._risky(plan, turn.ids)
        interactive = callable(self.approve) or (isinstance(self.approve, str) and self.approve.lower() == "ask")
        if risky or interactive:
            max_risk = max((Risk.parse(c["risk"]) for c in risky), default=Risk.NONE)
            req = ApprovalRequest("plan", plan, tuple(risky), plan_id=f"turn{n}", max_risk=max_risk)
            self._emit(_agent_event("approval_requested", n, "pending", data=req))
            decision = await decide(self._approver, req, self.run_options.get("approval_timeout", 600.0))
            if decision.action == "reject":
                self._emit(_agent_event("approval_rejected", n, "rejected", reason=decision.reason))
                outcome = await turn.finish()
                outcome.status = "rejected"
                return outcome, dry, ("rejected", f"plan rejected: {decision.reason}")
            if decision.action == "edit" and decision.plan is not None:
                turn = _replan(turn, decision.plan)
                turn.close_stream()
                if turn.errors:
                    outcome = await turn.finish()
                    outcome.status = "rejected"
                    return outcome, dry, ("rejected", "the edited plan has errors")
            self._emit(_agent_event("approval_granted", n, "approved", reason=decision.reason))
        turn.options.approve_calls = False
        outcome = await turn.execute()
        return outcome, dry, None


def _replan(turn: StreamTurn, plan: Plan) -> StreamTurn:
    fresh = StreamTurn(turn.registry, mode=turn.mode, input=turn.input, initial=turn.initial,
                       state_schema=turn.header.state_schema, max_calls=turn.max_calls, options=turn.options,
                       bus=turn.bus, plan_id=turn.plan_id, delegate=turn.delegate,
                       instance_inputs=turn.instance_inputs, dispatch=False)
    from ..loader import dumps

    fresh.feed(dumps(plan, "dsl"))
    return fresh


def _invalid(turn: StreamTurn) -> TurnOutcome:
    plan = turn.close_stream()
    return TurnOutcome(plan, turn.text, "dsl", list(turn.errors), list(turn.diagnostics), None, None, "invalid")


def _validate(schema: Any, value: Any) -> str | None:
    if not isinstance(schema, dict) or not schema:
        return None
    import jsonschema

    try:
        err = next(iter(offline_validator(schema).iter_errors(value)), None)
    except jsonschema.SchemaError:
        return None
    if err is None:
        return None
    where = "/".join(str(p) for p in err.absolute_path)
    return f"the final output does not match the output schema: {err.message}" + (f" (at /{where})" if where else "")

