"""Planning modes (seeds 000, 001): whether a request is planned before anything runs.

* ``auto`` -- the heuristic classifier (:mod:`.classifier`) decides;
* ``llm`` (the seed's LlmDecides) -- one fast-tier request (temperature 0, at most 3 output
  tokens) answers COMPLEX or SIMPLE; any error or other answer falls back to the heuristic;
* ``always`` / ``never``.

Planning maps onto the agent's modes: a planned request runs in lazy mode (the whole plan is
checked, dry-run and approved before any call), an unplanned one in eager mode (calls start
while the reply streams).  No planning happens :data:`MAX_DEPTH` nested levels down (a
delegated request that would plan runs eagerly), so plans cannot nest without end.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..errors import OptionError
from ..llm.provider import Message, collect
from .classifier import Classification, classify
from .routing import fast_tier

__all__ = ["LLM_QUESTION", "MAX_DEPTH", "PlanningDecision", "PlanningMode", "PlanningPolicy", "decide"]

MAX_DEPTH = 3
LLM_MAX_TOKENS = 3
LLM_QUESTION = ("Does this request need a multi-step plan? Answer with one word: COMPLEX if it needs "
                "several dependent steps, SIMPLE otherwise.")
_ALIASES = {"auto": "auto", "llm": "llm", "llmdecides": "llm", "llm_decides": "llm", "llm-decides": "llm",
            "always": "always", "never": "never"}


class PlanningMode(str, Enum):
    AUTO = "auto"
    LLM = "llm"
    ALWAYS = "always"
    NEVER = "never"

    @classmethod
    def parse(cls, value: Any) -> "PlanningMode":
        """A mode from its name in any case, or the seed's names (``LlmDecides``, ``Auto``...)."""
        if isinstance(value, cls):
            return value
        name = _ALIASES.get(str(value).strip().lower())
        if name is None:
            raise OptionError(f"unknown planning mode {value!r}: expected auto, llm, always or never")
        return cls(name)


@dataclass(frozen=True)
class PlanningPolicy:
    """How an agent decides: the mode, and for ``llm`` the fast-tier provider and model that
    answer (None: the agent's own)."""

    mode: PlanningMode = PlanningMode.AUTO
    provider: Any = None
    model: str | None = None
    timeout: float = 30.0

    @classmethod
    def of(cls, value: Any) -> "PlanningPolicy | None":
        """None stays None (no planning asked for); a mode name or a policy becomes a policy."""
        if value is None or isinstance(value, cls):
            return value
        return cls(PlanningMode.parse(value))


@dataclass
class PlanningDecision:
    """What was decided for one request, as the agent's result reports it."""

    mode: PlanningMode
    classification: Classification
    plan: bool
    decided_by: str                      # heuristic, llm, always, never or depth
    fallback: str | None = None          # why the llm answer was not used
    answer: str | None = field(default=None, repr=False)

    def to_json(self) -> dict:
        out = {"mode": self.mode.value, "score": self.classification.score,
               "signals": dict(self.classification.signals), "plan": self.plan, "decided_by": self.decided_by}
        if self.fallback is not None:
            out["fallback"] = self.fallback
        return out


async def decide(request: str, policy: PlanningPolicy, *, depth: int = 0, provider: Any = None,
                 model: str | None = None) -> PlanningDecision:
    """Decide for ``request``; ``provider``/``model`` answer ``llm`` mode when the policy names none."""
    scored = classify(request)
    mode = policy.mode
    if depth >= MAX_DEPTH and mode is not PlanningMode.NEVER:
        return PlanningDecision(mode, scored, False, "depth")
    if mode is PlanningMode.ALWAYS:
        return PlanningDecision(mode, scored, True, "always")
    if mode is PlanningMode.NEVER:
        return PlanningDecision(mode, scored, False, "never")
    if mode is PlanningMode.LLM:
        asker = policy.provider or provider
        verdict, why, answer = await _ask_llm(request, asker, policy.model or model, policy.timeout)
        if verdict is not None:
            return PlanningDecision(mode, scored, verdict, "llm", answer=answer)
        return PlanningDecision(mode, scored, scored.plan, "heuristic", fallback=why, answer=answer)
    return PlanningDecision(mode, scored, scored.plan, "heuristic")


def llm_messages(request: str) -> list[Message]:
    return [Message("system", LLM_QUESTION), Message("user", f"Request: {request}\nCOMPLEX or SIMPLE?")]


async def _ask_llm(request: str, provider: Any, model: str | None,
                   timeout: float) -> tuple[bool | None, str | None, str | None]:
    """(verdict or None, why there is none, the raw answer)."""
    if provider is None:
        return None, "no provider to ask", None
    provider, model = fast_tier(provider, model)
    try:
        async with asyncio.timeout(timeout):
            answer = await collect(provider, llm_messages(request), model=model, temperature=0.0,
                                   max_tokens=LLM_MAX_TOKENS)
    except TimeoutError:
        return None, f"no answer within {timeout:g} s", None
    except Exception as exc:  # noqa: BLE001 - any failure means: use the heuristic
        return None, f"{type(exc).__name__}: {exc}", None
    word = answer.strip().strip(".!\"'`*").upper()
    if word == "COMPLEX":
        return True, None, answer
    if word == "SIMPLE":
        return False, None, answer
    return None, f"answer {answer.strip()[:40]!r} is neither COMPLEX nor SIMPLE", answer
