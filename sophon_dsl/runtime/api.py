"""Public entry points: :func:`run`, :func:`arun`, :func:`start`.

::

    result = sophon_dsl.runtime.run(plan, tools=[search, send], input={"topic": "x"}, approve=True)
    result.status, result.state, result.to_json()

    handle = sophon_dsl.runtime.start(plan, tools=...)        # inside a running event loop
    async for ev in handle.events(): ...
    result = await handle.result()                             # or handle.cancel()
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import fields
from typing import TYPE_CHECKING, Any, AsyncIterator

from ..errors import InsideEventLoop, OptionError, OptionTypeError
from ..diagnostics import Diagnostic, Severity
from ..model import Plan, Risk
from ..refs import has_path
from ..instances import route_plan
from ..tools import ToolRegistry, as_registry
from ..toolsource import resolve_tools
from ..dataflow import DataFlow
from .approval import ApprovalRequest, decide, normalize_approver
from .errors import APPROVAL_REJECTED, ErrorInfo, PlanInvalid
from .inputs import CASCADES
from .events import Event, EventBus
from .result import CallRecord, RunResult
from .gate import ApprovalScope, plan_risky
from .protocols import LatentExecutor, PlanHolder, SessionExecutor
from .scheduler import RunOptions, Scheduler
from .state import to_json_value
from ..ids import uuid4_hex

if TYPE_CHECKING:  # (the durable package is imported only by a run with a store)
    from ..durable.session import DurableRun

__all__ = ["Prepared", "RunHandle", "arun", "prepare", "run", "seeded", "start"]

_OPTION_NAMES = {f.name for f in fields(RunOptions)}


class Prepared:
    """A plan ready to run: checked, with its effective tool registry and call ids."""

    def __init__(self, plan: Plan, registry: ToolRegistry, ids: list[str], diagnostics: list[Diagnostic],
                 compiled: Any = None):
        self.plan = plan
        self.registry = registry
        self.ids = ids
        self.diagnostics = diagnostics
        # the checker's data flow when there is one (same rules, computed once)
        self.flow = compiled.flow if compiled is not None else DataFlow.build(plan.calls, ids)
        self.flow.listed_ids()  # the checker's flow makes ids when read; a run reads one per call


def _load(plan: Any) -> Plan:
    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, PlanHolder) and isinstance(plan.plan, Plan):
        return plan.plan
    if isinstance(plan, str):
        from ..loader import parse

        text = plan.lstrip()
        fmt = "json" if text.startswith(("{", "[")) else "dsl"
        res = parse(plan, fmt)
        if not res.ok:
            raise PlanInvalid([d for d in res.diagnostics if d.is_error], plan)
        return res.plan
    raise OptionTypeError(f"expected a Plan (or plan text), got {type(plan).__name__}")


def _reusable(given: Any, plan: Plan, tools: Any) -> Any:
    """``given`` when it is a CompiledPlan checked against the same tools, else None.

    A CompiledPlan carries its diagnostics and wiring: checking it again would find the
    same thing.  With ``tools`` given, it is reused only when they resolve to the very
    tools it was compiled with (same names, equal specs, same functions).
    """
    from ..compiler import AGENT_STEP, CompiledPlan

    if not isinstance(given, CompiledPlan) or given.plan is not plan:
        return None
    if tools is None:
        return given
    if plan.tools:
        return None  # declarations layered over the given tools: check again
    reg = as_registry(tools)
    old = given.tools
    for name in {c.tool for c in plan.calls}:  # only the tools the plan uses matter
        spec = reg.get(name)
        if spec is None and name == AGENT_STEP.name:
            spec = AGENT_STEP
        prev = old.get(name)
        if spec is None or prev is None:
            return None
        if prev is not spec and (prev != spec or prev.func is not spec.func):
            return None
    return given


def _run_only_diagnostics(compiled: Any, executor: LatentExecutor | None) -> list[Diagnostic]:
    """E206 / E207 for a reused CompiledPlan: the checker's own rules for them, on the
    compiled plan's data flow (no second analysis)."""
    from ..checks.checker import RuleRunner
    from ..checks.modes import InlineOutputs, MissingImplementations

    runner = RuleRunner(compiled.plan, compiled.tools, require_executor=executor is None,
                        require_implementations=True, rules=(InlineOutputs, MissingImplementations),
                        flow=compiled.flow)
    have = set(compiled.diagnostics)
    return [d for d in runner.diagnostics if d.code in ("E206", "E207") and d not in have]


_NOT_RUNNING: Any = object()  # prepare(initial_state=...) not given: the plan is not about to run


def prepare(plan: Any, tools: Any = None, *, executor: LatentExecutor | None = None, check: bool = True,
            initial_kinds: Any = (), context: dict | None = None,
            initial_state: Any = _NOT_RUNNING, initial_input: Any = _NOT_RUNNING) -> Prepared:
    """Load and check ``plan`` against ``tools``; raise :class:`PlanInvalid` before anything runs.

    Uses :func:`sophon_dsl.compiler.compile_plan` when it is available (E206,
    latent call without executor, is ignored when an ``executor`` is given).
    ``initial_state`` (the run's initial ``†state``, None for none) says the plan is
    about to run: a read nothing writes (W303) that this state does not hold either can
    never resolve, and is an error (E301) before anything runs.  ``initial_input`` (the
    run's input) likewise: an input path read without an input schema (W305) that it does
    not hold is E310.
    """
    given = plan
    # calls with `_instance` X read and write X's own data (state@X, input@X): Acts 013
    plan = route_plan(_load(plan), context)
    registry = as_registry(resolve_tools(tools))
    ids: list[str] | None = None
    diags: list[Diagnostic] = []
    compiled = None
    if check:
        from ..compiler import compile_plan

        compiled = _reusable(given, plan, tools)
        if compiled is None:
            compiled = compile_plan(plan, tools=registry, require_executor=executor is None,
                                    require_implementations=True)
            diags = list(compiled.diagnostics)
        else:  # checked without knowing it would run here: what the checker adds for a run
            diags = [*compiled.diagnostics, *_run_only_diagnostics(compiled, executor)]
        registry = compiled.tools
        plan = compiled.plan  # with the output paths its tools prescribe
        ids = list(compiled.flow.listed_ids())  # (the ids made once for the run and the flow)
    if compiled is None:
        registry = registry.with_plan_decls(plan.tools)
    if ids is None:
        ids = plan.call_ids()
    # E301 (nothing writes a path) is the run's business when initial data is supplied.
    errors = [d for d in diags if d.is_error and not (d.code == "E206" and executor is not None)
              and not (d.code == "E301" and initial_kinds)]
    if initial_state is not _NOT_RUNNING:
        errors += _never_resolved(diags, initial_state)
    if initial_input is not _NOT_RUNNING:
        errors += _missing_input(diags, initial_input, plan.file)
    prepared = Prepared(plan, registry, ids, diags, compiled)
    if errors:
        raise PlanInvalid(errors, plan.source)
    return prepared


def _never_resolved(diags: list[Diagnostic], state: Any) -> list[Diagnostic]:
    """E301 for each W303 read (or ``||`` whose every alternative is such a read) that the
    initial ``state`` does not hold: nothing will ever write it."""
    from dataclasses import replace

    out = []
    for d in diags:
        data = d.data
        if d.code != "W303" or not data or "path" not in data:
            continue
        reads = data.get("alternatives") or [data]
        if any(r["kind"] != "state" or has_path(state, r["path"]) for r in reads):
            continue  # another instance's state (seeded by the caller), or the state holds it
        msg = f"{d.message}, and this run's initial state does not hold it: the read can never resolve"
        out.append(replace(d, code="E301", message=msg, severity=Severity.ERROR))
    return out


def _missing_input(diags: list[Diagnostic], input: Any, file: str | None) -> list[Diagnostic]:
    """E310 for each input read W305 lists (a ``||`` of input reads: all of them) that
    ``input`` does not hold: input is read-only, so the read could never resolve, and the
    run would stop at it after the calls before it had their side effects."""
    out = []
    for d in diags:
        if d.code != "W305" or not d.data:
            continue
        for read in d.data.get("reads") or ():
            alts = read["alternatives"]
            if any(has_path(input, a["path"]) for a in alts):
                continue
            texts = " || ".join(a["text"] for a in alts)
            given = "no input was given" if input is None else "the run's input does not have it"
            out.append(Diagnostic("E310", f"{read['where']} reads {texts} but {given} (the plan declares "
                                          f"no input schema): give it (--input, input=)",
                                  read["span"], file, severity=Severity.ERROR))
    return out


def _split_options(options: dict) -> tuple[RunOptions, dict]:
    opts = RunOptions()
    rest = {}
    for k, v in options.items():
        if k in _OPTION_NAMES:
            setattr(opts, k, v)
        else:
            rest[k] = v
    return opts, rest


def _validate_input(plan: Plan, input: Any) -> None:
    if plan.input_schema is None or not isinstance(plan.input_schema, dict):
        return
    from ..checks.schema import offline_validator  # never fetches a remote $ref (issue 17)

    value = {} if input is None else input

    err = next(iter(offline_validator(plan.input_schema).iter_errors(value)), None)
    if err is not None:
        from ..syntax.located import child_path

        path = None
        for step in err.absolute_path:  # the JSON path inside the input: $.team[0]
            path = child_path(path or "$", step)
        # (data: about the run's input, not the plan: the CLI places it in an --input file)
        raise PlanInvalid([Diagnostic("E107", f"input does not match the plan's input schema: {err.message}",
                                      file=plan.file, path=path, severity=Severity.ERROR,
                                      data={"about": "input"})], plan.source)


def _check_json(what: str, value: Any) -> None:
    """``value`` (the run's input, state or a context kind) must be JSON data."""
    if value is None:
        return
    try:
        to_json_value(value)
    except (TypeError, ValueError) as exc:
        raise PlanInvalid([Diagnostic("E107", f"{what} is not JSON data: {exc}", severity=Severity.ERROR)]) \
            from None


_POSITIVE_INT = ("max_concurrency", "max_threads", "max_workers", "max_calls", "max_expanded_calls")
_POSITIVE_NUMBER = ("timeout", "max_time")


def check_options(opts: RunOptions) -> None:
    """Numeric run options: a clear error instead of a failure deep inside asyncio."""
    for name in _POSITIVE_INT:
        v = getattr(opts, name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise OptionError(f"{name} must be a positive integer or None, not {v!r}")
    if opts.max_threads is not None and opts.max_workers is not None and opts.max_threads != opts.max_workers:
        raise OptionError(f"max_threads ({opts.max_threads}) and max_workers, its older name ({opts.max_workers}), "
                          "differ: give one of them")
    for name in _POSITIVE_NUMBER:
        v = getattr(opts, name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
            raise OptionError(f"{name} must be a positive number of seconds or None, not {v!r}")
    v = opts.max_memory
    if v is not None:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise OptionError(f"max_memory must be a positive number of bytes or None, not {v!r}")
        from .watchdog import memory_supported

        if not memory_supported():
            raise OptionError("max_memory cannot be enforced on this platform (its memory use cannot be read)")
    v = opts.approval_timeout
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0):
        raise OptionError(f"approval_timeout must be a number of seconds >= 0 or None, not {v!r}")
    v = opts.preview_chars
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise OptionError(f"preview_chars must be an integer >= 0, not {v!r}")
    if opts.cascade not in CASCADES:
        raise OptionError(f"cascade must be one of {', '.join(map(repr, CASCADES))}, not {opts.cascade!r}")


class RunHandle:
    """A run in progress: ``.events()``, ``.cancel()``, ``await .result()``, ``.plan_id``."""

    def __init__(self, bus: EventBus, plan_id: str):
        self.bus = bus
        self.plan_id = plan_id
        self._scheduler: Scheduler | None = None
        self._cancel_requested = False
        self._task: asyncio.Task | None = None
        self.run_id: str | None = None   # minted per run (the store's key when durable)
        self.durable: DurableRun | None = None  # the run's checkpoints when it has a store
        self.spans: Any = None           # the run's span recorder while tracing is on (sophon_dsl.telemetry)

    def events(self, replay: bool = True) -> AsyncIterator[Event]:
        """Async iterator over the run's events; ends after plan_complete / plan_failed."""
        return self.bus.subscribe(replay=replay)

    def cancel(self) -> None:
        """Cancel: running calls see it at their next await; pending calls become cancelled."""
        self._cancel_requested = True
        if self._scheduler is not None:
            self._scheduler.cancel()

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    async def result(self) -> RunResult:
        assert self._task is not None
        return await asyncio.shield(self._task)

    def __await__(self):
        return self.result().__await__()


async def _execute(handle: RunHandle, plan: Any, tools: Any, input: Any, state: Any,
                   opts: RunOptions, context: dict | None, prep: Prepared | None = None) -> RunResult:
    bus = handle.bus
    prep = prep or prepare(plan, tools, executor=opts.executor)
    _validate_input(prep.plan, input)
    plan_obj = prep.plan
    plan_id = handle.plan_id

    def rejected(reason: str) -> RunResult:
        err = ErrorInfo(APPROVAL_REJECTED, reason)
        recs = [CallRecord(cid, c.tool, i) for i, (cid, c) in enumerate(zip(prep.ids, plan_obj.calls))]
        n = len(recs)
        bus.emit(Event("plan_failed", plan_id, plan_obj.goal, None, n, "rejected", error=err.to_json(),
                       reason=reason))
        return RunResult("rejected", {}, None, recs, [], plan_id, plan_obj.goal, err, list(bus.history))

    risky = plan_risky(prep.plan, prep.ids, prep.flow, prep.registry.get, opts.approval_risk, input)
    # what the approval covers: each call shown, up to the risk shown (runtime/gate.py)
    opts.approved = ApprovalScope.of(risky)
    if risky:
        max_risk = max(Risk.parse(c["risk"]) for c in risky)
        req = ApprovalRequest("plan", plan_obj, tuple(risky), plan_id=plan_id, max_risk=max_risk)
        bus.emit(Event("approval_requested", plan_id, plan_obj.goal, None, len(plan_obj.calls), "pending", data=req))
        decision = await decide(opts.approver, req, opts.approval_timeout)
        if handle._cancel_requested:
            return _cancelled_before_start(bus, prep, plan_id)
        if decision.action == "reject":
            bus.emit(Event("approval_rejected", plan_id, plan_obj.goal, None, len(plan_obj.calls), "rejected",
                           reason=decision.reason))
            return rejected(decision.reason)
        if decision.action == "edit" and decision.plan is not None:
            try:
                prep = prepare(decision.plan, prep.registry, executor=opts.executor,
                               initial_kinds=[k for k in ("state",) if state is not None] + list(context or ()),
                               context=context, initial_state=state, initial_input=input)
            except PlanInvalid as exc:
                bus.emit(Event("approval_rejected", plan_id, plan_obj.goal, None, len(plan_obj.calls), "rejected",
                               reason="the edited plan has errors"))
                return rejected("the edited plan has errors: " + "; ".join(d.message for d in exc.diagnostics))
            plan_obj = prep.plan
            opts.approved = ApprovalScope.of(plan_risky(prep.plan, prep.ids, prep.flow, prep.registry.get,
                                                        Risk.NONE, input))
            bus.emit(Event("approval_edited", plan_id, plan_obj.goal, None, len(plan_obj.calls), "approved",
                           reason=decision.reason))
        else:
            bus.emit(Event("approval_granted", plan_id, plan_obj.goal, None, len(plan_obj.calls), "approved",
                           reason=decision.reason))
    sched = Scheduler(plan_obj, prep.registry, ids=prep.ids, input=input, state=state, context=context,
                      options=opts, bus=bus, plan_id=plan_id, flow=prep.flow, track_waits=False,
                      store=handle.durable.journal if handle.durable is not None else None)
    handle._scheduler = sched
    sched.run_id = handle.run_id
    if handle.durable is not None:
        handle.durable.attach(sched.durable_host())  # restores what an earlier process committed
    if handle._cancel_requested:
        sched.cancel()
    result = await sched.run()
    sched.release()  # the run's objects freed when it returns, not by the cyclic collector
    return result


def _cancelled_before_start(bus: EventBus, prep: Prepared, plan_id: str) -> RunResult:
    from .errors import PLAN_CANCELLED

    err = ErrorInfo(PLAN_CANCELLED, "the run was cancelled")
    recs = [CallRecord(cid, c.tool, i, status="cancelled", error=err, reason="not started: cancelled")
            for i, (cid, c) in enumerate(zip(prep.ids, prep.plan.calls))]
    bus.emit(Event("plan_failed", plan_id, prep.plan.goal, None, len(recs), "cancelled", error=err.to_json()))
    return RunResult("cancelled", {}, None, recs, [], plan_id, prep.plan.goal, err, list(bus.history))


def seeded(plan: Plan, input: Any, state: Any) -> tuple[Any, Any]:
    """The run's ``(input, state)``: the caller's where given (not None), else the data the
    plan's context list carries (``Plan.initial``), copied so that no run changes it."""
    initial = plan.initial
    if initial is None:
        return input, state
    if input is None and initial.input is not None:
        input = copy.deepcopy(initial.input)
    if state is None and initial.state is not None:
        state = copy.deepcopy(initial.state)
    return input, state


def make_run(plan: Any, tools: Any, options: dict, state: Any = None,
             input: Any = None) -> tuple[RunHandle, RunOptions, dict | None, Prepared, Any, Any]:
    """What a run needs before it starts: its handle, options, context, the prepared plan,
    and its input and state (``run``, ``start`` and a durable resume all begin here).
    Raises :class:`PlanInvalid` when the plan cannot run."""
    opts, rest = _split_options(options)
    approve = rest.pop("approve", None)
    store, run_id, store_meta = rest.pop("store", None), rest.pop("run_id", None), rest.pop("store_meta", None)
    wait = isinstance(approve, str) and approve.lower() == "wait"  # durable runs: left waiting
    if wait:
        if store is None:
            raise OptionError("approve='wait' needs a store: the run waits in it for a decision")
        approve = None
    if approve is not None:
        opts.approver = normalize_approver(approve)
    elif opts.approver is not None:
        opts.approver = normalize_approver(opts.approver)
    on_event = rest.pop("on_event", None)
    context = rest.pop("context", None)
    plan_id = rest.pop("plan_id", None)
    if rest:
        raise OptionTypeError(f"unknown run option(s): {', '.join(sorted(rest))}")
    check_options(opts)
    if opts.taint is None:  # sub-agents of the executor (goals/plan_steps.py) share the run's taint set
        ex = opts.executor
        opts.taint = ex.session_taint if isinstance(ex, SessionExecutor) else None
    if isinstance(plan, str):
        plan = _load(plan)  # read once: its initial data decides what the check below knows
    input, state = seeded(_load(plan), input, state)
    kinds = [k for k, v in (("state", state), *((context or {}).items())) if v is not None]
    prep = prepare(plan, tools, executor=opts.executor, initial_kinds=kinds, context=context, initial_state=state,
                   initial_input=input)
    if opts.max_calls is not None and len(prep.plan.calls) > opts.max_calls:  # the budget, before anything runs
        raise PlanInvalid([Diagnostic("E305", f"the plan has {len(prep.plan.calls):,} calls, over the run's budget "
                                      f"of {opts.max_calls:,} (max_calls)", file=prep.plan.file,
                                      severity=Severity.ERROR)], prep.plan.source)
    if opts.max_calls is not None:
        from ..maps import known_calls

        known = known_calls(prep.plan.calls, input)  # maps over known lists: their items count now
        if known > opts.max_calls:
            raise PlanInvalid([Diagnostic("E305", f"the plan would run at least {known:,} calls (the items of its "
                                          f"maps over known lists included), over the run's budget of "
                                          f"{opts.max_calls:,} (max_calls)", file=prep.plan.file,
                                          severity=Severity.ERROR)], prep.plan.source)
    for what, value in (("input", input), ("state", state), *((context or {}).items())):
        _check_json(what, value)
    bus = EventBus(on_event)
    pid = plan_id or prep.plan.id or f"plan_{uuid4_hex()[:12]}"
    handle = RunHandle(bus, pid)
    handle.run_id = run_id or uuid4_hex()
    if store is not None:
        from ..durable.session import begin

        data = {"input": input, "state": state, "context": context, "meta": store_meta}
        if opts.cascade != "skip":  # the run's semantics: a resume keeps it (rows of default runs unchanged)
            data["cascade"] = opts.cascade
        handle.durable, opts.approver = begin(handle.run_id, pid, store, _load(plan), prep.registry, data,
                                              "wait" if wait else opts.approver)
    from ..telemetry import run_subscriber  # (imports no OpenTelemetry: None unless tracing is on)

    if (spans := run_subscriber(handle, prep)) is not None:  # (a resume sets the run id and store later)
        bus.add_callback(spans)
        handle.spans = spans
    return handle, opts, context, prep, input, state


async def _stamped(handle: RunHandle, coro: Any) -> RunResult:
    """The run's result with its run id; a durable run records how it ended."""
    # a durable run can be cancelled from another process through its store (sophon-dsl cancel)
    result = await (coro if handle.durable is None else handle.durable.guard(coro, on_cancel=handle.cancel))
    result.run_id = handle.run_id
    if handle.spans is not None:  # a run left waiting ends without a terminal event
        handle.spans.finish(result)
    return result


async def arun(plan: Any, tools: Any = None, *, input: Any = None, state: Any = None, **options: Any) -> RunResult:
    """Run ``plan`` to the end and return its :class:`RunResult` (see :func:`run` for options)."""
    handle, opts, context, prep, input, state = make_run(plan, tools, options, state, input)
    return await finish_run(handle, plan, tools, input, state, opts, context, prep)


async def finish_run(handle: RunHandle, plan: Any, tools: Any, input: Any, state: Any, opts: RunOptions,
                     context: dict | None, prep: Prepared) -> RunResult:
    """Run what :func:`make_run` prepared to its end; cancelling the caller cancels the run
    (it ends with its summary) and re-raises."""
    task = asyncio.ensure_future(_stamped(handle, _execute(handle, plan, tools, input, state, opts, context, prep)))
    handle._task = task
    try:
        result = await asyncio.shield(task)
    except asyncio.CancelledError:
        handle.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    await handle.bus.drain()
    return result


def run(plan: Any, tools: Any = None, *, input: Any = None, state: Any = None, **options: Any) -> RunResult:
    """Run ``plan`` synchronously (creates an event loop; use :func:`arun` inside one).

    Options: ``approve`` (True/False/"yes"/"no"/"ask"/async callable), ``approval_timeout``
    (600), ``approve_calls`` (per-call gate), ``approval_risk`` (Risk.MEDIUM),
    ``max_concurrency``, ``max_threads`` (threads for sync tools, default 64; ``max_workers`` is
    its older name), ``timeout`` (per call, s), ``max_time`` (plan, s: the run
    ends within it plus one second, ``Plan.Timeout``), ``max_memory`` (bytes the run may grow the
    process by: ``Plan.MemoryExceeded``),
    ``retry`` (RetryPolicy or {tool: RetryPolicy}), ``executor`` (LatentExecutor),
    ``tool_executor`` (where tool calls run: a ``sophon_dsl.DaskExecutor``, docs/scale-out.md),
    ``on_event`` (callback or list), ``context`` ({kind: initial data}), ``plan_id``,
    ``validate_output``, ``validate_input``, ``preview_chars``; durable runs: ``store`` (a URL
    or :func:`sophon_dsl.open_store` store), ``run_id``, ``approve="wait"`` (docs/runtime.md).
    ``input`` / ``state`` default to the data of the plan's context list (its ``input`` /
    ``state`` messages, ``Plan.initial``); a caller's value (not None) wins.
    Raises :class:`PlanInvalid` before anything runs if the plan cannot run.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from .watchdog import run_sync  # (asyncio.run, but a call the run abandoned does not hold it)

        return run_sync(arun(plan, tools, input=input, state=state, **options))
    raise InsideEventLoop("sophon_dsl.run() was called inside a running event loop; use 'await sophon_dsl.arun(...)'")


def start(plan: Any, tools: Any = None, *, input: Any = None, state: Any = None, **options: Any) -> RunHandle:
    """Start ``plan`` in the running event loop and return a :class:`RunHandle` at once.

    Plan errors raise :class:`PlanInvalid` here, before anything runs.
    """
    asyncio.get_running_loop()
    handle, opts, context, prep, input, state = make_run(plan, tools, options, state, input)
    handle._task = asyncio.ensure_future(_stamped(handle, _execute(handle, plan, tools, input, state, opts, context,
                                                                   prep)))
    return handle
