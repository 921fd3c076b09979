"""Imported plan steps carried out by sub-agents with tools (issue 26 item 1).

A Sophon ExecutionPlan (seed 000) or a JarvisCore step list (seed 003) is loaded as a plan of
``agent.step`` calls (``syntax/documents.py``). Without this module such a call is one model
request (a latent call), so the tools a step names in ``toolHints`` never run.
:class:`StepAgents` is a :class:`~sophon_dsl.runtime.protocols.LatentExecutor` that runs each
``agent.step`` call as a sub-agent -- the very sub-agent a ``goal`` step gets
(:meth:`GoalRunner.subagent`), so one code path gives sub-agents their tools, approval, taint
and budgets -- and hands every other latent call to an :class:`LLMLatentExecutor`::

    steps = StepAgents(provider, tools, max_turns=4, approve="yes")
    result = sophon_dsl.run(plan, tools, executor=steps, approve="yes")

What a step's sub-agent gets:

* the request: the step's ``description`` (or ``task``), its success criterion and expected
  findings;
* the tools: the run's tools with the step's ``toolHints`` listed first (``strict_tool_hints``:
  only those); a JarvisCore ``subagent_hint`` maps to tools through ``roles`` as for goals;
* its input: ``{"inputs": {dependency id: that step's result}}``;
* ``max_turns`` turns; the step's ``modelHint`` routes its model (``Routing.NoQualifiedModel``
  when nothing qualifies, never a silent fallback).

Its final output is the step's result; a sub-agent that does not succeed fails the step
(``Step.Failed``, or ``Approval.Rejected`` when an approval it needed was refused), so the
runtime's retry, ``--smart-retry`` alternative and cascade apply as to any call.

Approval stays plan-level (seed 000): a step's ``estimatedRisk`` gates the plan before
anything runs, and a call of the step's sub-agent whose risk is within the risk approved for
its step runs without asking again; a riskier call (or one whose risk taint raised) asks the
run's approver. Every sub-agent call passes the one call gate (runtime/gate.py) with the
run's taint set (:attr:`StepAgents.taint`, shared with the run: ``sophon_dsl.run`` takes it
from the executor when no ``taint`` is given).

Durable runs: with ``store``, each step's sub-agent is recorded as an agent run
``<run id>.<step id>``; when the plan run is resumed and a step runs again, its recorded
sub-agent is resumed (recorded replies are not asked for again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..model import Risk
from ..runtime.approval import ApprovalDecision, ApprovalRequest, decide, normalize_approver
from ..runtime.errors import APPROVAL_REJECTED, RunError
from ..runtime.gate import TaintSet
from ..runtime.protocols import LatentExecutor, ScopedLatentExecutor
from ..tools import ToolRegistry, ToolSpec

if TYPE_CHECKING:  # (the agent and the durable package load when steps run)
    from ..durable.current import CurrentCall
    from ..llm.agent import Agent

__all__ = ["STEP_AGENT_FAILED", "STEP_NO_HINTED_TOOL", "StepAgents", "step_request"]

STEP_AGENT_FAILED = "Step.Failed"
STEP_NO_HINTED_TOOL = "Step.NoHintedTool"
AGENT_STEP = "agent.step"


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str) and v.strip()]
    return []


def step_request(args: dict, success_criterion: str | None) -> str:
    """What the step's sub-agent is asked: its description (or task), criterion, findings."""
    text = str(args.get("description") or args.get("task") or "").strip() or "Carry out this step of the plan"
    if success_criterion:
        text += f"\n\nThe step is done when: {success_criterion}"
    findings = _names(args.get("expected_findings"))
    if findings:
        text += f"\nEstablish: {', '.join(findings)}"
    return text


class StepAgents:
    """Runs ``agent.step`` calls as sub-agents over ``tools``; other latent calls go to ``latent``
    (default: an :class:`~sophon_dsl.llm.latent.LLMLatentExecutor` on ``provider``).

    ``approve`` is the run's approver (as ``sophon_dsl.run``'s); ``run_options`` are passed to
    each sub-agent's runs (``tool_executor``, ``max_concurrency``...); ``on_event(step_id,
    event)`` receives the sub-agents' events (their ``plan_id`` is ``turn<N>``); :attr:`log`
    keeps, per step, the tools its sub-agent called. ``store`` records each sub-agent (see the module docstring).
    """

    def __init__(self, provider: Any, tools: Any = None, *, model: str | None = None, max_turns: int = 4,
                 strict_tool_hints: bool = False, approve: Any = "no", approval_risk: Risk = Risk.MEDIUM,
                 approval_timeout: float | None = 600.0, on_event: Any = None, run_options: dict | None = None,
                 roles: dict[str, list[str]] | None = None, taint: TaintSet | None = None,
                 latent: LatentExecutor | None = None,
                 store: Any = None, stdlib: Any = True, temperature: float | None = None):
        from ..llm.agent import Agent
        from ..llm.latent import LLMLatentExecutor
        from .runner import GoalRunner

        if isinstance(provider, str):
            from ..llm.providers import get_provider

            provider = get_provider(provider, model=model)
        if isinstance(approve, str) and approve.lower() == "wait":
            approve = None   # (a plan run left waiting: what the plan's approval does not cover is refused)
        self.provider = provider       # unwrapped: model hints route on it
        self.model = model
        self.strict_tool_hints = strict_tool_hints
        self.approval_risk = approval_risk
        self.approval_timeout = approval_timeout
        self._approver = normalize_approver(approve)
        self.store = store
        self.log: dict[str, list[dict]] = {}   # step id -> [{tool, status, call_id}] of its sub-agent
        self._on_event = on_event
        # the parent the sub-agents are made from: GoalRunner.subagent copies its settings
        self.parent = Agent(provider, tools, max_turns=max_turns, approve=approve, model=model,
                            run_options=run_options, approval_risk=approval_risk, taint=taint, stdlib=stdlib,
                            temperature=temperature)
        self.runner = GoalRunner(self.parent, subagent_turns=max_turns, roles=roles)
        self.taint = self.parent.taint
        self.session_taint = self.taint   # what sophon_dsl.run shares with the run (runtime/api.py)
        self.latent = latent if latent is not None else LLMLatentExecutor(provider, model=model,
                                                                          temperature=temperature)
        # what the LLM latent executor was asked (tests, tracing); another executor keeps no log
        self.requests = self.latent.requests if isinstance(self.latent, LLMLatentExecutor) else []

    # -- LatentExecutor ----------------------------------------------------------------------

    async def execute(self, request: Any) -> Any:
        if request.call.tool != AGENT_STEP:
            return await self.latent.execute(request)
        return await self.run_step(request)

    async def execute_scoped(self, request: Any, context: dict) -> Any:
        if request.call.tool != AGENT_STEP:
            if isinstance(self.latent, ScopedLatentExecutor):
                return await self.latent.execute_scoped(request, context)
            return await self.latent.execute(request)
        return await self.run_step(request)

    # -- one step ----------------------------------------------------------------------------

    def tools_for(self, args: dict) -> ToolRegistry:
        """The step's tools: its hints first (strict: only them); a ``subagent_hint`` as for goals."""
        hints = _names(args.get("toolHints"))
        hint = args.get("subagent_hint") if isinstance(args.get("subagent_hint"), str) else None
        base = self.runner.tools_for(hint)
        if not hints:
            return base
        hinted: list[ToolSpec] = []
        for name in hints:
            spec = base.get(name)
            if spec is not None and spec not in hinted and name != AGENT_STEP:
                hinted.append(spec)
        if self.strict_tool_hints:
            if not hinted:
                raise RunError(STEP_NO_HINTED_TOOL, f"none of the step's toolHints ({', '.join(hints)}) is a "
                                                    "tool of the run, and only hinted tools are offered")
            return ToolRegistry(hinted)
        # the tools the model is shown (its own, else the standard ones), hinted ones first
        shown = [s for s in base.values() if s.origin != "stdlib"] or list(base.values())
        return ToolRegistry([*hinted, *(s for s in shown if s not in hinted and s.name != AGENT_STEP)])

    async def run_step(self, request: Any) -> Any:
        from ..durable.current import current_call
        from ..llm.provider import ProviderError
        from ..planning.routing import route_for

        call, args = request.call, dict(request.args or {})
        step_id = request.call_id
        tools = self.tools_for(args)
        agent = self.runner.subagent(None, tools)
        # a model hint picks a capable model for the whole sub-agent, or fails the step
        provider, model = route_for(self.provider, call.model_hint, self.model)
        if provider is not self.provider or model != self.model:
            agent.provider = agent.guards.wrap(provider, model)
            agent.model = model
        step_risk = call.risk if call.risk is not None else Risk.NONE
        agent.use_approver(self._covered_by(step_id, step_risk))
        calls = self.log.setdefault(step_id, [])
        agent.on_event = self._observer(step_id, calls)
        inputs = args.get("inputs") if isinstance(args.get("inputs"), dict) else {}
        text = step_request(args, call.success_criterion)
        try:
            result = await self._run(agent, text, {"inputs": inputs}, step_id, current_call())
        except ProviderError as exc:
            raise RunError(STEP_AGENT_FAILED, f"step {step_id}: its agent could not start: {exc}") from None
        if result.status == "succeeded":
            return result.output
        refused = result.status == "rejected" or any(
            (c.get("error") or {}).get("error") == APPROVAL_REJECTED for t in result.turns for c in t.calls)
        if refused:
            raise RunError(APPROVAL_REJECTED, f"step {step_id}: an approval its agent needed was refused"
                                              + (f" ({result.error})" if result.error else ""))
        raise RunError(STEP_AGENT_FAILED, f"step {step_id}: its agent {result.status}: "
                                          f"{result.error or 'no final output'}")

    async def _run(self, agent: Agent, text: str, data: dict, step_id: str, current: CurrentCall | None) -> Any:
        if self.store is None or current is None or not current.run_id:
            return await agent.arun(text, input=data)
        from ..durable import Lent, open_store

        # the step's sub-agent is an agent run of its own, named after the plan run and step, so
        # that a resumed plan run finds it and goes on from its recorded turns
        backend = open_store(self.store)
        try:
            sub_id = f"{current.run_id}.{step_id}"
            row = backend.get_run(sub_id)
            # lent: the sub-agent's record must not close the plan run's store when the step ends
            agent.store = store = Lent(backend)
            if row is None:
                return await agent.arun(text, input=data, run_id=sub_id)
            return await agent.aresume(sub_id, store=store, unknown="rerun", force=True)
        finally:
            if backend is not self.store:  # opened here from a URL: one store per step, closed with it
                backend.close()

    def _covered_by(self, step_id: str, step_risk: Risk) -> Callable[[ApprovalRequest], Any]:
        """The sub-agent's approver: what the plan-level approval of the step covers is approved,
        anything riskier asks the run's approver (seed 000: no interruption mid-run for what
        was approved; nothing beyond it unasked)."""
        parent, timeout = self._approver, self.approval_timeout

        async def approver(req: ApprovalRequest) -> ApprovalDecision:
            if req.max_risk <= step_risk:
                return ApprovalDecision.approve(f"within the {step_risk.label} risk approved for step {step_id}")
            return await decide(parent, req, timeout)
        return approver

    def _observer(self, step_id: str, calls: list[dict]) -> Callable[[Any], None]:
        given = self._on_event

        def observe(event: Any) -> None:
            if event.type in ("plan_step_complete", "plan_step_failed") and event.tool:
                calls.append({"tool": event.tool, "status": event.status, "call_id": event.call_id})
            if given is not None:
                given(step_id, event)
        return observe
