"""The step evaluator (seed 003): was the step's success criterion met?

One nano-tier request per step returns a verdict (pass / partial / fail / hitl) with a
confidence, a note and the facts the step established. No request is sent where the
answer is already known: a sub-agent that failed is ``fail``, one that ran out of turns
is ``partial`` (replan with smaller steps rather than ask a person; one that produced
nothing, no call succeeded and no output, is reported as failed), an approval the
person refused is ``hitl``. An answer that cannot be read raises
:class:`EvaluatorError` at once; it never defaults to a verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..errors import SophonError
from ..llm.provider import Message, Provider, ProviderError, collect
from .replies import strict_json
from .steps import PlannedStep

__all__ = ["EvaluatorError", "StepEvaluator", "StepOutcome", "SubAgentStatus", "Verdict", "VerdictKind"]

_PREVIEW = 4000   # characters of a step's output shown to the evaluator

_SYSTEM = """You judge whether one step of a plan met its success criterion. Reply with JSON only:
{"verdict": "pass" | "partial" | "fail" | "hitl", "confidence": 0.0-1.0, "note": "one sentence",
 "facts": {"snake_case_key": value}}
- pass: the criterion is clearly met; partial: partly met (say what is missing in the note);
  fail: not met; hitl: only a person can tell.
- facts: what the step established that later steps need, under the expected keys where they fit.
  Do not repeat facts that are already known."""


class EvaluatorError(SophonError):
    """The evaluator's reply cannot be read as a verdict (or its request failed)."""


class VerdictKind(str, Enum):
    PASS = "pass"
    PARTIAL = "partial"
    FAIL = "fail"
    HITL = "hitl"


class SubAgentStatus(str, Enum):
    """How the sub-agent that carried out a step ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUT_OF_TURNS = "out_of_turns"
    REJECTED = "rejected"          # a person refused an approval the step needed


@dataclass(frozen=True)
class StepOutcome:
    status: SubAgentStatus
    output: Any = None
    error: str | None = None


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    confidence: float
    note: str = ""
    facts: dict = field(default_factory=dict)
    by_llm: bool = True

    def to_json(self) -> dict:
        return {"verdict": self.kind.value, "confidence": self.confidence, "note": self.note, "facts": self.facts}


def shortcut(outcome: StepOutcome) -> Verdict | None:
    """The verdict known without asking a model, or None."""
    if outcome.status is SubAgentStatus.FAILED:
        return Verdict(VerdictKind.FAIL, 1.0, outcome.error or "the step's agent failed", by_llm=False)
    if outcome.status is SubAgentStatus.OUT_OF_TURNS:
        return Verdict(VerdictKind.PARTIAL, 1.0, outcome.error or "the step's agent ran out of turns", by_llm=False)
    if outcome.status is SubAgentStatus.REJECTED:
        return Verdict(VerdictKind.HITL, 1.0, outcome.error or "a person refused an approval the step needed",
                       by_llm=False)
    return None


def parse_verdict(reply: str) -> Verdict:
    data = strict_json(reply, EvaluatorError, "evaluator")
    if not isinstance(data, dict):
        raise EvaluatorError(f"the evaluator's reply must be an object, not {type(data).__name__}")
    try:
        kind = VerdictKind(str(data.get("verdict", "")).strip().lower())
    except ValueError:
        raise EvaluatorError(f"unknown verdict {data.get('verdict')!r}; expected pass, partial, fail or "
                             "hitl") from None
    confidence = data.get("confidence", 1.0)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        raise EvaluatorError(f"confidence must be a number from 0 to 1, not {confidence!r}")
    note = data.get("note", "")
    facts = data.get("facts", {})
    if facts is None:
        facts = {}
    if not isinstance(note, str) or not isinstance(facts, dict):
        raise EvaluatorError("note must be a string and facts an object")
    return Verdict(kind, float(confidence), note, facts)


class StepEvaluator:
    """Judges steps with one request each to ``provider`` (the nano tier)."""

    def __init__(self, provider: Provider, *, model: str | None = None, max_tokens: int | None = 400):
        self.provider = provider
        self.model = model
        self.max_tokens = max_tokens

    async def evaluate(self, step: PlannedStep, outcome: StepOutcome, *, known_facts: dict | None = None) -> Verdict:
        known = shortcut(outcome)
        if known is not None:
            return known
        shown = json.dumps(outcome.output, ensure_ascii=False, default=str)
        if len(shown) > _PREVIEW:
            shown = shown[:_PREVIEW] + f" ... ({len(shown) - _PREVIEW} more characters)"
        user = (f"Task: {step.task}\nSuccess criterion: {step.success_criterion}\n"
                f"Expected findings: {', '.join(step.expected_findings) or '(none)'}\n"
                f"Facts already known (do not repeat): {', '.join(sorted(known_facts or {})) or '(none)'}\n"
                f"The step's result: {shown}")
        msgs = [Message("system", _SYSTEM), Message("user", user)]
        try:
            reply = await collect(self.provider, msgs, model=self.model, temperature=0, max_tokens=self.max_tokens)
        except ProviderError as exc:
            raise EvaluatorError(f"the evaluator's request failed: {exc}") from exc
        return parse_verdict(reply)
