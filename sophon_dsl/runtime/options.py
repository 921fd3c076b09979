"""`RunOptions`: every knob of a run, in a module of its own so that what reads them (the
scheduler, the :class:`~.runstate.RunState` its runner and map driver share) imports it
without importing the scheduler.  ``scheduler.RunOptions`` is the same class."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from ..model import RetryPolicy, Risk
from .approval import Approver
from .gate import DEFAULT_MAX_EXPANDED_CALLS, ApprovalScope, TaintSet
from .invoker import ToolExecutor
from .protocols import Advisor, LatentExecutor

__all__ = ["RunOptions"]


@dataclass
class RunOptions:
    """Every knob of a run (all optional). See docs/runtime.md."""

    max_concurrency: int | None = None        # concurrent tool invocations; None = unlimited
    max_threads: int | None = None            # thread pool for sync tools; None = invoker.DEFAULT_MAX_THREADS (64)
    max_workers: int | None = None            # older name of max_threads (either may be given)
    timeout: float | None = None              # default per-call timeout (s); call @timeout wins
    max_time: float | None = None             # plan wall-clock limit (s) -> Plan.Timeout
    max_memory: int | None = None             # bytes the run may grow the process by -> Plan.MemoryExceeded
    retry: RetryPolicy | dict[str, RetryPolicy] | None = None  # (all tools) or {tool name: RetryPolicy}
    approver: Approver | None = None          # normalised approver callable or None
    approval_timeout: float | None = 600.0
    approve_calls: bool = False               # per-call gate before each risky ready call
    approval_risk: Risk = Risk.MEDIUM         # threshold for both gates
    approved: ApprovalScope | None = None     # what the plan-level approval covers
    taint: TaintSet | None = None             # shared by a session's runs (None: the run's own)
    max_calls: int | None = None              # calls the run may have, map items included
    max_expanded_calls: int | None = DEFAULT_MAX_EXPANDED_CALLS  # calls maps may create
    executor: LatentExecutor | None = None    # for latent calls without _output
    advisor: Advisor | None = None            # one alternative call after the retry policy
    tool_executor: ToolExecutor | None = None  # where tool calls run: None = here; a DaskExecutor (scaleout)
    validate_output: bool = True
    validate_input: bool = True
    preview_chars: int = 200
    max_result_bytes: int | None = 16 << 20   # one call's result as JSON -> Result.TooLarge
    max_run_result_bytes: int | None = 256 << 20  # every result of the run together -> Result.TooLarge
    cascade: str = "skip"                     # a failed call's dependents: "skip" or "partial" (inputs.CASCADES)
    sleep: Callable[[float], Any] = asyncio.sleep  # for retry delays (tests may replace it)
    rng: random.Random = field(default_factory=random.Random)
