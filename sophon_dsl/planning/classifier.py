"""The heuristic complexity classifier of seed 000: does a request deserve a plan?

The score adds the seed's four signals, each at most once:

==============  ======  =====================================================
signal          points  fires when the request (case-insensitive, whole words)
==============  ======  =====================================================
``length``      +1      is longer than 100 characters
``conjunction`` +2      holds "and then", "after that", "first" or "then"
``multi_step``  +2      holds "steps", "plan" or "sequence"
``action_verbs``+1      holds two or more distinct verbs of :data:`ACTION_VERBS`
==============  ======  =====================================================

A score of :data:`PLAN_THRESHOLD` (3) or more plans.  Words are matched on word
boundaries, so "strengthen" holds no "then" and "planet" no "plan"; verbs are matched in
their base form only ("searches" is not "search"), as the seed lists them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ACTION_VERBS", "CONJUNCTIONS", "Classification", "MULTI_STEP_WORDS", "PLAN_THRESHOLD",
           "classify"]

PLAN_THRESHOLD = 3
LENGTH_LIMIT = 100
CONJUNCTIONS = ("and then", "after that", "first", "then")
MULTI_STEP_WORDS = ("steps", "plan", "sequence")
# the seed's four ("search, create, send, write, ...") and the further verbs its examples use
ACTION_VERBS = ("search", "create", "send", "write",
                "analyze", "analyse", "build", "calculate", "check", "compare", "delete", "download",
                "draft", "extract", "fetch", "find", "generate", "notify", "research", "review", "save",
                "schedule", "summarize", "summarise", "translate", "update", "upload")

POINTS = {"length": 1, "conjunction": 2, "multi_step": 2, "action_verbs": 1}


# One pass splits the request into words (the same boundaries as the regex \b), then every
# signal is a set lookup: a regex alternation of 30 words tried at every position costs ~10x more.
_WORD = re.compile(r"\w+")
_CONJUNCTION_PAIRS = {tuple(c.split()) for c in CONJUNCTIONS if " " in c}
_CONJUNCTION_WORDS = frozenset(c for c in CONJUNCTIONS if " " not in c)
_PAIR_STARTS = frozenset(a for a, _ in _CONJUNCTION_PAIRS)
_MULTI_STEP = frozenset(MULTI_STEP_WORDS)
_VERBS = frozenset(ACTION_VERBS)


def _conjunction(words: list[str], present: set[str], request: str) -> str | None:
    """The conjunction found, a two-word one first ("and then" rather than its "then")."""
    if present & _PAIR_STARTS:
        for a, b in _CONJUNCTION_PAIRS:
            if a in present and b in present and re.search(rf"\b{a}\s+{b}\b", request, re.IGNORECASE):
                return f"{a} {b}"
    for w in words:
        if w in _CONJUNCTION_WORDS:
            return w
    return None


@dataclass(frozen=True)
class Classification:
    """``signals`` maps each signal that fired to its points; ``evidence`` to the words that
    made it fire (for people; the JSON form leaves it out)."""

    score: int
    signals: dict[str, int]
    plan: bool
    evidence: dict[str, list[str]] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict:
        return {"score": self.score, "signals": dict(self.signals), "plan": self.plan}


def classify(request: str, threshold: int = PLAN_THRESHOLD) -> Classification:
    """Score ``request`` by the seed's table (see the module docstring)."""
    signals: dict[str, int] = {}
    evidence: dict[str, list[str]] = {}
    if len(request) > LENGTH_LIMIT:
        signals["length"] = POINTS["length"]
        evidence["length"] = [f"{len(request)} characters"]
    words = _WORD.findall(request.lower())
    present = set(words)
    conjunction = _conjunction(words, present, request)
    if conjunction is not None:
        signals["conjunction"] = POINTS["conjunction"]
        evidence["conjunction"] = [conjunction]
    steps = present & _MULTI_STEP
    if steps:
        signals["multi_step"] = POINTS["multi_step"]
        evidence["multi_step"] = sorted(steps)
    verbs = present & _VERBS
    if len(verbs) >= 2:
        signals["action_verbs"] = POINTS["action_verbs"]
        evidence["action_verbs"] = sorted(verbs)
    score = sum(signals.values())
    return Classification(score, signals, score >= threshold, evidence)
