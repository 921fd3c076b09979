"""Sophon's planning pipeline on top of the agent loop (issue 15; seeds 000-002).

One module per concern: :mod:`.classifier` (the heuristic complexity score), :mod:`.modes`
(auto / llm / always / never and the depth limit).  The agent (:mod:`sophon_dsl.llm.agent`)
asks :func:`.modes.decide` before its first turn; nothing here imports the agent.
"""

from __future__ import annotations

from .classifier import Classification, classify
from .modes import PlanningDecision, PlanningMode, PlanningPolicy, decide

__all__ = ["Classification", "PlanningDecision", "PlanningMode", "PlanningPolicy", "classify", "decide"]
