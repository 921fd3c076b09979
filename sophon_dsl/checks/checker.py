"""Runs rules over a plan, all at once or one arriving call at a time.

Whole plan (what ``compile_plan`` does)::

    runner = Checker(plan, registry)           # per-call rules over every call
    runner.finish(plan.output)                  # whole-plan rules
    runner.diagnostics

Streaming: start from the header (a plan with no calls), then per arriving call
``add_call(call, call_id)`` grows the data flow by that call and runs the per-call
rules on it alone, returning that call's diagnostics; ``finish(output)`` runs the
whole-plan rules (and the per-call rules' checks of the output value) and returns
``(call index or None, diagnostic)`` pairs.  A call's per-call diagnostics are
those a check of the plan up to that call would give it.
"""

from __future__ import annotations

from typing import Iterable

from ..dataflow import DataFlow
from ..diagnostics import Diagnostic
from ..model import Call, Plan, Value
from ..tools import ToolRegistry
from .context import CheckContext
from .rule import Rule, Scope

__all__ = ["RuleRunner"]


class RuleRunner:
    """Runs ``rules`` (see the module docstring); ``tools`` is used as given (the
    compiler passes its effective registry: user tools, ``agent.step``, plan declarations)."""

    rules: tuple[type[Rule], ...] = ()

    def __init__(self, plan: Plan, tools: ToolRegistry, *, max_calls: int | None = None,
                 require_executor: bool = False, require_implementations: bool = False,
                 rules: Iterable[type[Rule]] | None = None, flow: DataFlow | None = None) -> None:
        # ``flow``: the plan's data flow when the caller has it already (a compiled plan
        # checked again for more codes); it must be the flow of these very calls
        if flow is None:
            flow = DataFlow.build(plan.calls)  # ids made when a diagnostic names a call
        ctx = self.ctx = CheckContext(plan, tools, flow, max_calls=max_calls, require_executor=require_executor,
                                      require_implementations=require_implementations)
        made = [rule(ctx) for rule in (self.rules if rules is None else tuple(rules))]
        self.call_rules = tuple(r for r in made if r.scope is Scope.CALL)
        self.plan_rules = tuple(r for r in made if r.scope is Scope.PLAN)
        self.finished = False
        ctx.output = plan.output
        ctx.note_calls(0)
        for rule in self.call_rules:
            rule.check_calls()
        ctx.incremental = True  # from here on, calls arrive one at a time

    @property
    def flow(self) -> DataFlow:
        return self.ctx.flow

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Everything found so far, in the order found."""
        return list(self.ctx.diags)

    def found(self) -> list[tuple[int | None, Diagnostic]]:
        """Everything found so far with the call each belongs to (None: the plan)."""
        return list(zip(self.ctx.diag_calls, self.ctx.diags))

    def set_header(self, plan: Plan, tools: ToolRegistry) -> None:
        """A streamed header changed (schemas, declared tools): later calls use it."""
        self.ctx.set_header(plan, tools)

    def add_call(self, call: Call, call_id: str) -> list[Diagnostic]:
        """Append one call and run the per-call rules on it; returns its diagnostics."""
        ctx = self.ctx
        start = len(ctx.diags)
        i = len(ctx.calls)
        ctx.flow.add_call(call, call_id)
        ctx.note_calls(i)
        for rule in self.call_rules:
            rule.check_call(i, call)
        return ctx.diags[start:]

    def finish(self, output: Value | None = None) -> list[tuple[int | None, Diagnostic]]:
        """Run the whole-plan rules (once); returns what they found, with call indexes."""
        if self.finished:
            return []
        self.finished = True
        ctx = self.ctx
        start = len(ctx.diags)
        if output is not None:
            ctx.output = output
        if ctx.output is not None:
            for rule in self.call_rules:
                rule.check_output(ctx.output)
        for rule in self.plan_rules:
            rule.check_plan()
        return list(zip(ctx.diag_calls[start:], ctx.diags[start:]))
