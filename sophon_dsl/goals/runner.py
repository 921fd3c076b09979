"""The goal loop (seed 003): plan, run the steps as a plan of our language, judge each
step, accumulate facts, replan around failures within limits.

::

    from sophon_dsl import Agent, GoalRunner
    runner = GoalRunner(Agent(provider, tools), planner_provider=heavy, evaluator_provider=nano)
    result = runner.run("Find the API's base URL and write a client for it")
    result.status, result.output, result.facts, result.to_json()

Each step is carried out by a sub-agent (an :class:`~sophon_dsl.llm.agent.Agent` over the
tools its routing hint maps to, a few turns) inside the ``goal.step`` tool, then judged
by the :class:`~.evaluator.StepEvaluator`. A ``fail`` verdict fails the call, so the
runtime skips the steps that depend on it while independent ones go on; the loop then
asks the planner for a new plan of the remaining work. ``hitl`` asks the approver when
there is one (approve = pass, reject = fail); without one the run ends ``hitl``.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..errors import InsideEventLoop, OptionError, SophonError
from ..model import Risk
from ..runtime.approval import ApprovalRequest, decide, normalize_approver
from ..runtime.errors import RunError
from ..runtime.events import Event
from ..tools import ToolRegistry, ToolSpec
from .evaluator import EvaluatorError, StepEvaluator, StepOutcome, SubAgentStatus, Verdict, VerdictKind
from .plan_builder import STEP_INPUT_SCHEMA, STEP_OUTPUT_SCHEMA, STEP_TOOL, steps_to_plan
from .planner import Planner, StepSummary
from .result import GoalResult, GoalStatus, StepRecord, StepStatus
from .steps import PlannedStep, PlannerError

if TYPE_CHECKING:  # (the agent and the durable package load when a goal runs)
    from ..durable.base import RunStore
    from ..llm.agent import Agent
    from ..telemetry.spans import RunSpans

__all__ = ["GoalResumeError", "GoalRunner", "STEP_FAILED", "HUMAN_NEEDED", "EVALUATOR_FAILED"]

STEP_FAILED = "Goal.StepFailed"
HUMAN_NEEDED = "Goal.HumanNeeded"
EVALUATOR_FAILED = "Goal.EvaluatorFailed"

DEFAULT_MAX_GOAL_STEPS = 30


class GoalResumeError(SophonError):
    """A goal cannot be resumed: no store, no such goal, not waiting, or no answer given."""

DEFAULT_MAX_REPLANS = 8


def _limit(value: int | None, env: str, default: int) -> int:
    if value is None:
        raw = os.environ.get(env)
        if raw is None or not raw.strip():
            return default
        try:
            value = int(raw)
        except ValueError:
            raise OptionError(f"{env} must be a whole number, not {raw!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise OptionError(f"{env.lower()} must be a whole number >= 0, not {value!r}")
    return value


@dataclass
class _PlanRun:
    """What one plan of steps did: each step's record and result, and what stops the loop."""

    steps: list[PlannedStep]
    number: int
    records: dict[str, StepRecord] = field(default_factory=dict)
    results: dict[str, dict] = field(default_factory=dict)
    fatal: str | None = None          # an evaluator error: the goal fails at once
    waiting: bool = False             # a hitl step with nobody to ask
    started: set[str] = field(default_factory=set)   # steps handed to their sub-agent


class GoalRunner:
    """Runs goals with ``agent``'s provider and tools.

    ``planner_provider`` (heavy tier) and ``evaluator_provider`` (nano tier) default to the
    agent's provider. ``roles`` maps a routing hint (researcher, coder, communicator,
    browser) to tool-name patterns (``fnmatch``); a step with a hint gets only those tools,
    a step without one (or a hint without an entry) gets all of the agent's tools.
    ``max_goal_steps`` / ``max_replans`` default to ``MAX_GOAL_STEPS`` /
    ``MAX_REPLAN_ATTEMPTS`` from the environment, else 30 / 8. ``approve`` answers ``hitl``
    verdicts (as the agent's ``approve``: ``"ask"``, True/False, a callable); None = no
    person, the run ends ``hitl``.
    """

    _spans: RunSpans | None = None  # the goal's span recorder while it runs with tracing on (sophon_dsl.telemetry)

    def __init__(self, agent: Agent, *, planner_provider: Any = None, evaluator_provider: Any = None,
                 planner_model: str | None = None, evaluator_model: str | None = None,
                 max_goal_steps: int | None = None, max_replans: int | None = None, subagent_turns: int = 4,
                 roles: dict[str, list[str]] | None = None, approve: Any = None,
                 on_event: Callable[[Event], Any] | None = None, identity: str | None = None,
                 approval_timeout: float | None = 600.0, store: Any = None, store_meta: dict | None = None,
                 cascade: str = "skip"):
        from ..runtime.inputs import CASCADES

        if cascade not in CASCADES:
            raise OptionError(f"cascade must be one of {', '.join(map(repr, CASCADES))}, not {cascade!r}")
        # what a failed step does to the steps after it (as a plan run's cascade): skip them,
        # or run those with another dependency done, the failure in their inputs
        self.cascade = cascade
        self.agent = agent
        self.planner = Planner(_provider(planner_provider) or agent.provider, model=planner_model)
        self.evaluator = StepEvaluator(_provider(evaluator_provider) or agent.provider, model=evaluator_model)
        self.max_goal_steps = _limit(max_goal_steps, "MAX_GOAL_STEPS", DEFAULT_MAX_GOAL_STEPS)
        self.max_replans = _limit(max_replans, "MAX_REPLAN_ATTEMPTS", DEFAULT_MAX_REPLANS)
        if subagent_turns < 1:
            raise OptionError("subagent_turns must be at least 1")
        self.subagent_turns = subagent_turns
        self.roles = dict(roles or {})
        self.approver = normalize_approver(approve) if approve is not None else None
        self.approval_timeout = approval_timeout
        self.on_event = on_event if on_event is not None else agent.on_event
        self.identity = identity if identity is not None else (agent.system or "")
        self.store = store              # a run store or its URL: goals that wait for a person are kept there
        self.store_meta = dict(store_meta or {})   # what a resume from the CLI needs again (tools, providers)

    # -- the loop -------------------------------------------------------------------

    def run(self, goal: str, *, input: Any = None) -> GoalResult:
        """Synchronous :meth:`arun` (creates an event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(goal, input=input))
        raise InsideEventLoop("GoalRunner.run() was called inside a running event loop; use 'await runner.arun(...)'")

    async def arun(self, goal: str, *, input: Any = None, run_id: str | None = None) -> GoalResult:
        """Reach ``goal``. With a ``store``, the goal is recorded under ``run_id`` (minted when
        not given; ``GoalResult.run_id``) and a goal left waiting for a person can be resumed."""
        loop = _Loop(self, goal, input)
        return await self._finish(loop, loop.drive(), run_id, created=False)

    def resume(self, run_id: str, *, approve: bool | None = None, reason: str = "") -> GoalResult:
        """Synchronous :meth:`aresume`."""
        return asyncio.run(self.aresume(run_id, approve=approve, reason=reason))

    async def aresume(self, run_id: str, *, approve: bool | None = None, reason: str = "") -> GoalResult:
        """Continue the goal ``run_id`` that waits for a person, from the store: ``approve``
        answers for every waiting step (None: the decision stored with the run, e.g. by
        ``sophon-dsl approve``). Raises ``GoalResumeError`` when there is nothing to resume."""
        from ..durable import open_store
        from ..durable.base import display_url
        from .durable import GOAL_KIND, decision_name, load_state

        if self.store is None:
            raise GoalResumeError("resuming a goal needs the store it was recorded in (GoalRunner(store=...))")
        store = open_store(self.store)
        row = store.get_run(run_id)
        spec = (row or {}).get("spec") or {}
        if row is None or spec.get("kind") != GOAL_KIND:
            raise GoalResumeError(f"no goal {run_id!r} in {display_url(store.url)}")
        if row["status"] != "waiting":
            raise GoalResumeError(f"goal {run_id} is not waiting for a person (status {row['status']})")
        if approve is None:
            decision = store.load_decisions(run_id).get(decision_name(run_id))
            if decision is None:
                raise GoalResumeError(f"goal {run_id} waits for a person's answer: give approve=True/False "
                                      f"(CLI: sophon-dsl approve {run_id} [--reject])")
            approve, reason = decision.get("action") == "approve", reason or decision.get("reason", "")
        from ..runtime.inputs import CASCADES

        if spec.get("cascade") in CASCADES:
            self.cascade = spec["cascade"]
        loop = _Loop(self, row["goal"] or "", spec.get("input"))
        last_steps = load_state(loop, spec["checkpoint"])
        return await self._finish(loop, loop.answered(last_steps, approve, reason), run_id, created=True)

    async def _finish(self, loop: "_Loop", driving: Any, run_id: str | None, created: bool) -> GoalResult:
        started = time.perf_counter()
        store = None
        if self.store is not None:
            from ..durable import open_store

            store = open_store(self.store)
            run_id = run_id or f"goal-{uuid.uuid4().hex[:12]}"
            if not created:
                store.create_run(run_id, plan_id="goal", goal=loop.goal, spec=self._spec(loop, None),
                                 plan_hash="").result()
            loop.recording = (store, run_id, started)
        from ..telemetry import agent_subscriber  # (imports no OpenTelemetry: None unless tracing is on)

        self._spans = agent_subscriber(run_id, loop.goal, kind="goal")
        active = None
        if self._spans is not None:
            # the goal's root span is the current context while it runs: its plans' runs (and
            # through their goal.step calls, the steps' sub-agents) are inside it
            self._spans.begin(time.time())
            active = self._spans.activate()
        hold = None
        if store is not None:
            from .durable import GoalHold

            hold = GoalHold(store, run_id, asyncio.current_task().cancel)
        try:
            return await self._finish_driving(loop, driving, run_id, store, started, hold)
        finally:
            if hold is not None:
                hold.release()
            if self._spans is not None:
                self._spans.deactivate(active)
                self._spans.abandon()  # (no-op once goal_done ended it)
                self._spans = None

    async def _finish_driving(self, loop: "_Loop", driving: Any, run_id: str | None, store: Any,
                              started: float, hold: Any = None) -> GoalResult:
        try:
            status, error = await driving
        except asyncio.CancelledError:
            # what was reached goes out with the last event, so a caller that cancelled
            # (Ctrl-C on the CLI) can still show it
            by_request = hold is not None and hold.requested
            why = "cancelled with sophon-dsl cancel" if by_request else "the goal was cancelled"
            partial = loop.result(GoalStatus.CANCELLED, why, started, run_id)
            if store is not None:
                store.set_status(run_id, partial.status.value, {"goal": partial.to_json()}).result()
            self.emit("goal_done", loop.goal, partial.status.value, reason=partial.error, data=partial)
            if by_request:  # (asked through the store, not by this caller: the goal returns)
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                return partial
            raise
        result = loop.result(status, error, started, run_id)
        if store is not None:
            self._record(store, run_id, loop, result)
        self.emit("goal_done", loop.goal, status.value, reason=error, data=result)
        return result

    def _spec(self, loop: "_Loop", checkpoint: dict | None) -> dict:
        from .durable import GOAL_KIND

        # (cascade changes how a failed step ends the goal: a resume keeps the run's own)
        return {"kind": GOAL_KIND, "input": loop.input, "meta": self.store_meta, "checkpoint": checkpoint,
                **({"cascade": self.cascade} if self.cascade != "skip" else {})}

    def _record(self, store: RunStore, run_id: str, loop: "_Loop", result: GoalResult) -> None:
        from .durable import decision_name, dump_state

        summary: dict[str, Any] = {"goal": result.to_json()}
        status = result.status.value
        if result.status is GoalStatus.HITL and loop.pending:
            store.set_spec(run_id, self._spec(loop, dump_state(loop)), "").result()
            summary["waiting"] = {"decision": decision_name(run_id), "kind": "goal",
                                  "steps": [p["id"] for p in loop.pending]}
            status = "waiting"
        store.set_status(run_id, status, summary).result()

    # -- pieces the loop uses ---------------------------------------------------------

    def emit(self, type_: str, goal: str, status: str, *, call_id: str | None = None, reason: str | None = None,
             data: Any = None) -> None:
        cbs = self.on_event if isinstance(self.on_event, (list, tuple)) else [self.on_event] if self.on_event else []
        if self._spans is not None:
            cbs = [*cbs, self._spans]
        event = Event(type_, "goal", goal, None, 0, status, call_id=call_id, reason=reason, data=data)
        for cb in cbs:
            try:
                cb(event)
            except Exception:  # noqa: BLE001 - observers never break the loop
                pass

    def tools_for(self, hint: str | None) -> ToolRegistry:
        registry: ToolRegistry = self.agent.registry
        patterns = self.roles.get(hint or "")
        if not patterns:
            return registry
        return ToolRegistry([registry[name] for name in registry
                             if any(fnmatch.fnmatchcase(name, p) for p in patterns)])

    def subagent(self, hint: str | None, tools: ToolRegistry | None = None) -> Agent:
        """A sub-agent over the tools ``hint`` maps to, or over ``tools`` when given (an
        imported plan step's hinted tools: goals/plan_steps.py)."""
        from ..llm.agent import Agent

        a = self.agent
        return Agent(a.provider, tools if tools is not None else self.tools_for(hint), mode=a.mode,
                     max_turns=self.subagent_turns, approve=a.approve,
                     max_calls=a.max_calls, model=a.model, on_event=a.on_event, latent_provider=a.latent_provider,
                     temperature=a.temperature, max_tokens=a.max_tokens, system=a.system,
                     run_options=a.run_options, approval_risk=a.approval_risk, taint=a.taint,
                     dispatch=a.dispatch, _depth=a.depth + 1)


def _provider(spec: Any) -> Any:
    if isinstance(spec, str):
        from ..llm.providers import get_provider

        return get_provider(spec)
    return spec


class _Loop:
    """One goal's plan -> run -> judge -> replan cycle."""

    def __init__(self, runner: GoalRunner, goal: str, input: Any):
        self.runner = runner
        self.goal = goal
        self.input = input
        self.facts: dict[str, Any] = {}
        self.completed: dict[str, dict] = {}         # step id -> its result, across plans
        self.records: dict[str, StepRecord] = {}
        self.replans = 0
        self.steps_run = 0
        self.plans: list[list[dict]] = []
        self.last: _PlanRun | None = None
        self.pending: list[dict] = []                # steps waiting for a person (kept in the store)
        self.recording: tuple[Any, str, float] | None = None   # (store, run id, start) of a recorded goal

    def report(self) -> None:
        """Keep the goal's progress in its run's summary while it runs (status ``running``:
        the steps so far with their verdicts, the facts), so that a watcher (the dashboard,
        ``runs show``) sees each step as it goes.  Queued, not awaited: the store commits its
        queue in order, so the record written when the goal ends or waits comes after it."""
        if self.recording is None:
            return
        store, run_id, started = self.recording
        goal = {"status": "running", "output": None, "facts": dict(self.facts),
                "goal_execution": {"steps": self.progress_steps(), "replans": self.replans,
                                   "steps_run": self.steps_run,
                                   "elapsed_s": round(time.perf_counter() - started, 3)}}
        try:
            store.set_status(run_id, "running", {"goal": goal})
        except (TypeError, ValueError):  # a fact that is no JSON value: the end record says so, not a watcher's
            pass

    def progress_steps(self) -> list[dict]:
        """Every step so far: those judged, and the current plan's others as running (its
        sub-agent started) or pending."""
        steps = {sid: rec.to_json() for sid, rec in self.records.items()}
        last = self.last if self.last is not None and self.last.number == len(self.plans) - 1 else None
        for s in self.plans[-1] if self.plans else ():
            rec = last.records.get(s["id"]) if last is not None else None
            steps[s["id"]] = rec.to_json() if rec is not None else {
                "id": s["id"], "task": s.get("task"), "verdict": None, "confidence": None, "note": "",
                "status": "running" if last is not None and s["id"] in last.started else "pending"}
        return list(steps.values())

    async def drive(self) -> tuple[GoalStatus, str | None]:
        r = self.runner
        try:
            steps = await r.planner.plan(self.goal, identity=r.identity, facts=self.facts, tools=self.tools())
        except PlannerError as exc:
            return GoalStatus.FAILED, f"planner error: {exc}"
        return await self.cycle(steps)

    def tools(self) -> list:
        return list(self.runner.agent.prompt_tools())

    async def cycle(self, steps: list[PlannedStep]) -> tuple[GoalStatus, str | None]:
        """Run ``steps``, then replan around failures until done or a limit stops the loop."""
        r = self.runner
        while True:
            left = r.max_goal_steps - self.steps_run
            if len(steps) > left:
                return GoalStatus.BLOCKED, (f"the plan has {len(steps)} step(s) but the goal step limit "
                                            f"({r.max_goal_steps}) leaves {left}")
            self.plans.append([s.to_json() for s in steps])
            r.emit("goal_plan", self.goal, "planned" if not self.replans else "replanned",
                   data={"plan": len(self.plans) - 1, "steps": self.plans[-1]})
            self.report()
            done = await self.run_plan(steps)
            if done.fatal is not None:
                return GoalStatus.FAILED, done.fatal
            if done.waiting:
                return GoalStatus.HITL, "a step needs a person's judgement and no approver was given"
            failed = [rec for rec in done.records.values() if rec.status is StepStatus.FAILED]
            if not failed:
                return GoalStatus.COMPLETE, None
            outcome = await self.replan(failed)
            if isinstance(outcome, tuple):
                return outcome
            steps = outcome

    async def replan(self, failed: list[StepRecord]) -> list[PlannedStep] | tuple[GoalStatus, str]:
        r = self.runner
        if self.replans >= r.max_replans:
            return GoalStatus.FAILED, (f"step(s) {', '.join(f.id for f in failed)} failed and the replan "
                                       f"limit ({r.max_replans}) is reached")
        self.replans += 1
        summary = [StepSummary(rec.id, rec.task, rec.verdict or "", rec.note)
                   for rec in self.records.values() if rec.status is StepStatus.DONE]
        failures = [StepSummary(f.id, f.task, f.verdict or "fail", f.note) for f in failed]
        r.emit("goal_replan", self.goal, "replanning", data={"replan": self.replans,
                                                             "failed": [f.to_json() for f in failures]})
        try:
            return await r.planner.replan(
                self.goal, completed=summary, failed=failures, facts=self.facts,
                remaining_steps=r.max_goal_steps - self.steps_run, remaining_replans=r.max_replans - self.replans,
                tools=self.tools(), identity=r.identity, first_number=len(self.records) + 1)
        except PlannerError as exc:
            return GoalStatus.FAILED, f"planner error: {exc}"

    async def answered(self, last_steps: list[PlannedStep], approve: bool,
                       reason: str) -> tuple[GoalStatus, str | None]:
        """Continue a goal that waited for a person: ``approve`` passes every waiting step,
        else they fail; then the rest of that plan runs (or the loop replans)."""
        number = len(self.plans) - 1
        for p in self.pending:
            step = PlannedStep(p["id"], p["task"], "", ())
            if approve:
                for key, value in (p.get("facts") or {}).items():
                    self.facts.setdefault(str(key), value)
                note = f"a person judged the step done: {reason or 'approved'}"
                self.completed[p["id"]] = {"output": p.get("output"), "verdict": "pass", "confidence": 1.0,
                                           "note": note, "facts": p.get("facts") or {}}
                self.records[p["id"]] = StepRecord(p["id"], step.task, StepStatus.DONE, "pass", 1.0, note, number)
            else:
                self.records[p["id"]] = StepRecord(p["id"], step.task, StepStatus.FAILED, "fail", 1.0,
                                                   f"a person judged the step failed: {reason or 'rejected'}", number)
            self.runner.emit("goal_step_verdict", self.goal, self.records[p["id"]].verdict or "", call_id=p["id"],
                             data=self.records[p["id"]].to_json())
        self.pending = []
        self.report()
        failed = [self.records[s.id] for s in last_steps if self.records[s.id].status is StepStatus.FAILED]
        if failed:
            outcome = await self.replan(failed)
            return outcome if isinstance(outcome, tuple) else await self.cycle(outcome)
        rest = [s for s in last_steps if self.records[s.id].status is not StepStatus.DONE]
        return await self.cycle(rest) if rest else (GoalStatus.COMPLETE, None)

    async def run_plan(self, steps: list[PlannedStep]) -> _PlanRun:
        from ..runtime.api import arun

        done = _PlanRun(steps, len(self.plans) - 1)
        self.last = done
        by_id = {s.id: s for s in steps}

        async def step_tool(step: str, task: str, success_criterion: str, expected_findings: list | None = None,
                            subagent_hint: str | None = None, inputs: dict | None = None,
                            facts: dict | None = None) -> dict:
            return await self.carry_out(done, by_id[step], inputs or {})

        spec = ToolSpec(STEP_TOOL, "Carry out one planned step of a goal with a sub-agent, then judge it",
                        STEP_INPUT_SCHEMA, STEP_OUTPUT_SCHEMA, Risk.NONE, step_tool, True, origin="goal")
        plan = steps_to_plan(self.goal, steps, plan_id=f"goal-plan-{done.number}")
        result = await arun(plan, ToolRegistry([spec]), cascade=self.runner.cascade,
                            input={"facts": dict(self.facts),
                                   "completed": {d: self.completed[d] for s in steps for d in s.depends_on
                                                 if d in self.completed}})
        for s in steps:                   # plan order: a step's dependencies are recorded first
            if s.id not in done.records:
                blocked = [d for d in s.depends_on
                           if d in done.records and done.records[d].status is not StepStatus.DONE]
                note = f"not run: {', '.join(blocked)} did not succeed" if blocked else _skip_note(result, s.id)
                done.records[s.id] = StepRecord(s.id, s.task, StepStatus.SKIPPED, note=note, plan=done.number)
        done.records = {s.id: done.records[s.id] for s in steps}    # plan order, not completion order
        self.records.update(done.records)
        self.report()   # (the steps skipped show while the loop replans)
        return done

    async def carry_out(self, done: _PlanRun, step: PlannedStep, inputs: dict) -> dict:
        r = self.runner
        self.steps_run += 1
        done.started.add(step.id)
        self.report()
        outcome = await self.delegate(step, inputs)
        try:
            verdict = await r.evaluator.evaluate(step, outcome, known_facts=self.facts)
        except EvaluatorError as exc:
            done.fatal = f"evaluator error on step {step.id}: {exc}"
            self.record(done, step, StepStatus.FAILED, None, str(exc))
            raise RunError(EVALUATOR_FAILED, str(exc)) from None
        if verdict.kind is VerdictKind.HITL:
            verdict = await self.ask_person(done, step, verdict)
        r.emit("goal_step_verdict", self.goal, verdict.kind.value, call_id=step.id, data=verdict.to_json())
        if verdict.kind is VerdictKind.HITL:
            done.waiting = True
            self.record(done, step, StepStatus.WAITING, verdict)
            self.pending.append({"id": step.id, "task": step.task, "note": verdict.note, "facts": verdict.facts,
                                 "output": outcome.output})
            raise RunError(HUMAN_NEEDED, verdict.note or "the step needs a person's judgement")
        if verdict.kind is VerdictKind.FAIL:
            self.record(done, step, StepStatus.FAILED, verdict)
            raise RunError(STEP_FAILED, verdict.note or "the step's success criterion is not met")
        for key, value in verdict.facts.items():     # completion order; a known key is never overwritten
            self.facts.setdefault(str(key), value)
        self.record(done, step, StepStatus.DONE, verdict)
        result = {"output": outcome.output, "verdict": verdict.kind.value, "confidence": verdict.confidence,
                  "note": verdict.note, "facts": verdict.facts}
        self.completed[step.id] = result
        done.results[step.id] = result
        return result

    def record(self, done: _PlanRun, step: PlannedStep, status: StepStatus, verdict: Verdict | None,
               note: str = "") -> None:
        done.records[step.id] = StepRecord(step.id, step.task, status, verdict.kind.value if verdict else None,
                                           verdict.confidence if verdict else None,
                                           verdict.note if verdict else note, done.number)
        self.report()

    async def delegate(self, step: PlannedStep, inputs: dict) -> StepOutcome:
        """Carry the step out with a sub-agent restricted to the tools its hint maps to."""
        from ..llm.provider import ProviderError

        agent = self.runner.subagent(step.subagent_hint)
        request = f"{step.task}\n\nThe step is done when: {step.success_criterion}"
        if step.expected_findings:
            request += f"\nEstablish: {', '.join(step.expected_findings)}"
        data = {"facts": dict(self.facts), "inputs": inputs}
        if self.input is not None:
            data["goal_input"] = self.input
        try:
            result = await agent.arun(request, input=data)
        except ProviderError as exc:
            return StepOutcome(SubAgentStatus.FAILED, error=f"the step's agent could not start: {exc}")
        if result.status == "succeeded":
            return StepOutcome(SubAgentStatus.SUCCEEDED, result.output)
        if result.status == "rejected" or _approval_refused(result):
            return StepOutcome(SubAgentStatus.REJECTED, result.output,
                               result.error if result.status == "rejected"
                               else "an approval the step needed was refused")
        if result.provider_error is None and len(result.turns) >= agent.max_turns and \
                (result.error or "").startswith("no final output"):
            if result.output is None and not _any_call_succeeded(result):
                # nothing came of the step (every call failed, no output): a failure, so its
                # dependents are skipped and the loop replans; `partial` is for a step that
                # produced something short of its criterion
                return StepOutcome(SubAgentStatus.FAILED, None,
                                   f"{result.error}, and no call succeeded: the step produced nothing")
            return StepOutcome(SubAgentStatus.OUT_OF_TURNS, result.output, result.error)
        return StepOutcome(SubAgentStatus.FAILED, result.output, result.error or f"the step's agent {result.status}")

    async def ask_person(self, done: _PlanRun, step: PlannedStep, verdict: Verdict) -> Verdict:
        r = self.runner
        if r.approver is None:
            return verdict
        plan = steps_to_plan(self.goal, done.steps)
        call = next(c for c in plan.calls if c.id == step.id)
        request = ApprovalRequest("call", plan, ({"id": step.id, "tool": STEP_TOOL, "risk": "medium", "index": 0},),
                                  call=call, call_id=step.id,
                                  args={"task": step.task, "success_criterion": step.success_criterion,
                                        "evaluator_note": verdict.note},
                                  plan_id="goal", max_risk=Risk.MEDIUM)
        decision = await decide(r.approver, request, r.approval_timeout)
        if decision.action == "reject":
            return Verdict(VerdictKind.FAIL, 1.0, f"a person judged the step failed: {decision.reason}",
                           verdict.facts, by_llm=False)
        return Verdict(VerdictKind.PASS, 1.0, f"a person judged the step done: {decision.reason or 'approved'}",
                       verdict.facts, by_llm=False)

    # -- the result ---------------------------------------------------------------------

    def result(self, status: GoalStatus, error: str | None, started: float, run_id: str | None = None) -> GoalResult:
        return GoalResult(status, self.output(), dict(self.facts), self.step_records(), self.replans,
                          self.steps_run, time.perf_counter() - started, error, self.plans, run_id)

    def step_records(self) -> list[StepRecord]:
        records = dict(self.records)
        last = self.last
        if last is not None and any(s.id not in records for s in last.steps):
            # the loop stopped inside a plan (cancelled): its steps so far, the rest marked so
            for s in last.steps:
                records[s.id] = last.records.get(s.id) or StepRecord(s.id, s.task, StepStatus.CANCELLED,
                                                                      note="not finished", plan=last.number)
        return list(records.values())

    def output(self) -> Any:
        """The results of the last plan's final steps (those no other step of it depends on):
        one such step gives its output, several give ``{id: output}``."""
        if self.last is None:
            return None
        needed = {d for s in self.last.steps for d in s.depends_on}
        finals = [s.id for s in self.last.steps if s.id not in needed and s.id in self.last.results]
        if not finals:
            return None
        if len(finals) == 1:
            return self.last.results[finals[0]]["output"]
        return {sid: self.last.results[sid]["output"] for sid in finals}


def _approval_refused(result: Any) -> bool:
    """Did a call of the sub-agent fail because its approval was refused (eager mode: the
    call gate, not the plan gate)?"""
    return any((c.get("error") or {}).get("error") == "Approval.Rejected" for t in result.turns for c in t.calls)


def _skip_note(result: Any, step_id: str) -> str:
    try:
        rec = result.call(step_id)
    except KeyError:
        return "not run"
    return str(rec.error) if rec.error is not None else f"not run ({rec.status})"


def _any_call_succeeded(result: Any) -> bool:
    """Whether any turn of a sub-agent's run had a call that succeeded."""
    return any(c.get("status") == "succeeded" for t in result.turns for c in (t.calls or ()))

