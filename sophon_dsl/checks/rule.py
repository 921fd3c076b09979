"""The rule base class: what a check declares and the hooks a :class:`Checker` calls.

A rule is a class with ``codes`` (the diagnostic codes it may emit), a ``scope``
and a one-line docstring saying what it checks.  One instance exists per check
run, bound to the run's :class:`~sophon_dsl.checks.context.CheckContext`.

* ``Scope.CALL`` rules check one call against the calls before it: ``check_call``
  runs when a call arrives (streaming), ``check_calls`` over a whole plan at once
  (by default the same, call by call; a rule may override it with a faster loop
  that reports exactly the same), and ``check_output`` for the plan's output
  value, which reads like one more call at the end.
* ``Scope.PLAN`` rules need every call: ``check_plan`` runs once, at the end.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model import Call, Value
    from .context import CheckContext

__all__ = ["Rule", "Scope"]


class Scope(Enum):
    CALL = "call"  # per call, as calls arrive
    PLAN = "plan"  # whole plan, once at the end (deferred while streaming)


class Rule:
    """Base of every check (see the module docstring)."""

    codes: tuple[str, ...] = ()
    scope: Scope = Scope.CALL

    __slots__ = ("ctx",)

    def __init__(self, ctx: "CheckContext") -> None:
        self.ctx = ctx

    def check_call(self, i: int, call: "Call") -> None:
        """Per-call rules: check call ``i`` (the latest call of the context)."""

    def check_calls(self) -> None:
        """Per-call rules: check every call of the context, in order."""
        if type(self).check_call is Rule.check_call:
            return  # a rule that checks no call (only the output, say): no loop of no-ops
        check = self.check_call
        for i, call in enumerate(self.ctx.calls):
            check(i, call)

    def check_output(self, value: "Value") -> None:
        """Per-call rules that read values: check the plan's output value."""

    def check_plan(self) -> None:
        """Whole-plan rules: check the plan once every call is known."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self.codes)}; {self.scope.value})"


def describe(rule: type[Rule]) -> dict[str, Any]:
    """A rule's declaration as data (docs, ``checks.describe_rules()``)."""
    doc = (rule.__doc__ or "").strip().splitlines()
    return {"name": rule.__name__, "codes": rule.codes, "scope": rule.scope.value,
            "summary": doc[0] if doc else ""}
