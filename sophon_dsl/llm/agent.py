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

Durable runs (``store=``, docs/runtime.md): each turn's reply is recorded as it streams and
each turn's calls are journaled like a plan run's; :meth:`Agent.aresume` continues a recorded
run without asking the provider again for a recorded reply (:mod:`sophon_dsl.durable.agent_run`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import InsideEventLoop, OptionError
from ..checks.schema import offline_validator
from ..diagnostics import Diagnostic
from ..model import Call, Mode, Plan, Risk
from ..runtime.approval import ApprovalRequest, Approver, decide, normalize_approver
from ..runtime.events import Event, EventBus
from ..runtime.gate import ApprovalScope, TaintSet, plan_risky
from ..runtime.scheduler import RunOptions
from ..tools import ToolRegistry, ToolSpec, as_registry
from ..toolsource import resolve_tools
from .delegate import DelegateExecutor
from .latent import LLMLatentExecutor
from .prompt import build_messages
from .provider import (DEFAULT_MAX_REPLY_BYTES, REPLY_TOO_LARGE, Message, Provider, ProviderError, check_ready,
                       close_stream, reply_bytes)
from .stream import StreamTurn, TurnOutcome, diagnostic_error
from ..ids import uuid4_hex

if TYPE_CHECKING:
    from ..durable.agent_run import AgentRecord
    from ..durable.session import DurableRun
    from ..runtime.scheduler import Scheduler

__all__ = ["AGENT_MESSAGE", "Agent", "AgentResult", "DEFAULT_MAX_CALLS", "DISPATCHES", "TurnRecord", "USER_MESSAGE",
           "warm_up"]

# the session log (seed 002's first middleware): the request as it came in, the answer as it
# went out, one event each through on_event, kept in AgentResult.session and a durable run's row
USER_MESSAGE = "user_message"
AGENT_MESSAGE = "agent_message"

# Calls one turn may run, map items included.  20 (Sophon's PlanMaxSteps) broke plain plans: 20
# fetches and a join written without `map` ran the fetches, then lost the join and a turn.
DEFAULT_MAX_CALLS = 100
# When an eager turn's calls start: as each one's text arrives, or once the whole reply is read
DISPATCHES = ("streamed", "after_reply")

# what each turn may reply, sent with every request (seed 002's MaxTokens): a provider's
# own default can be far lower (a cut reply is a broken plan) or unbounded (cost)
DEFAULT_MAX_TOKENS = 4096

_WARM = False


def warm_up() -> None:
    """Build the DSL parser and import the checker once, so the first streamed call is not slow."""
    global _WARM
    if _WARM:
        return
    # (not jsonschema: the checker's literals of plain schemas need none, and importing it
    # here delayed the first request by more than the rest of this)
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
    waiting: dict | None = field(default=None, repr=False)  # what the turn left the run waiting for

    def to_json(self) -> dict:
        out: dict[str, Any] = {"calls": self.calls, "errors": self.errors}
        if self.provider_error is not None:
            out["provider_error"] = self.provider_error
        return out


@dataclass
class AgentResult:
    """``status``: succeeded, failed, rejected, cancelled or waiting (a durable run with
    ``approve="wait"``); ``state`` maps each kind to its data."""

    status: str
    output: Any
    state: dict
    turns: list[TurnRecord]
    error: str | None = None
    provider_error: dict | None = None   # the ProviderError that ended the run, as ProviderError.to_json()
    planning: dict | None = None   # PlanningDecision.to_json() when planning was asked for
    usage: dict | None = None      # tokens and cost of the model calls, when a budget is set
    run_id: str | None = None      # the run's id in its store (durable runs)
    # status "waiting" (approve="wait"): what it waits for: {decision, kind, call_id, calls, decision_run}
    waiting: dict | None = None
    # the session log: [the user_message, the agent_message] (see session_message)
    session: list[dict] | None = None

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
        if self.run_id is not None:
            out["run_id"] = self.run_id
        if self.waiting is not None:
            out["waiting"] = self.waiting
        if self.session is not None:
            out["session"] = self.session
        return out

    def dumps(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=indent, default=str)


def session_message(type_: str, text: str, **extra: Any) -> dict:
    """One entry of the session log: ``{"type": "user_message" | "agent_message", "text", "at"}``
    (``at``: UTC ISO time) and, for the agent's answer, its ``status`` and ``output``."""
    from ..runtime.state import now_iso

    return {"type": type_, "text": text, "at": now_iso(), **extra}


def _answer(status: str, output: Any, error: str | None) -> dict:
    """The agent_message for how a run ended: its output as text (JSON when not a string), or
    the error when there is no output."""
    if isinstance(output, str):
        text = output
    elif output is not None:
        text = json.dumps(output, ensure_ascii=False, default=str)
    else:
        text = error or ""
    return session_message(AGENT_MESSAGE, text, status=status, output=output)


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
    ``reply_form``: ``"dsl"`` (default) teaches the DSL in the system prompt, ``"json"`` the
    seed's JSON form (for JSON-mode models); replies in either form are read.
    ``max_reply_bytes`` (1 MiB; None: no limit): a reply is cut there, its complete calls
    kept, and the next turn is told why (``Reply.TooLarge``), so an endless reply (a stream
    of comments, a string that never closes) cannot grow the process without bound.
    ``dispatch`` (eager mode): ``"streamed"`` (default) starts each call as its text arrives;
    ``"after_reply"`` reads and checks the whole reply first, then starts its calls (a
    plan-then-execute agent; a plan over ``max_calls`` then runs none of its calls).
    ``max_calls``: calls one turn may run, map items included (default 100; None: no limit).
    ``stateless`` (seed 004's execution loop): every turn is sent the plan and the state only
    (the request, input, state and the Plan message with each call's status and errors),
    never a conversation carried from earlier turns.
    """

    def __init__(self, provider: Any, tools: Any = None, *, mode: str | Mode = "eager", max_turns: int | None = None,
                 approve: Any = "no", max_calls: int | None = DEFAULT_MAX_CALLS, model: str | None = None,
                 output_schema: Any = None, state_schema: Any = None, on_event: Any = None,
                 latent_provider: Any = None, delegates: dict | None = None,
                 delegate_dir: str | Path | None = None, max_delegate_depth: int = 3,
                 temperature: float | None = None, max_tokens: int | None = DEFAULT_MAX_TOKENS,
                 system: str | None = None, max_time: float | None = None,
                 run_options: dict | None = None, approval_risk: Risk = Risk.MEDIUM, stdlib: Any = True,
                 planning: Any = None, guards: Any = None, stream_order: str = "any", store: Any = None,
                 run_id: str | None = None, store_meta: dict | None = None, reply_form: str = "dsl",
                 max_reply_bytes: int | None = DEFAULT_MAX_REPLY_BYTES, taint: TaintSet | None = None,
                 dispatch: str = "streamed", stateless: bool = False, _depth: int = 0):
        if isinstance(provider, str):
            from .providers import get_provider  # written alongside this module (issue 5)

            provider = get_provider(provider)
        from ..planning.guards import Guards
        from ..planning.limits import check_max_turns, default_max_turns

        # budget, context window, tool filter, loop detector (sophon_dsl.planning.guards)
        self.guards = guards if guards is not None else Guards()
        self.provider: Provider = self.guards.wrap(provider, model)
        self.registry: ToolRegistry = as_registry(resolve_tools(tools), stdlib=stdlib)
        self.mode = Mode(mode)
        if max_turns is None:  # 8 for one request; the seed's MaxToolIterations (100) under planning
            max_turns = default_max_turns(planning)
        check_max_turns(max_turns)   # 1 .. the hard iteration limit (500)
        self.max_turns = max_turns
        self.approve = approve if approve is not None else "no"
        if max_calls is not None and (isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1):
            raise OptionError(f"max_calls must be a positive integer or None, not {max_calls!r}")
        self.max_calls = max_calls
        if dispatch not in DISPATCHES:
            raise OptionError(f"dispatch must be one of {', '.join(map(repr, DISPATCHES))}, not {dispatch!r}")
        self.dispatch = dispatch
        self.stateless = bool(stateless)
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
        if max_time is not None and not max_time > 0:  # (also refuses nan)
            raise OptionError(f"max_time must be a number of seconds > 0, not {max_time!r}")
        self.max_time = max_time
        self.system = system
        self.run_options = dict(run_options or {})
        _check_run_options(self.run_options)
        self.approval_risk = approval_risk
        self.stream_order = stream_order  # "any" or "written" (runtime.feed: when streamed reads are decided)
        if reply_form not in ("dsl", "json"):
            raise OptionError(f"reply_form must be 'dsl' or 'json', not {reply_form!r}")
        self.reply_form = reply_form  # the form the system prompt teaches; replies in either form are read
        if max_reply_bytes is not None and (isinstance(max_reply_bytes, bool) or not isinstance(max_reply_bytes, int)
                                            or max_reply_bytes < 1):
            raise OptionError(f"max_reply_bytes must be a positive number of bytes or None, not {max_reply_bytes!r}")
        self.max_reply_bytes = max_reply_bytes
        self._depth = _depth
        self.taint = taint if taint is not None else TaintSet()  # shared with sub-agents (goal steps, delegates)
        # None: no planning asked for, ``mode`` runs every request; else a mode name or a
        # sophon_dsl.planning.PlanningPolicy that picks lazy (plan) or eager per request
        self.planning = planning
        # approve="wait" (durable runs): a decision nobody gave yet leaves the run waiting for
        # `sophon-dsl approve RUN_ID` (each turn's recorded run asks its stored decisions first)
        if isinstance(self.approve, str) and self.approve.lower() == "wait":
            if store is None:
                raise OptionError("approve='wait' needs a store: the run waits in it for a decision")
            from ..durable.session import WAIT

            self._approver: Any = WAIT
        else:
            self._approver = normalize_approver(self.approve)
        # durable runs: the run store (a URL or an open store; None: not recorded), the id of the
        # next recorded run (minted when None), and what the CLI keeps with it (tool flags, provider)
        self.store = store
        self.run_id = run_id
        self.store_meta = store_meta

    # -- helpers -------------------------------------------------------------------

    @property
    def depth(self) -> int:
        """How deep this agent nests: 0 for the user's, one more for each sub-agent or delegate
        level (``max_delegate_depth`` bounds it; the planning pipeline reads it)."""
        return self._depth

    def use_approver(self, approver: Approver) -> None:
        """Decide this agent's approvals with ``approver`` from now on (a goal step's
        sub-agent: what the step's plan-level approval covers is approved, nothing beyond)."""
        self.approve = approver
        self._approver = approver

    def delegate_agent(self, provider: Provider, tools: ToolRegistry, config: dict, *, model: str | None,
                       output_schema: Any, state_schema: Any, depth: int) -> Agent:
        """The sub-agent of one ``_delegate`` call (``llm/delegate.py``): an agent of this
        agent's class and settings over ``tools``, on the routed ``provider`` and ``model``,
        with the saved request's ``config`` (``mode``, ``max_turns``) winning."""
        return type(self)(provider, tools=tools,
                          mode=config.get("mode", self.mode.value),
                          max_turns=int(config.get("max_turns", min(self.max_turns, 4))),
                          # (a delegate is not recorded: it cannot wait for a person, its risky plans are refused)
                          approve="no" if self.approve == "wait" else self.approve,
                          max_calls=self.max_calls, dispatch=self.dispatch,
                          model=model, output_schema=output_schema,
                          state_schema=state_schema, on_event=None, delegates=self.delegates,
                          delegate_dir=self.delegate_dir, latent_provider=self.latent_provider,
                          max_delegate_depth=self.max_delegate_depth, _depth=depth,
                          taint=self.taint,  # one session: what the parent read is local data here too
                          # a saved request's own mode wins; else it plans as the parent does (depth-limited)
                          planning=None if "mode" in config else self.planning)

    def prompt_tools(self) -> list[ToolSpec]:
        """The tools shown to the model: the caller's own, or the standard ones when there are none."""
        specs = list(self.registry.values())
        own = [s for s in specs if s.origin != "stdlib"]
        return own or specs

    _spans: Any = None  # the run's span recorder while tracing is on (sophon_dsl.telemetry)

    def _emit(self, event: Event) -> None:
        cbs = self.on_event if isinstance(self.on_event, (list, tuple)) else [self.on_event] if self.on_event else []
        if self._spans is not None:
            cbs = [*cbs, self._spans]
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
        # one taint set for the session: data a turn read stays local data in the next turns
        opts.taint = self.taint
        if opts.max_calls is None:  # the calls that run, map items included, not only those written
            opts.max_calls = self.max_calls
        return opts

    def _risky(self, plan: Plan, ids: list[str], registry: Any = None, input: Any = None) -> list[dict]:
        """The calls the plan gate shows, map bodies included (runtime/gate.py)."""
        get = (registry or self.registry).get
        return plan_risky(plan, ids, None, get, self.approval_risk, input)

    # -- the loop ------------------------------------------------------------------------

    def run(self, request: str, *, input: Any = None, state: Any = None,
            instances: dict[str, dict] | None = None, planning: Any = None, run_id: str | None = None,
            plan: Any = None) -> AgentResult:
        """Synchronous :meth:`arun` (creates an event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            from ..runtime.watchdog import run_sync  # (asyncio.run, but a call a run abandoned does not hold it)

            return run_sync(self.arun(request, input=input, state=state, instances=instances,
                                      planning=planning, run_id=run_id, plan=plan))
        raise InsideEventLoop("Agent.run() was called inside a running event loop; use 'await agent.arun(...)'")

    async def arun(self, request: str, *, input: Any = None, state: Any = None,
                   instances: dict[str, dict] | None = None, planning: Any = None,
                   run_id: str | None = None, plan: Any = None) -> AgentResult:
        """Run the loop until the model gives a final output (or ``max_turns`` pass).

        ``plan`` (seed 004, "the plan as a context message"): an existing plan the agent
        continues from -- a :class:`~sophon_dsl.model.Plan`, plan text or data, or a path
        (``sophon_dsl.llm.given_plan.as_plan``); the first turn gets it as its Plan message next
        to ``state``, and the model follows, extends or replaces it.  A plan that does not load
        raises :class:`~sophon_dsl.diagnostics.DiagnosticError` before anything is sent.

        ``instances`` (Act 013): ``{id: {"input": {...}, "state": {...}}}``; a call with
        ``@instance(id)`` reads and writes that instance's data.  ``planning`` (this request's
        planning mode) wins over the agent's.  With a ``store``, the run is recorded under
        ``run_id`` (default: the agent's ``run_id``, else a new one) and can be continued
        with :meth:`aresume`.

        Raises :class:`~sophon_dsl.llm.provider.ProviderError` before the first request when a
        provider cannot send one (no API key); a provider failure during a turn ends the run
        with status ``failed`` and the error in ``provider_error``.
        """
        from .given_plan import as_plan

        given = as_plan(plan)
        check_ready(self.provider)
        if self.latent_provider is not None:
            check_ready(self.latent_provider)
        warm_up()
        # the request is logged before anything else of the pipeline runs (planning included)
        self._user_message = session_message(USER_MESSAGE, request)
        self._emit(_agent_event(USER_MESSAGE, 0, "received", data=self._user_message))
        mode, planned = await self._plan_mode(request, planning)
        record = None
        if self.store is not None:
            from ..durable.agent_run import AgentRecord, agent_hash

            rid, self.run_id = run_id or self.run_id or uuid4_hex(), None
            spec = {"request": request, "input": input, "state": state, "instances": instances,
                    "mode": mode.value, "planning": planned, "options": self._loop_options(), "meta": self.store_meta,
                    "session": [self._user_message]}
            if given is not None:   # (a resume hands the model the same plan)
                from ..loader import dumps

                spec["plan"] = dumps(given, "dsl")
            record = AgentRecord.create(self.store, rid, spec, agent_hash(self.registry, spec["options"]))
        return await self._loop(request, input, state, instances, mode, planned, record, given)

    def resume(self, run_id: str, **kw: Any) -> AgentResult:
        """Synchronous :meth:`aresume` (creates an event loop)."""
        return asyncio.run(self.aresume(run_id, **kw))

    async def aresume(self, run_id: str, *, store: Any = None, unknown: str = "fail",
                      force: bool = False) -> AgentResult:
        """Continue the recorded agent run ``run_id`` (from ``store``, default the agent's, else
        the default store) with this agent's provider and tools, and the run's own request,
        data and loop options (which this agent takes).  Recorded replies are not asked for
        again, committed calls do not run again; calls in doubt follow ``unknown``
        (``"rerun"``, ``"fail"``: ``Call.OutcomeUnknown``, ``"ask"``: the approver).

        Raises :class:`~sophon_dsl.durable.resume.StoreRunError` (``Store.RunNotFound``,
        ``Store.WrongKind``, ``Store.LeaseHeld``, ``Store.PlanChanged`` unless ``force``)
        before anything runs."""
        from ..durable.agent_run import AgentRecord, agent_hash

        check_ready(self.provider)
        if self.latent_provider is not None:
            check_ready(self.latent_provider)
        record, spec = AgentRecord.reopen(store if store is not None else self.store, run_id,
                                          lambda sp: agent_hash(self.registry, sp.get("options") or {}),
                                          unknown=unknown, force=force)
        self._take_options(spec.get("options") or {})
        # the request was logged when the run began (runs recorded before the log: logged now)
        self._user_message = (spec.get("session") or [None])[0] or session_message(USER_MESSAGE, spec["request"])
        warm_up()
        from .given_plan import as_plan

        return await self._loop(spec["request"], spec.get("input"), spec.get("state"), spec.get("instances"),
                                Mode(spec["mode"]), spec.get("planning"), record, as_plan(spec.get("plan")))

    _user_message: dict | None = None  # this run's user_message (set when it starts or resumes)

    def _answered(self, result: AgentResult) -> None:
        """The run ended: its answer is logged (event and ``result.session``) after its request."""
        answer = _answer(result.status, result.output, result.error)
        self._emit(_agent_event(AGENT_MESSAGE, len(result.turns), result.status, data=answer))
        result.session = [m for m in (self._user_message, answer) if m is not None]

    def _time_up(self) -> str:
        return f"Agent.Timeout: the agent's time limit ({self.max_time:g} s, max_time) passed"

    def _loop_options(self) -> dict:
        """What a recorded run keeps of the loop's options (a resume takes them back)."""
        return {"max_turns": self.max_turns, "max_calls": self.max_calls, "model": self.model,
                "temperature": self.temperature, "max_tokens": self.max_tokens, "system": self.system,
                "output_schema": self.output_schema, "state_schema": self.state_schema,
                "stream_order": self.stream_order, "approval_risk": self.approval_risk.label,
                "reply_form": self.reply_form, "max_reply_bytes": self.max_reply_bytes, "dispatch": self.dispatch,
                **({"stateless": True} if self.stateless else {}),   # (the records of other runs unchanged)
                # how a failed call's dependents end changes the run's outcome: a resume keeps it
                **({"cascade": self.run_options["cascade"]} if self.run_options.get("cascade", "skip") != "skip"
                   else {})}

    def _take_options(self, options: dict) -> None:
        for name in ("max_turns", "max_calls", "temperature", "max_tokens", "system", "output_schema",
                     "state_schema", "stream_order", "reply_form", "max_reply_bytes", "dispatch", "stateless"):
            if name in options:
                setattr(self, name, options[name])
        if self.model is None:  # a model named for the resume wins (another provider may need another)
            self.model = options.get("model")
        if options.get("approval_risk"):
            self.approval_risk = Risk.parse(options["approval_risk"])
        if options.get("cascade"):
            self.run_options["cascade"] = options["cascade"]

    async def _loop(self, request: str, input: Any, state: Any, instances: dict | None, mode: Mode,
                    planned: dict | None, record: AgentRecord | None, given: Plan | None = None) -> AgentResult:
        kinds: dict[str, Any] = {}
        if state is not None:
            kinds["state"] = state
        live: list[StreamTurn] = []  # the turn under way (see _turn)
        inst_inputs: dict[str, Any] = {}
        for inst, data in (instances or {}).items():
            data = data or {}
            kinds[f"state@{inst}"] = data.get("state", {})
            if data.get("input") is not None:
                inst_inputs[inst] = data["input"]
        turns: list[TurnRecord] = []
        # the Plan message: a plan handed in (plan=) until the model writes one of its own
        prev_plan: Plan | None = given
        prev_calls: list[dict] = []
        prev_errors: list[dict] = []
        status, output, error = "failed", None, None
        provider_error: dict | None = None
        waiting: dict | None = None
        delegate = DelegateExecutor(self, depth=self._depth)
        guard = self.guards.start(self.provider)
        # with a context window the loop carries its conversation (each earlier turn's reply and
        # outcome); past 80 % the window summarises its oldest 60 % once, and later turns carry
        # the summary instead (planning/context.py, ContextWindow.carry)
        window = guard.window()
        carried: list[Message] = []
        run_id = record.run_id if record is not None else None
        from ..telemetry import agent_subscriber  # (imports no OpenTelemetry: None unless tracing is on)

        self._spans = agent_subscriber(run_id, request, durable=record is not None)
        if record is not None:  # (`sophon-dsl cancel RUN_ID` from another process cancels the loop)
            record.keep_lease(on_cancel=asyncio.current_task().cancel)
            if record.resumed:
                self._emit(_agent_event("agent_resumed", 0, "running", data={
                    "run_id": run_id, "recorded_turns": len(record.replies)}))
        loop = asyncio.get_running_loop()
        deadline = None if self.max_time is None else loop.time() + self.max_time
        try:
            for n in range(1, self.max_turns + 1):
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    status, error = "failed", self._time_up()
                    break
                msgs = build_messages(
                    request, tools=guard.tools(self.prompt_tools(), request, self.registry.get),
                    input=input, state=kinds, state_schema=self.state_schema,
                    output_schema=self.output_schema, plan=prev_plan, plan_calls=prev_calls, errors=prev_errors,
                    mode=mode, turn=n, max_turns=self.max_turns, instance_inputs=inst_inputs,
                    system=self.system, max_calls=self.max_calls, form=self.reply_form,
                    plan_given=given is not None and prev_plan is given)
                # with a context window the conversation is carried (summarised past its budget);
                # stateless (seed 004): these two messages, built from the plan and the state, are
                # the whole request, nothing of earlier turns is added
                if window is not None and not self.stateless:
                    msgs, carried = await window.carry(msgs, carried)
                replayed = record is not None and record.recorded(n) is not None
                self._emit(_agent_event("agent_turn_start", n, "replayed" if replayed else "running", data=msgs))
                turn = self._turn(n, msgs, input, kinds, inst_inputs, delegate, mode, record, live)
                try:
                    # the wall-clock limit covers the model's replies and the calls they run:
                    # past it the turn is cancelled (its running calls with it)
                    rec, stop = await (turn if left is None else asyncio.wait_for(turn, left))
                except TimeoutError:
                    status, error = "failed", self._time_up()
                    break
                turns.append(rec)
                if window is not None:
                    carried += _exchange(rec)
                self._emit(_agent_event("agent_turn_end", n, rec.status, data=rec))
                if rec.state_after is not None:
                    kinds = {k: v for k, v in rec.state_after.items() if not k.startswith("input")}
                if stop is not None:
                    status, error = stop
                    output = rec.output
                    provider_error = rec.provider_error
                    waiting = rec.waiting
                    break
                if rec.output is not None and not rec.errors:
                    status, output = "succeeded", rec.output
                    break
                told, loop_stop = guard.after_turn(rec)
                if loop_stop is not None:   # the model was told at the stop level a turn before
                    status, error, output = "failed", loop_stop, rec.output
                    break
                if guard.checkpoint(n):
                    self._emit(_agent_event("agent_progress", n, "running", data={
                        "turn": n, "max_turns": self.max_turns, "calls": sum(len(t.calls) for t in turns),
                        "usage": guard.usage()}))
                # (a handed-in plan stays the Plan message until the model writes calls of its own)
                if given is None or prev_plan is not given or (rec.plan is not None and rec.plan.calls):
                    prev_plan, prev_calls = rec.plan, rec.calls
                prev_errors = rec.errors + told
                output = rec.output
            else:
                error = f"no final output after {self.max_turns} turn(s)"
        except asyncio.CancelledError:
            status, error = "cancelled", "the agent was cancelled"
            # the turn cut short had run calls too: their results are part of what the agent
            # reached (Ctrl-C printed the state of the turns before it only)
            if live and live[0].scheduler is not None:
                kinds = {k: v for k, v in live[0].scheduler.scheduler.state_now().items()
                         if not k.startswith("input")}
            result = AgentResult(status, output, kinds, turns, error, planning=planned, usage=guard.usage(),
                                 run_id=run_id)
            self._answered(result)
            if record is not None:
                await asyncio.shield(record.finish(_summary(result)))
            self._emit(_agent_event("agent_done", len(turns), status, reason=error, data=result))
            raise
        except BaseException:
            if record is not None:  # not an end: the run stays resumable
                await asyncio.shield(record.finish(None))
            raise
        result = AgentResult(status, output, kinds, turns, error, provider_error, planned, guard.usage(), run_id,
                             waiting)
        self._answered(result)
        if record is not None:
            await record.finish(_summary(result))
        self._emit(_agent_event("agent_done", len(turns), status, reason=error, data=result))
        return result

    async def _turn(self, n: int, msgs: list[Message], input: Any, kinds: dict, inst_inputs: dict,
                    delegate: DelegateExecutor, mode: Mode | None = None,
                    record: AgentRecord | None = None,
                    live: list | None = None) -> tuple[TurnRecord, tuple[str, str] | None]:
        """One turn; ``live`` (a list) is given the turn's :class:`StreamTurn` as it starts,
        so that a cancelled loop can tell what the turn's calls had written."""
        mode = mode or self.mode
        eager = mode is Mode.EAGER
        # plan then execute: nothing starts while the reply streams (calls are still checked
        # as they arrive); the whole reply's calls start together when it ends
        after_reply = eager and self.dispatch == "after_reply"
        bus = EventBus(self.on_event if self.on_event else None)
        if self._spans is not None:  # the turn's calls become children of its span
            bus.add_callback(self._spans)

        def on_call(cid: str, call: Call, diags: list[Diagnostic]) -> None:
            errs = [d for d in diags if d.is_error]
            if errs:
                self._emit(_agent_event("agent_call_refused", n, "refused", call_id=cid, tool=call.tool,
                                        error=diagnostic_error(errs[0])))
            else:
                self._emit(_agent_event("agent_call_arrived", n, "accepted", call_id=cid, tool=call.tool))

        options = self._options(eager)
        durable = recorder = recorded = None
        if record is not None:  # this turn's calls are journaled; its reply is recorded or replayed
            durable, recorder = record.turn_run(n, self._approver)
            options.approver = durable.wrapped_approver
            recorded = record.recorded(n)
        turn = StreamTurn(self.registry, mode=mode, input=input, initial=kinds, state_schema=self.state_schema,
                          max_calls=self.max_calls, options=options, bus=bus, plan_id=f"turn{n}",
                          delegate=delegate, instance_inputs=inst_inputs, on_call=on_call,
                          order=self.stream_order, store=durable.journal if durable is not None else None,
                          dispatch=eager and not after_reply,
                          on_start=_attacher(durable) if durable is not None and recorded is None else None)
        if live is not None:
            live[:] = [turn]
        stop: tuple[str, str] | None = None
        if recorded is not None:
            _replay(turn, durable, *recorded)
        else:
            llm = self._spans.llm_request(self.provider, self.model) if self._spans is not None else None
            try:
                stream = self.provider.stream(msgs, model=self.model, temperature=self.temperature,
                                              max_tokens=self.max_tokens)
                size, limit, cut = 0, self.max_reply_bytes, False
                async for delta in stream:
                    if limit is not None:
                        size += reply_bytes(delta)
                        if size > limit:  # cut here: what arrived whole stays, the next turn hears why
                            await close_stream(stream)
                            _cut_reply(turn, limit)
                            cut = True
                            break
                    if llm is not None:
                        llm.delta(delta)
                    if recorder is not None:  # committed before any call it holds starts (TurnRun)
                        recorder.append(delta)
                    turn.feed(delta)
                # (a cut reply is not recorded as complete: a resume drops its unfinished end too)
                if recorder is not None and not cut:
                    recorder.complete()
            except ProviderError as exc:
                stop = ("failed", f"provider error: {exc}")
                turn.provider_error = exc.to_json()
                if llm is not None:
                    llm.fail(exc)
            except BaseException:
                await asyncio.shield(turn.abort())
                raise
            finally:
                if recorder is not None:  # what arrived is kept, however the stream ended
                    recorder.flush()
                if llm is not None:
                    llm.end(msgs)
        dry: dict | None = None
        if after_reply and stop is None:
            outcome = await turn.execute_reply()
        elif eager or stop is not None:
            streamed = eager and not after_reply
            outcome = await turn.finish() if (streamed or turn.scheduler is not None) else _invalid(turn)
            if not streamed and stop is not None:   # (a reply cut short runs none of its calls)
                outcome.status = "provider_failed"
        else:
            plan = turn.close_stream()
            if any(d.is_error for d in turn.diagnostics) or turn.errors:
                outcome = await turn.finish()          # nothing was dispatched: status "invalid"
            else:
                approver = durable.wrapped_approver if durable is not None else self._approver
                # a durable run's "waits for a person" signal; without one, () catches nothing
                waiting: type[BaseException] | tuple[()] = durable.waiting_signal if durable is not None else ()
                try:
                    outcome, dry, stop = await self._lazy_gate(n, turn, plan, input, kinds, approver)
                except waiting:
                    outcome = await turn.finish()  # (nothing ran: the plan waits for a person)
        if durable is not None:  # every completion of the turn is committed before the next turn
            await durable.journal.flush()
            if outcome.result is not None:  # calls stopped before their tool started: no doubt left
                await durable.forget_unstarted(outcome.result.calls)
            if durable.waiting is not None:  # approve="wait": a gate nobody answered yet
                outcome.status = "waiting"
                stop = ("waiting", f"turn {n} waits for approval ({durable.waiting['decision']}): "
                                   f"sophon-dsl approve {record.run_id} [--reject]")
            failed = durable.journal.failure_error()
            if failed is not None and stop is None:
                stop = ("failed", f"{failed.error}: {failed.cause}")
            if durable.resumed and outcome.result is not None:  # a committed map's items, not expanded again
                durable.join_unexpanded_items(outcome.result)
        errors, diagnostics = list(outcome.errors), outcome.diagnostics
        out = outcome.output
        if out is not None and self.output_schema is not None and not errors:
            msg = _validate(self.output_schema, out)
            if msg:
                errors.append({"call": "return", "error": {"code": "Output.Invalid", "message": msg}})
        rec = TurnRecord(n, outcome.reply, outcome.form, outcome.plan, outcome.calls, errors, outcome.status,
                         out, diagnostics, outcome.dispatch_latency, dry, msgs,
                         outcome.state if outcome.result is not None else None, turn.provider_error,
                         durable.waiting if durable is not None else None)
        return rec, stop

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

    async def _lazy_gate(self, n: int, turn: StreamTurn, plan: Plan, input: Any, kinds: dict,
                         approver: Any) -> tuple[TurnOutcome, dict | None, tuple[str, str] | None]:
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
        risky = self._risky(plan, turn.ids, turn.registry, input)
        # plan-level approval (seed 000) only for a plan with a call at approval_risk (medium) or
        # above, whoever approves: a harmless plan asked about was refused by an approver that
        # says no to everything (issue 26 item 9); approval_risk=Risk.NONE reviews every plan
        if risky:
            max_risk = max((Risk.parse(c["risk"]) for c in risky), default=Risk.NONE)
            req = ApprovalRequest("plan", plan, tuple(risky), plan_id=f"turn{n}", max_risk=max_risk)
            self._emit(_agent_event("approval_requested", n, "pending", data=req))
            decision = await decide(approver, req, self.run_options.get("approval_timeout", 600.0))
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
            if decision.action == "edit" and decision.plan is not None:
                risky = plan_risky(decision.plan, decision.plan.call_ids(), None, turn.registry.get, Risk.NONE, input)
        # the turn's calls run under what was approved; anything else asks (runtime/gate.py)
        turn.options.approved = ApprovalScope.of(risky)
        turn.options.approve_calls = False
        outcome = await turn.execute()
        return outcome, dry, None


def _check_run_options(options: dict) -> None:
    """``run_options`` names RunOptions fields, with values a run accepts (a clear error now,
    not a failure in the middle of a turn)."""
    from dataclasses import fields

    from ..runtime.api import check_options

    names = {f.name for f in fields(RunOptions)}
    unknown = sorted(k for k in options if k not in names)
    if unknown:
        raise OptionError(f"unknown run option(s) in run_options: {', '.join(unknown)}")
    opts = RunOptions()
    for k, v in options.items():
        setattr(opts, k, v)
    check_options(opts)


def _replan(turn: StreamTurn, plan: Plan) -> StreamTurn:
    fresh = StreamTurn(turn.registry, mode=turn.mode, input=turn.input, initial=turn.initial,
                       state_schema=turn.header.state_schema, max_calls=turn.max_calls, options=turn.options,
                       bus=turn.bus, plan_id=turn.plan_id, delegate=turn.delegate,
                       instance_inputs=turn.instance_inputs, dispatch=False, store=turn.store, on_start=turn.on_start)
    from ..loader import dumps

    fresh.feed(dumps(plan, "dsl"))
    return fresh


def _cut_reply(turn: StreamTurn, limit: int) -> None:
    """The reply passed ``max_reply_bytes``: its unfinished end is dropped (``turn.cut``), the
    calls that arrived whole stay, and the turn's errors say why (the next turn sees them)."""
    turn.cut = True
    turn.errors.append({"call": None, "error": {
        "code": REPLY_TOO_LARGE, "message": f"the reply passed {limit:,} bytes (max_reply_bytes) and was cut "
                                            f"there; the complete statements ({len(turn.calls)} call(s)) were "
                                            "kept, the rest was dropped: write shorter replies, with fewer or "
                                            "smaller calls per turn"}})


def _replay(turn: StreamTurn, durable: DurableRun, text: str, complete: bool) -> None:
    """A recorded reply, fed at once (no request): its committed calls are restored before
    the scheduler starts or the whole-plan checks run.  A cut reply keeps its complete
    statements; the rest is dropped and the turn says so (Reply.Interrupted)."""
    from ..durable.agent_run import REPLY_INTERRUPTED, complete_prefix

    kept = text if complete else complete_prefix(text)
    turn.cut = not complete  # (its end is dropped: Reply.Interrupted below says why)
    turn.feed(kept)
    if turn.scheduler is not None:   # eager: the calls arrived; lazy: restored when the plan runs
        durable.attach(turn.scheduler.scheduler.durable_host())
    else:
        turn.on_start = _attacher(durable)
    if not complete:
        turn.errors.append({"call": None, "error": {
            "code": REPLY_INTERRUPTED, "message": f"the reply was cut off after {len(text)} characters; the "
                                                  f"complete statements ({len(turn.calls)} call(s)) were kept, "
                                                  "the rest was dropped: go on from the current state"}})


def _attacher(durable: DurableRun) -> Callable[[Scheduler], None]:
    """A turn's ``on_start``: its scheduler hands the turn's durable run what it needs of it
    (``Scheduler.durable_host()``), not itself."""
    return lambda sched: durable.attach(sched.durable_host())


def _summary(result: AgentResult) -> dict:
    """How an agent run ended, as its run row keeps it (``runs show``)."""
    from ..durable.base import dumps

    agent = result.to_json()
    try:
        dumps(agent)
    except (TypeError, ValueError):  # not JSON: kept as text
        agent = json.loads(json.dumps(agent, default=str))
    return {"status": result.status, "output": agent.get("output"), "error": result.error, "agent": agent,
            "waiting": result.waiting}


def _exchange(rec: TurnRecord) -> list[Message]:
    """A finished turn as the conversation carries it: the reply, then what came of its calls."""
    calls = "; ".join(f"{c.get('id')} {c.get('status')}" + (f" ({c['error'].get('error')})"
                                                              if isinstance(c.get("error"), dict) else "")
                      for c in rec.calls)
    errors = "; ".join(str((e.get("error") or {}).get("message") or e.get("error")) for e in rec.errors)
    text = f"Turn {rec.number}: {rec.status}" + (f"; calls: {calls}" if calls else "") + \
        (f"; errors: {errors}" if errors else "")
    return [Message("assistant", rec.reply), Message("user", text)]


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

