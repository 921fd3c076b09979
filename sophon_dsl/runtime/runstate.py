""":class:`RunState`: what one run's call runner (and the retry advisor) share with the
scheduler, instead of the scheduler itself.

The scheduler owns the run and makes one; the runner reads the per-call lists and the seams
from it and reports back through its callables, as LangGraph's ``PregelRunner`` gets
``submit`` and ``put_writes`` rather than its loop.  The lists are the scheduler's own,
grown in place as calls join; the few values that change during a run (``registry`` when a
streamed reply declares tools, ``run_id`` when a durable run is attached, ``n`` as calls
join, ``finish`` when a map driver takes over ends) are kept current by the scheduler.

:class:`DurableHost`: what a durable run (:class:`~sophon_dsl.durable.session.DurableRun`)
gets of the run it makes durable, the same way: lookups and actions, not the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..model import Call, Plan, RetryPolicy
from ..tools import ToolRegistry, ToolSpec
from .errors import ErrorInfo
from .events import EventBus
from .feed import PlanFeed
from .gate import CallGate
from .inputs import InputResolver
from .invoker import Invoker
from .options import RunOptions
from .result import CallRecord
from .store import CommitBarrier, StateStore

__all__ = ["DurableHost", "RunState"]


@dataclass(slots=True, eq=False)
class RunState:
    """One run's shared state and the scheduler's callbacks (see the module docstring)."""

    opts: RunOptions             # the run's options
    records: list[CallRecord]
    calls: list[Call]
    specs: list[ToolSpec | None]
    wrote: list[tuple]           # the output paths each call wrote
    store: StateStore
    store_hooks: bool            # the store is told when a record starts and ends
    barrier: CommitBarrier | None  # a durable store's commit barrier
    bus: EventBus
    gate: CallGate
    inputs: InputResolver
    invoker: Invoker
    feed: PlanFeed
    plan_id: str
    goal: str | None
    registry: ToolRegistry
    run_id: str | None
    n: int                       # calls in the run so far
    finish: Callable[[int, str], None]     # record call i's final status
    settled: Callable[[int], None]         # call i ended: examine its dependents
    emit: Callable[..., None]              # (type, status, i, attempt=, preview=, error=, reason=, data=)
    task_done: Callable[[int], None]       # call i's task is over
    new_pass: Callable[[], None]           # a task started running (a new pass of the loop)
    stop_error: Callable[[], ErrorInfo]    # why the run is stopping
    policy: Callable[[int], RetryPolicy | None]  # call i's retry policy (None: no retries)

    @property
    def plan(self) -> Plan:
        return self.feed.plan


@dataclass(frozen=True, slots=True)
class DurableHost:
    """What a durable run asks of the run it makes durable (the scheduler builds one:
    ``Scheduler.durable_host()``, handed to ``DurableRun.attach``).  Callables, not the
    scheduler, so the durable package sees only these and never imports the scheduler.

    The lists are the scheduler's own, grown in place as calls join (a map's items); the
    lookups read the run's current registry and flow (both may change in a streamed reply)."""

    records: Sequence[CallRecord]          # by call index; a restored call's record is filled in
    calls: Sequence[Call]                  # by call index
    plan_id: str
    plan: Callable[[], Plan]               # the plan as it stands (a streamed one grows)
    index_of: Callable[[str], int | None]  # a call id's index; None: not in the run (yet)
    spec: Callable[[int], ToolSpec | None]   # the spec of the tool call i was planned with
    tool: Callable[[str], ToolSpec | None]   # a tool's spec by name
    set_run_id: Callable[[str], None]      # the run is the durable run of this id
    restore: Callable[[int, tuple], None]  # (i, wrote): call i ended in an earlier process
    emit: Callable[..., None]              # (type, status, i, attempt=, preview=, error=, reason=, data=)
    cancel: Callable[[str], None]          # stop the run (why: "waiting" leaves it waiting)
    hide_restored: Callable[[Iterable[str]], None]  # kinds an earlier process wrote for map items
