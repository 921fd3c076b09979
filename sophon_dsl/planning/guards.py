"""The pipeline's safety guards, as the agent loop uses them (seed 002).

:class:`Guards` is what a caller configures (``Agent(..., guards=Guards(...))``); the agent
starts one :class:`GuardRun` per request and asks it, turn by turn, which tools to offer,
what to tell the model about loops, and whether to stop.  The guards themselves live one per
module: :mod:`.budget`, :mod:`.context`, :mod:`.toolfilter`, :mod:`.loops`, :mod:`.limits`
(and :mod:`.truncate`, used by the prompt for every value fed back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..llm.provider import Provider, Wrapper
from .budget import Budget, BudgetedProvider, Usage
from .context import ContextWindow, ContextWindowProvider
from .limits import is_checkpoint
from .loops import LOOP_DETECTED, LoopDetector
from .toolfilter import ALWAYS_ON, filter_tools

__all__ = ["GuardRun", "Guards"]

_RAN = frozenset({"succeeded", "failed"})


@dataclass
class Guards:
    """``budget``: a :class:`~.budget.Budget` (None: no limits, no usage report);
    ``context_window``: a :class:`~.context.ContextWindow` or the window's size in tokens
    (None: requests are sent as built); ``tool_filter`` and ``loop_detection`` are on by
    default.  ``always_on``: the tools the filter offers with every request whenever they are
    registered (the seed's ``datetime.now`` and ``memory.search``), next to the top-scored
    ones."""

    budget: Budget | None = None
    context_window: ContextWindow | int | None = None
    tool_filter: bool = True
    loop_detection: bool = True
    always_on: Sequence[str] = ALWAYS_ON

    def wrap(self, provider: Any, model: str | None = None) -> Any:
        """``provider`` behind the budget and the context window (outermost: the window, so the
        budget sees the request as it is really sent)."""
        if self.budget is not None:
            provider = BudgetedProvider(provider, self.budget, model)
        window = self.context_window
        if isinstance(window, int):
            window = self.context_window = ContextWindow(window, summarizer=provider)
        if window is not None:
            provider = ContextWindowProvider(provider, window)
        return provider

    def start(self, provider: Any) -> "GuardRun":
        return GuardRun(self, provider)


def _budgeted(provider: Any) -> BudgetedProvider | None:
    while provider is not None and not isinstance(provider, BudgetedProvider):
        provider = provider.inner if isinstance(provider, Wrapper) else None
    return provider


def _signature(call: Any) -> tuple[str, str]:
    from ..syntax.dsl_printer import format_value

    return call.tool, ",".join(f"{p.name}={format_value(p.value)}" for p in call.params)


class GuardRun:
    """The guards' state for one request."""

    def __init__(self, guards: Guards, provider: Provider):
        self.guards = guards
        self.loops = LoopDetector() if guards.loop_detection else None
        self._meter = _budgeted(provider)
        self._start = Usage()
        if self._meter is not None:
            self._start.add(self._meter.usage)

    def tools(self, specs: Sequence[Any], request: str,
              lookup: Callable[[str], Any] | None = None) -> list[Any]:
        """The tools the prompt lists: ``specs`` filtered for ``request``.  ``lookup`` (the run's
        registry) finds the always-on tools ``specs`` leave out: the agent lists the caller's
        own tools only, which would otherwise drop the standard ``datetime.now`` and
        ``memory.search`` the seed keeps in every request."""
        if not self.guards.tool_filter:
            return list(specs)
        always = tuple(self.guards.always_on)
        listed = {s.name for s in specs}
        pinned = [] if lookup is None else [
            spec for spec in (lookup(name) for name in always if name not in listed) if spec is not None]
        return filter_tools([*specs, *pinned], request, always_on=always)

    def after_turn(self, record: Any) -> tuple[list[dict], str | None]:
        """(errors to show the model next turn, the ``Loop.Detected`` error that ends the loop)."""
        if self.loops is None:
            return [], None
        ran = [_signature(call) for call, info in zip(record.plan.calls, record.calls)
               if info.get("status") in _RAN]
        self.loops.observe(ran)
        tell, stop = self.loops.check()
        told = [{"call": None, "error": {"code": f.code, "message": f.message()}} for f in tell]
        return told, (f"{LOOP_DETECTED}: {stop.message()}" if stop is not None else None)

    def window(self) -> ContextWindow | None:
        """The context window the agent fits its requests to (None: no limit set)."""
        window = self.guards.context_window
        return window if isinstance(window, ContextWindow) else None

    @staticmethod
    def checkpoint(turn: int) -> bool:
        return is_checkpoint(turn)

    def usage(self) -> dict | None:
        """Tokens and cost of this request's model calls (None without a budget)."""
        if self._meter is None:
            return None
        now = self._meter.usage
        return Usage(now.requests - self._start.requests, now.input_tokens - self._start.input_tokens,
                     now.output_tokens - self._start.output_tokens, now.cost - self._start.cost).to_json()
