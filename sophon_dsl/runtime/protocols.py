"""Small public types: :class:`Branch` (an activity picks an output branch) and the
:class:`LatentExecutor` protocol (who runs latent calls without an inline ``_output``), with
its optional :class:`ScopedLatentExecutor` capability, and the retry :class:`Advisor`
(``RunOptions.advisor``: one alternative call after the retry policy, ``runtime/retry.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..model import Call, Plan
from ..tools import ToolSpec

if TYPE_CHECKING:  # (named in annotations only)
    from .gate import TaintSet

__all__ = ["Advisor", "Branch", "FailedCall", "LatentExecutor", "LatentRequest", "PlanHolder",
           "ScopedLatentExecutor", "SessionExecutor"]


@dataclass(frozen=True, slots=True)
class Branch:
    """Returned by an activity whose output path is ``†a || †b || ...``: write ``value``
    to the alternative ``target`` (0-based index, or the path text ``"†state.b"`` /
    ``"state.b"``).  An activity that returns a plain value writes to the first
    alternative; one that raises sends ``{error, cause}`` to the last."""

    target: int | str
    value: Any = None


@dataclass(frozen=True)
class LatentRequest:
    call: Call
    call_id: str
    tool: ToolSpec | None
    args: dict
    plan: Plan
    attempt: int = 1


@runtime_checkable
class LatentExecutor(Protocol):
    """Runs a latent call (no Python implementation, no inline ``_output``), e.g. with an LLM.

    Return the call's result (may be a :class:`Branch`); raise to fail it.
    """

    async def execute(self, request: LatentRequest) -> Any: ...


@runtime_checkable
class ScopedLatentExecutor(LatentExecutor, Protocol):
    """A latent executor that also takes what a call's ``_scopes`` let it see (``{"state": ...,
    "input": ...}``): the run hands a latent call with scopes to :meth:`execute_scoped`, and to
    :meth:`execute` otherwise (``llm/stream.py``'s ``StreamInvoker``)."""

    async def execute_scoped(self, request: LatentRequest, context: dict) -> Any: ...


@runtime_checkable
class PlanHolder(Protocol):
    """What ``run(plan)`` takes besides a :class:`~sophon_dsl.model.Plan` and plan text: an
    object that holds one (a ``CompiledPlan``, a loader's ``LoadResult``, a ``Prepared``)."""

    @property
    def plan(self) -> Plan: ...


@runtime_checkable
class SessionExecutor(LatentExecutor, Protocol):
    """A latent executor whose sub-agents share one taint set with the run they serve
    (``goals/plan_steps.StepAgents``): a run given it and no ``taint`` option uses that set,
    so data one step's agent read stays local data for the run's later calls."""

    session_taint: TaintSet


@dataclass(frozen=True)
class FailedCall:
    """What an advisor sees: the failed call (and its DSL text), its error, and the tools an
    alternative may use (their output fits the call's readers)."""

    call: Call
    text: str
    error: Any            # the ErrorInfo
    tools: tuple          # ToolSpec of every compatible tool, the failed one first


@runtime_checkable
class Advisor(Protocol):
    async def suggest(self, failure: FailedCall) -> Call | None:
        """One call to run instead, or None (NO_ALTERNATIVE)."""
        ...
