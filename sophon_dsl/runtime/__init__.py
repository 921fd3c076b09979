"""The runtime: runs checked plans with maximal parallelism (issue 3). See docs/runtime.md.

Public surface::

    run(plan, tools=..., input=..., state=..., **options) -> RunResult
    await arun(...) -> RunResult
    start(...) -> RunHandle  (.events(), .cancel(), await .result())
    dry_run(plan, tools=..., mocks=..., input=..., state=...) -> DryRunReport
    reference_run(...) -> RunResult   (sequential reference interpreter)
    Branch(target, value)             (an activity picks a branch of `†a || †b`)
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it. Loaded on first access, so importing one small
# module of the package (``sophon_dsl.runtime.errors``, as the standard tools do) does not
# import the scheduler, the checker and everything else.
_WHERE = {
    "Prepared": "api", "RunHandle": "api", "arun": "api", "prepare": "api", "run": "api", "start": "api",
    "ApprovalDecision": "approval", "ApprovalRequest": "approval", "prompt_approver": "approval",
    "ErrorInfo": "errors", "PlanInvalid": "errors", "RunError": "errors",
    "Event": "events", "EventBus": "events",
    "FixedPlan": "feed", "GrowingPlan": "feed", "PlanFeed": "feed",
    "Invocation": "invoker", "Invoker": "invoker", "LocalInvoker": "invoker", "RunInfo": "invoker",
    "ToolExecutor": "invoker", "EXECUTORS": "executors", "executor_from_spec": "executors",
    "Branch": "protocols", "LatentExecutor": "protocols", "LatentRequest": "protocols",
    "CallRecord": "result", "RunResult": "result",
    "RunOptions": "scheduler", "Scheduler": "scheduler",
    "CommitBarrier": "store", "CommitListener": "store", "MemoryStore": "store", "StateStore": "store",
    "RunState": "runstate",
    "DryRunReport": "dryrun", "dry_run": "dryrun", "load_mocks": "dryrun",
    "reference_run": "reference",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'sophon_dsl.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{where}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
