"""Named run-time errors in the style of the AWS States Language.

Every failure the runtime records is an :class:`ErrorInfo` ``{error, cause}``:
``error`` is a stable dotted name, ``cause`` a human-readable explanation.  The
same object is what a branching output path's last alternative (the *catch*)
receives when the activity raised.

A tool may raise :class:`RunError` (or a subclass) to choose the error name
itself, e.g. ``raise RunError("Payment.Declined", "card expired")``; any other
exception becomes ``Tool.Failed``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from ..diagnostics import DiagnosticError
from ..errors import SophonError

__all__ = [
    "APPROVAL_REJECTED",
    "ErrorInfo",
    "LATENT_NO_EXECUTOR",
    "NON_RETRYABLE",
    "OUTPUT_INVALID",
    "PLAN_CANCELLED",
    "PLAN_MEMORY_EXCEEDED",
    "PLAN_TIMEOUT",
    "PlanInvalid",
    "REF_TOO_EXPENSIVE",
    "REF_UNRESOLVED",
    "RunError",
    "STATE_INVALID",
    "TOOL_FAILED",
    "TOOL_INPUT_INVALID",
    "TOOL_OUTPUT_INVALID",
    "TOOL_TIMEOUT",
    "error_from_exception",
    "matches",
]

TOOL_FAILED = "Tool.Failed"
TOOL_TIMEOUT = "Tool.Timeout"
TOOL_OUTPUT_INVALID = "Tool.OutputInvalid"
TOOL_INPUT_INVALID = "Tool.InputInvalid"
REF_UNRESOLVED = "Ref.Unresolved"
# A reference's JMESPath (or a template's text) passed its bounds: steps, size, nesting, or
# the run's deadline while it was evaluated (sophon_dsl.jmes_bounded); the reading call fails.
REF_TOO_EXPENSIVE = "Ref.TooExpensive"
APPROVAL_REJECTED = "Approval.Rejected"
APPROVAL_TIMEOUT = "Approval.Timeout"
PLAN_CANCELLED = "Plan.Cancelled"
PLAN_TIMEOUT = "Plan.Timeout"
# The run grew the process past RunOptions.max_memory (runtime/watchdog.py): it is stopped.
PLAN_MEMORY_EXCEEDED = "Plan.MemoryExceeded"
LATENT_NO_EXECUTOR = "Latent.NoExecutor"
# The plan's final output does not validate against its output schema (the run fails).
OUTPUT_INVALID = "Output.Invalid"
# A result does not validate against the state schema at the path it would be written to
# (the call fails and nothing is written).
STATE_INVALID = "State.Invalid"

# Errors a retry policy never retries (they are not about the tool's attempt).
NON_RETRYABLE = frozenset({REF_UNRESOLVED, REF_TOO_EXPENSIVE, APPROVAL_REJECTED, APPROVAL_TIMEOUT, PLAN_CANCELLED,
                           PLAN_TIMEOUT, PLAN_MEMORY_EXCEEDED, TOOL_INPUT_INVALID, LATENT_NO_EXECUTOR})


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """``{error, cause}``: what failed, by name, and why."""

    error: str
    cause: str = ""

    def to_json(self) -> dict:
        return {"error": self.error, "cause": self.cause}

    def __str__(self) -> str:
        return f"{self.error}: {self.cause}" if self.cause else self.error


class RunError(SophonError):
    """An exception carrying a named error. Tools may raise it to name their failure."""

    def __init__(self, error: str, cause: str = ""):
        super().__init__(f"{error}: {cause}" if cause else error)
        self.error = error
        self.cause = cause

    @property
    def info(self) -> ErrorInfo:
        return ErrorInfo(self.error, self.cause)


def error_from_exception(exc: BaseException) -> ErrorInfo:
    if isinstance(exc, RunError):
        return exc.info
    # A TimeoutError the tool raises (a socket timeout, its own asyncio.wait_for) is its own
    # failure like any other exception: Tool.Timeout is only the runtime's per-call deadline
    # (runtime/runner.py), so its cause never claims a limit the run did not set.
    return ErrorInfo(TOOL_FAILED, f"{type(exc).__name__}: {exc}")


def matches(error: str, patterns) -> bool:
    """Does ``error`` match a retry filter? Empty filter = every retryable error.

    Patterns are exact names or globs (``Tool.*``); ``*`` / ``States.ALL`` match all.
    """
    if not patterns:
        return error not in NON_RETRYABLE
    for pat in patterns:
        if pat in ("*", "States.ALL") and error not in NON_RETRYABLE:
            return True
        if pat == error or fnmatch.fnmatchcase(error, pat):
            return True
    return False


class PlanInvalid(DiagnosticError):
    """Raised before anything runs: the plan has errors, or cannot run as configured
    (e.g. a latent call without ``_output`` and no LLM executor: code E206).

    ``diagnostics`` lists every problem (``sophon_dsl.diagnostics.Diagnostic``).
    """
