"""Goal-oriented runs (seed 003): a planner turns a goal into steps, the steps run as a
plan of our language (each carried out by a sub-agent and judged by a step evaluator),
facts accumulate, and failures are planned around within limits. See docs/goals.md."""

from .evaluator import EvaluatorError, StepEvaluator, StepOutcome, SubAgentStatus, Verdict, VerdictKind
from .plan_builder import STEP_TOOL, steps_to_plan
from .planner import Planner, StepSummary
from .result import GoalResult, GoalStatus, StepRecord, StepStatus
from .runner import EVALUATOR_FAILED, HUMAN_NEEDED, STEP_FAILED, GoalResumeError, GoalRunner
from .steps import HINTS, PlannedStep, PlannerError, normalize_hint, parse_steps

__all__ = ["EVALUATOR_FAILED", "EvaluatorError", "GoalResult", "GoalResumeError", "GoalRunner", "GoalStatus", "HINTS",
           "HUMAN_NEEDED", "PlannedStep", "Planner", "PlannerError", "STEP_FAILED", "STEP_TOOL", "StepEvaluator",
           "StepOutcome", "StepRecord", "StepStatus", "StepSummary", "SubAgentStatus", "Verdict", "VerdictKind",
           "normalize_hint", "parse_steps", "steps_to_plan"]
