"""The runtime: runs checked plans with maximal parallelism (issue 3). See docs/runtime.md.

Public surface::

    run(plan, tools=..., input=..., state=..., **options) -> RunResult
    await arun(...) -> RunResult
    start(...) -> RunHandle  (.events(), .cancel(), await .result())
    dry_run(plan, tools=..., mocks=..., input=..., state=...) -> DryRunReport
    reference_run(...) -> RunResult   (sequential reference interpreter)
    Branch(target, value)             (an activity picks a branch of `†a || †b`)
"""

from .api import Prepared, RunHandle, arun, prepare, run, start
from .approval import ApprovalDecision, ApprovalRequest, prompt_approver
from .errors import ErrorInfo, PlanInvalid, RunError
from .events import Event, EventBus
from .feed import FixedPlan, GrowingPlan, PlanFeed
from .invoker import Invocation, Invoker, LocalInvoker
from .protocols import Branch, LatentExecutor, LatentRequest
from .result import CallRecord, RunResult
from .scheduler import RunOptions, Scheduler
from .store import MemoryStore, StateStore

__all__ = [
    "ApprovalDecision", "ApprovalRequest", "Branch", "CallRecord", "DryRunReport", "ErrorInfo", "Event",
    "EventBus", "FixedPlan", "GrowingPlan", "Invocation", "Invoker", "LatentExecutor", "LatentRequest",
    "LocalInvoker", "MemoryStore", "PlanFeed", "PlanInvalid", "Prepared", "RunError", "RunHandle",
    "RunOptions", "RunResult", "Scheduler", "StateStore", "arun", "dry_run", "load_mocks", "prepare",
    "prompt_approver", "reference_run", "run", "start",
]


def __getattr__(name):  # lazy: dry-run and the reference interpreter are rarely needed
    if name in ("dry_run", "DryRunReport", "load_mocks"):
        from . import dryrun
        return getattr(dryrun, name)
    if name == "reference_run":
        from .reference import reference_run
        return reference_run
    raise AttributeError(name)
