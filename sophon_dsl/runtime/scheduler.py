"""The scheduler: eager data-flow dispatch on asyncio.

Each call starts the moment its inputs are settled (not in Kahn waves).  The
loop keeps, per call, the number of its dependencies that have not ended; a
call is examined when that count reaches zero, and earlier only when a
dependency ends *unsuccessfully* (failed, skipped, cancelled, or took another
branch: a read may now be broken) or when it reads a ``||`` fallback (decided
as soon as the alternatives to its left are settled).  So a call that reads N
results is examined once, not N times.  Input decisions live in
:mod:`.inputs`, one call's attempts in :mod:`.runner`.

The scheduler works through three seams (``docs/design.md``): a
:class:`~.feed.PlanFeed` (the calls: fixed or streamed), a
:class:`~.store.StateStore` (the log and records) and an
:class:`~.invoker.Invoker` (how a call's function runs).
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections import deque
from functools import partial
from typing import Any, Callable, Iterable, Sequence

from ..dataflow import DataFlow
from ..jmes_limits import QueryLimits
from ..model import Call, Plan, RetryPolicy
from ..tools import ToolRegistry, ToolSpec
from .contracts import final_output
from .errors import PLAN_CANCELLED, PLAN_MEMORY_EXCEEDED, PLAN_TIMEOUT, ErrorInfo
from .events import EventBus, preview
from .feed import FixedPlan, PlanFeed
from .gate import CallGate
from .inputs import InputResolver, Verdict, evaluate_loose, render_text_value
from .invoker import Invoker, LocalInvoker, RunInfo
from .maps import MapDriver, MapHost
from .result import RunResult, new_record
from .options import RunOptions
from .retry import policy_for, retry_delay
from .runner import CallRunner, stop_cause
from .runstate import DurableHost, RunState
from .state import to_json_value
from .store import CommitBarrier, CommitListener, MemoryStore, StateStore
from .validation import schema_validator
from .watchdog import Watchdog

__all__ = ["RunOptions", "Scheduler", "render_text_value", "retry_delay", "schema_validator"]

TERMINAL = frozenset({"succeeded", "failed", "skipped", "cancelled"})

_now = time.time
_perf = time.perf_counter
_READY, _WAIT, _SKIP = Verdict.READY, Verdict.WAIT, Verdict.SKIP

# At most this many tasks are created in one burst (one pass of the event loop); further
# ready calls wait in a FIFO queue that the loop drains at once, burst by burst. Calls start
# in exactly the same order as when every task is created at once, but a 10,000-call wide
# plan no longer holds 10,000 unstarted tasks (and their coroutines, contexts, handles and
# arguments) alive at the same time, which the cyclic GC would promote and rescan.
_BURST = 256
_LATER = object()  # queued arguments not built yet (calls that read nothing)
# At most this many calls wait for their intents to be committed (durable runs, calls that
# are not idempotent; see start_task) before the queue above stops draining: the store
# commits one burst while the next is gathered, and a wide plan's other calls wait as queue
# entries instead of arguments and rows alive by the thousand (on 10,000 calls the cyclic
# GC's extra full collection cost ~4 us per call).
_INTENT_WINDOW = 2 * _BURST


# How long a stopping run waits for its cancelled calls to end: a task that swallows its
# cancellation (an async tool catching CancelledError) is abandoned after this, so the run
# still ends within max_time plus one second (its record says it was cancelled).
_SHUTDOWN_GRACE = 0.5
_FOREVER = float("inf")
_NO_SIZE_BOUND = 1 << 62  # max_result_bytes=None: a reference's JMESPath has no size bound either


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode  # (as preview's)
_LONG = 64  # a list longer than this is previewed from its first items


def _preview(value: Any, limit: int) -> str | None:
    """``preview(value, limit)`` without encoding the whole of a long list (a map's result
    of thousands of items, for 200 characters): the text of its first items, once it runs
    past the limit, begins as the whole list's does, and the preview is that beginning."""
    tv = type(value)
    if tv is int:  # (preview's first case, without its call: most results are small)
        text = int.__repr__(value)
        return text if len(text) <= limit else text[:max(limit - 1, 0)] + "…"
    if tv is list and len(value) > _LONG:
        m = 16
        while m < len(value):
            try:
                text = _encode(value[:m])
            except (TypeError, ValueError, RecursionError):
                break
            if len(text) - 1 > limit:  # the whole text starts with text[:-1] (then "," or "]")
                return text[:max(limit - 1, 0)] + "…"
            m *= 4
    return preview(value, limit)


class Scheduler:
    """Runs one plan once. Use :func:`sophon_dsl.runtime.arun` rather than this class directly.

    ``plan`` is a :class:`~sophon_dsl.model.Plan` (with its ``flow`` when a compiled one is
    at hand) or any :class:`~.feed.PlanFeed`.
    """

    def __init__(self, plan: Plan | PlanFeed, registry: ToolRegistry, *, ids: Sequence[str] | None = None,
                 input: Any = None, state: Any = None, context: dict | None = None,
                 options: RunOptions | None = None, bus: EventBus | None = None,
                 plan_id: str | None = None, flow: DataFlow | None = None,
                 store: StateStore | None = None, invoker: Invoker | None = None,
                 track_waits: bool = True) -> None:
        if flow is not None and flow.has_maps:
            flow = None  # a map adds its items' calls to the flow: this run gets its own
        self.feed: PlanFeed = FixedPlan(plan, flow, ids) if isinstance(plan, Plan) else plan
        self.flow = self.feed.flow
        self.calls = self.flow.calls
        self.registry = registry
        self.opts = opts = options or RunOptions()
        self.bus = bus or EventBus()
        # whether the store is told when a record starts and ends: a store the caller gives
        # is; the default in-memory one has nothing to do then (two calls per call skipped)
        self.store_hooks = store is not None
        self.store: StateStore = store if store is not None else MemoryStore()
        # a durable store (sophon_dsl.durable) commits each call: intents and the barrier
        self.barrier: CommitBarrier | None = store if isinstance(store, CommitBarrier) else None
        run_id = self.barrier.run_id if self.barrier is not None else None
        if self.barrier is not None:
            self.barrier.connect(CommitListener(self.settled, self.start_committed, self.cancel, self.calls,
                                                self.settled_held))
        self.invoker: Invoker = (invoker if invoker is not None
                                 else LocalInvoker(opts.executor, opts.max_threads or opts.max_workers))
        header = self.feed.plan
        self.plan_id = plan_id or header.id or "plan"
        self.goal = header.goal
        for kind, data in (("input", input), ("state", state), *(context or {}).items()):
            if data is not None:
                self.store.write(kind, (), to_json_value(data))
        self.records = self.store.records
        self.track_waits = track_waits
        self._spec_of: dict[str, ToolSpec | None] = {}
        # Per call (lists shared with the input resolver and grown in place by arrivals):
        calls, flow = self.calls, self.flow
        n = len(calls)
        add_record, ids = self.store.add_record, flow.ids
        for i, call in enumerate(calls):
            add_record(new_record(ids[i], call.tool, i))
        # (each tool looked up once: the registry by _spec, then this dict per call)
        spec_of = {t: self._spec(t) for t in {c.tool for c in calls}}
        self.specs: list[ToolSpec | None] = [spec_of[c.tool] for c in calls]
        # the output paths (References) each call wrote: () until it writes (usually its own
        # ``output.paths`` tuple afterwards, so a write allocates nothing that outlives it)
        self.wrote: list[tuple] = [()] * n
        self._decided: list[bool] = [False] * n   # dispatched or terminal
        self._ended: list[bool] = [False] * n     # terminal status
        # dependencies not ended yet (nothing has ended before the run)
        self._waiting: list[int] = ([len(d) for d in flow.deps] if not flow.inline_reads
                                    else [len(flow.run_deps(i)) for i in range(n)])
        # reads a `||` fallback: examined at every end of a dependency
        fallbacks = flow.fallbacks
        self._eager: list[bool] = [i in fallbacks for i in range(n)] if fallbacks else [False] * n
        # which ended calls each call waited for (dry-run's predictions)
        self.waited_on: list[set[int]] = [set() for _ in range(n)] if track_waits else []
        self.inputs = InputResolver(self.flow, self._ended, self.wrote, self.records, self.store.get)
        self.inputs.partial = opts.cascade == "partial"
        self.n = n
        self._remaining = n
        # fire-and-forget calls (no output path) not ended yet: when only they remain, every
        # output is final and the run says so (event "outputs_ready"), then waits for them
        self._quiet: set[int] = {i for i, c in enumerate(calls) if c.output is None}
        self._outputs_told = len(self._quiet) == n  # (a plan of only such calls has no outputs to tell of)
        self._tasks: dict[int, asyncio.Task] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._create_task: Callable[[Any], asyncio.Task] | None = None  # set by run()
        self._done = asyncio.Event()
        # None | "cancelled" | "timeout" | "waiting" | "memory" | "limit"; the watchdog (runtime/watchdog.py)
        # sets it from its own thread, so every loop that looks at it stops a busy run
        self._stopping: str | None = None
        self._stop_error: ErrorInfo | None = None  # why a "limit" stop failed the run (CallGate.expand)
        self._running = False
        self._watchdog: Watchdog | None = None
        self._abandoned = False  # a call's task outlived the shutdown (see _result)
        self._ready: deque = deque()
        self._burst = 0
        self._held = 0  # calls whose tasks wait for their intents to be committed (durable runs)
        self._parked = False  # the queue stopped draining until intents land (_INTENT_WINDOW)
        # examining the dependents of a completion not committed yet (settled_held): the
        # calls it makes ready are held by the barrier, not started
        self._holding = False
        self.plan_error: ErrorInfo | None = None
        self.on_dispatch: Callable[[int], Any] | None = None  # told when a call's task is created
        # every call passes the gate before it starts (approval, taint, budget: runtime/gate.py)
        self.gate = CallGate(opts, lambda i: self.specs[i], lambda i: self.flow.ids[i])
        self.gate.count_written(n)
        # what the call runner gets of the run (not the scheduler): runtime/runstate.py
        self.state = RunState(opts, self.records, self.calls, self.specs, self.wrote, self.store, self.store_hooks,
                              self.barrier, self.bus, self.gate, self.inputs, self.invoker, self.feed, self.plan_id,
                              self.goal, registry, run_id, n, self.finish, self.settled, self.emit, self.task_done,
                              self.new_pass, self.stop_error, self.policy)
        if opts.tool_executor is not None:  # routed calls go to a cluster, the rest through the invoker above
            run = RunInfo(lambda: self.state.run_id, lambda: self.registry, self.calls)
            self.invoker = self.state.invoker = opts.tool_executor.invoker_for(run, self.invoker)
        self.runner = CallRunner(self.state)
        if self.feed.is_open:
            self.inputs.stream_open = True
            self.inputs.written_order = self.feed.written_order
            self.inputs.anchored_reads = self.feed.anchored_reads
            self._remaining += 1  # the open feed counts as one unfinished piece of work
        self.feed.attach(self)
        # map calls expand their items into this loop (runtime/maps.py)
        self.maps: MapDriver | None = None
        if self.flow.has_maps:
            self._use_maps()

    def _use_maps(self) -> None:
        """Map calls start (and item calls end) through a map driver (the plan has a map, or
        one just arrived in a streamed reply)."""
        host = MapHost(self.start_task, self.start_ready, self.add_calls, self.item_joiner, self.finish_call,
                       self.call_soon, self.call_later, self.cancel_call, self.stop, lambda: self._stopping,
                       lambda: self.on_dispatch is not None)
        self.maps = MapDriver(self.state, self.runner, host)
        self.inputs.use_maps(self.maps.hidden)
        self.inputs.items = self.maps.owner  # item calls keep the default cascade
        self._start = self.maps.start
        self.finish = self.state.finish = self.maps.finish

    # ------------------------------------------------------------------ per-call bookkeeping

    def _spec(self, tool: str) -> ToolSpec | None:
        spec = self._spec_of.get(tool, self._spec_of)
        if spec is self._spec_of:
            spec = self._spec_of[tool] = self.registry.get(tool)
        return spec

    def _grow(self) -> int:
        """Add the bookkeeping of the feed's next call (a streamed arrival); its index."""
        i = self.n
        call = self.calls[i]
        self.store.add_record(new_record(self.flow.ids[i], call.tool, i))
        self.specs.append(self._spec(call.tool))
        self.wrote.append(())
        self._decided.append(False)
        self._ended.append(False)
        ended = self._ended
        # (a call of a group, a map item's, may read a later one of it: not grown yet, not ended)
        self._waiting.append(sum(1 for d in self.flow.run_deps(i) if d >= i or not ended[d]))
        self._eager.append(i in self.flow.fallbacks)
        if self.track_waits:
            self.waited_on.append(set())
        self.n = self.state.n = i + 1
        self._remaining += 1
        if call.output is None:
            self._quiet.add(i)
        else:
            self._outputs_told = False
        return i

    @property
    def plan(self) -> Plan:
        return self.feed.plan

    @property
    def run_id(self) -> str | None:
        """The run's id when it has one (a durable run's); None otherwise."""
        return self.state.run_id

    @run_id.setter
    def run_id(self, value: str | None) -> None:
        self.state.run_id = value

    @property
    def ids(self) -> list[str]:
        return self.flow.ids

    def is_decided(self, i: int) -> bool:
        """Call ``i`` was dispatched or has ended."""
        return self._decided[i]

    def restore(self, i: int, wrote: tuple) -> None:
        """Call ``i`` ended in an earlier process (a resumed durable run): its record is filled
        in and its writes are in the store; before ``run()`` it counts as ended, unrun."""
        self.wrote[i] = wrote
        self._decided[i] = self._ended[i] = True
        self._remaining -= 1
        self._quiet.discard(i)
        rec = self.records[i]
        if rec.status == "succeeded":  # local data read before the crash is still local data
            self.gate.observe(rec.tool, self.specs[i], rec.output)
        for j in self.flow.dependents()[i]:
            self._waiting[j] -= 1

    def durable_host(self) -> DurableHost:
        """What a durable run gets of this run (``DurableRun.attach``): its records and calls,
        lookups and the few actions a resume and an in-doubt decision take; not the scheduler."""
        return DurableHost(self.records, self.calls, self.plan_id, lambda: self.feed.plan,
                           lambda cid: self.flow.index.get(cid), lambda i: self.specs[i],
                           lambda name: self.registry.get(name), self._set_run_id, self.restore, self.emit,
                           self.cancel, self._hide_restored)

    def _set_run_id(self, run_id: str) -> None:
        self.state.run_id = run_id

    def _hide_restored(self, kinds: Iterable[str]) -> None:
        if self.maps is not None:  # the replayed items' kinds stay out of the run's state
            self.maps.hide_restored(kinds)

    def set_registry(self, registry: ToolRegistry) -> None:
        """Tool declarations that arrived later in a streamed reply."""
        self.registry = self.state.registry = registry
        self._spec_of.clear()

    # ------------------------------------------------------------------ feed events

    def call_arrived(self, i: int, new_edges: Sequence[tuple[int, int]], refused: ErrorInfo | None = None) -> None:
        """A streamed call arrived (:class:`~.feed.FeedListener`)."""
        self._grow()
        self.gate.count_written(1)
        if self.maps is None and self.calls[i].map is not None:
            self._use_maps()
        for reader, writer in new_edges:  # an earlier reader gained a writer
            if not self._ended[writer]:
                self._waiting[reader] += 1
        if refused is not None:
            self.call_refused(i, refused)
            return
        # a resumed durable run: a call an earlier process committed is restored, not run
        # again (a reply's last line, without its newline, arrives only when the stream ends:
        # after the calls that joined before the run started were restored)
        barrier = self.barrier
        if barrier is not None and barrier.restore_joined(range(i, i + 1)):
            if self._running and not self._stopping:
                self.start_ready(self.flow.dependents()[i])  # (restore counted it off its readers)
        elif self._running and not self._stopping:
            if barrier is not None and barrier.uncommitted(self.flow.run_deps(i)):
                # it reads a call that ended but whose completion is not committed yet: it
                # starts once that is, as a dependent examined in settled_held does
                self._holding = True
                try:
                    if self._consider(i):
                        self.settled(i)
                finally:
                    self._holding = False
            elif self._consider(i):
                self.settled(i)

    def call_refused(self, i: int, error: ErrorInfo) -> None:
        """Record call ``i`` as failed without running it (it failed a check)."""
        if self._decided[i]:
            return
        rec = self.records[i]
        rec.error = error
        rec.reason = "not dispatched: " + error.cause
        self.finish(i, "failed")
        if self._running:
            self.settled(i)

    def feed_closed(self) -> None:
        """The streamed plan is complete: every waiting read settles as in a fixed plan."""
        self.inputs.stream_open = False
        if not self._stopping and self._running:  # (not running yet: run() looks at every call)
            for i in range(self.n):
                if not self._decided[i] and self._consider(i):
                    self.settled(i)
        self._remaining -= 1
        if self._remaining == 0:
            self._done.set()
        elif self._remaining == len(self._quiet) and not self._outputs_told:
            self._tell_outputs_ready()

    # ------------------------------------------------------------------ events

    def emit(self, type_: str, status: str, i: int | None = None, attempt: int | None = None,
             preview: str | None = None, error: dict | None = None, reason: str | None = None,
             data: Any = None) -> None:
        if i is None:
            self.bus.emit_raw((type_, self.plan_id, self.goal, None, self.n, status, None, None, attempt,
                               preview, error, reason, _now(), data))
        else:
            rec = self.records[i]
            self.bus.emit_raw((type_, self.plan_id, self.goal, i, self.n, status, rec.id, rec.tool,
                               attempt, preview, error, reason, _now(), data))

    # ------------------------------------------------------------------ lifecycle

    def finish_call(self, i: int, status: str) -> None:
        """Record call ``i``'s final status (and tell the store and the subscribers)."""
        rec = self.records[i]
        rec.status = status
        rec.ended_at = now = _now()  # a timestamp, formatted when read
        rec.ended = _perf()
        if rec.attempt_log is not None and rec.attempt_log[-1].ended is None:
            # a call attempted more than once: its last attempt ends with it (not when it was
            # stopped during a backoff: then its last attempt had ended, failed)
            rec.attempt_log[-1].close(now, status, None if status == "succeeded" else rec.error)
        self._decided[i] = True
        self._ended[i] = True
        self._remaining -= 1
        quiet = self._quiet
        if quiet:
            quiet.discard(i)
            if self._remaining == len(quiet) and not self._outputs_told and self._remaining:
                self._tell_outputs_ready()
        if self.store_hooks:
            self.store.record_ended(rec)
        if status == "succeeded":  # (the common case: emit's tuple, built inline)
            self.bus.emit_raw(("plan_step_complete", self.plan_id, self.goal, i, self.n, status, rec.id,
                               rec.tool, rec.attempts, _preview(rec.output, self.opts.preview_chars), None,
                               None, now, None))
        elif status == "failed":
            self.emit("plan_step_failed", status, i, attempt=rec.attempts,
                      error=rec.error.to_json() if rec.error else None, reason=rec.reason)
        elif status == "skipped":
            self.emit("plan_step_skipped", status, i, reason=rec.reason)
        else:
            self.emit("plan_step_cancelled", status, i, reason=rec.reason,
                      error=rec.error.to_json() if rec.error else None)
        if self._remaining == 0:
            self._done.set()

    finish = finish_call  # what the run calls; a map driver puts its own in front (see __init__)

    def _tell_outputs_ready(self) -> None:
        """Every call with an output path has ended; only fire-and-forget calls remain.  The
        run still waits for them (their failure fails it: spec "Plan status"), but what it
        returns is known now: subscribers hear ``outputs_ready`` with the calls it waits for."""
        self._outputs_told = True
        if self._running and not self._stopping:
            waiting = [self.flow.ids[i] for i in sorted(self._quiet)]
            self.emit("outputs_ready", "running", data={"waiting_for": waiting})

    def add_calls(self, calls: Sequence[Call], ids: Sequence[str], known: Any = None) -> range:
        """Calls that join the run while it runs (a map's items): wired into the data flow
        and given their bookkeeping; :meth:`start_ready` then starts those that can go.
        ``known``: their wiring among themselves, worked out once (``DataFlow.add_group``)."""
        flow = self.flow
        first = len(flow.calls)
        if known is not None:
            flow.add_group(calls, ids, known)
        else:
            for call, cid in zip(calls, ids):
                flow.add_call(call, cid)
        for _ in calls:
            self._grow()
        return range(first, first + len(calls))

    def item_joiner(self, known: Any) -> Callable[[Sequence[Call], Sequence[str]], range]:
        """``join(calls, ids) -> their indexes``: :meth:`add_calls` for many groups of one
        wiring (a map's items: ``known`` is its :class:`~sophon_dsl.dataflow.GroupWiring`),
        with what :meth:`_grow` looks up per call looked up once (the per-call lists grow in
        place, never replaced); :meth:`start_ready` then starts those that can go.
        ``join(calls, ids, groups)`` adds several groups at once when their wiring is plain
        (``DataFlow.group_joiner``)."""
        flow = self.flow
        flow_join = flow.group_joiner(known)
        add_record, specs_add, spec_of = self.store.add_record, self.specs.append, self._spec_of
        wrote_add, decided_ext, ended_ext = self.wrote.append, self._decided.extend, self._ended.extend
        waiting_add, eager_add = self._waiting.append, self._eager.append
        waited_add = self.waited_on.append if self.track_waits else None
        ended, deps, inline, fallbacks = self._ended, flow.deps, flow.inline_reads, flow.fallbacks

        def join(calls: Sequence[Call], ids: Sequence[str], groups: int = 1) -> range:
            first = flow_join(calls, ids, groups)
            if first != self.n:  # (not every call of the flow has its bookkeeping: one by one)
                for _ in calls:
                    self._grow()
                return range(first, first + len(calls))
            fresh = [False] * len(calls)
            decided_ext(fresh)
            ended_ext(fresh)  # first: a call may read a later one of its group
            i = first
            for call, cid in zip(calls, ids):
                tool = call.tool
                add_record(new_record(cid, tool, i))
                spec = spec_of.get(tool, spec_of)
                specs_add(self._spec(tool) if spec is spec_of else spec)
                wrote_add(())
                waiting = 0
                for d in (deps[i] if not inline or i not in inline else flow.run_deps(i)):
                    if not ended[d]:
                        waiting += 1
                waiting_add(waiting)
                eager_add(i in fallbacks)
                if waited_add is not None:
                    waited_add(set())
                i += 1
            self._remaining += i - first
            self.n = self.state.n = i
            return range(first, i)
        return join

    def start_ready(self, indices: Iterable[int]) -> None:
        """Start (or decide) each of ``indices`` whose inputs are settled."""
        decided, waiting, eager = self._decided, self._waiting, self._eager
        for i in indices:
            if self._stopping:
                return
            if not decided[i] and (waiting[i] <= 0 or eager[i]) and self._consider(i):
                self.settled(i)

    def call_soon(self, callback: Any, *args: Any) -> None:
        """Run ``callback(*args)`` on the run's event loop, after what runs now."""
        self._loop.call_soon(callback, *args)

    def call_later(self, delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        """Run ``callback(*args)`` on the run's event loop in ``delay`` seconds (cancel the handle to drop it)."""
        return self._loop.call_later(delay, callback, *args)

    def cancel_call(self, i: int) -> bool:
        """Cancel call ``i``'s task if it is running (it ends ``cancelled``); False when it has none."""
        task = self._tasks.get(i)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def settled(self, i: int) -> None:
        """Call ``i`` ended: count it off its dependents and examine those it may decide
        (and, breadth first, the dependents of anything that ends there too)."""
        if self._stopping:
            return
        decided, waiting, eager, consider = self._decided, self._waiting, self._eager, self._consider
        calls, records = self.calls, self.records
        deps = self.flow.dependents()
        work = None  # calls that ended here (skipped or failed): their dependents next
        while True:
            ds = deps[i]
            if ds:
                # a clean end (succeeded, wrote every output path) can only bring a reader
                # closer to ready; anything else may break a read at once
                out = calls[i].output
                clean = records[i].status == "succeeded" and (out is None or not out.is_branching)
            for j in ds:
                if decided[j]:
                    continue
                left = waiting[j] = waiting[j] - 1
                if (left <= 0 or not clean or eager[j]) and consider(j):
                    if work is None:
                        work = deque()
                    work.append(j)
            if not work or self._stopping:
                return
            i = work.popleft()

    def settled_held(self, i: int) -> None:
        """:meth:`settled` for a durable run's call whose completion is not committed yet
        (``CommitListener.on_ended``): what its end makes ready is held by the barrier until
        that completion is committed, with the intents it needs in the same transaction."""
        if not self.flow.dependents()[i]:  # (a call nobody reads: nothing to examine or hold)
            return
        self._holding = True
        try:
            self.settled(i)
        finally:
            self._holding = False

    def _hold(self, j: int, args: Any, inline: Any) -> None:
        """Call ``j`` is ready in :meth:`settled_held`: the barrier starts it (start_committed)
        once the completion it read is committed.  Its intent goes in the same transaction
        unless it commits its own later (start_task: an approval first, or in its slot under
        ``max_concurrency``); a map call commits none (its items do)."""
        self._decided[j] = True
        self._held += 1
        call = self.calls[j]
        intent = call.map is None and not self.runner.intent_in_slot and not self.gate.may_ask(j, call)
        self.barrier.hold(j, args, inline, intent=intent)

    def _consider(self, j: int) -> bool:
        """Dispatch, skip or fail ``j`` if its inputs are decided. True if it ended here."""
        inputs = self.inputs
        if self._holding and inputs.reads_nothing(j):  # (its arguments built when it starts)
            if self.track_waits:
                self._record_waits(j)
            self._hold(j, _LATER, None)
            return False
        if (self._ready or self._burst >= _BURST) and inputs.reads_nothing(j):
            # reads nothing: always ready, and queued: its arguments are built when its
            # task is created (see _pump), so do not build them twice
            if self.track_waits:
                self._record_waits(j)
            self._decided[j] = True
            if not self._ready:
                self._loop.call_soon(self._pump)
            self._ready.append((j, _LATER, None))
            return False
        call = self.calls[j]
        verdict, payload = inputs.evaluate(j, call)
        if verdict is _WAIT:
            return False
        rec = self.records[j]
        if self.track_waits:
            self._record_waits(j)
        if verdict is _SKIP:
            rec.reason = payload
            self.finish(j, "skipped")
            return True
        if verdict is not _READY:
            rec.error = payload
            rec.reason = payload.cause
            self.finish(j, "failed")
            return True
        args, inline = payload
        if self._holding:
            self._hold(j, args, inline)
            return False
        self._decided[j] = True
        if self._ready or self._burst >= _BURST:
            if not self._ready:
                self._loop.call_soon(self._pump)
            # (it reads something: the same test at the top queued it already otherwise)
            self._ready.append((j, args, inline))
            return False
        self._burst += 1
        if call.map is None:  # (a map call starts in the map driver: _start)
            self.start_task(j, args, inline)
        else:
            self._start(j, args, inline)
        return False

    def start_task(self, j: int, args: dict, inline: Any) -> None:
        """Start call ``j``'s task with its arguments (``inline``: its inline result)."""
        barrier = self.barrier
        if barrier is not None and not self.runner.intent_in_slot and \
                not self.gate.may_ask(j, self.calls[j]) and barrier.start_after_intent(j, args, inline):
            self._held += 1  # its intent goes to the store first; start_committed makes the task
            return
        self._tasks[j] = self._create_task(self.runner.run_call(j, args, inline))
        if self.on_dispatch is not None:
            self.on_dispatch(j)

    def start_committed(self, starts: Sequence[tuple]) -> None:
        """The durable store committed the intents of these ``(call, args, inline)``: their
        tasks are made in bursts (see _pump), first in the queue, but for calls that ended
        meanwhile (their map timed out, the run is stopping: those never started)."""
        self._held -= len(starts)
        if self._stopping:
            return
        ready, ended = self._ready, self._ended
        was_idle = not ready or self._parked
        # first in the queue: they wait for nothing more (and a parked queue only drains again here)
        ready.extendleft([entry for entry in reversed(starts) if not ended[entry[0]]])
        if was_idle and ready:  # (no pump is scheduled: this is a callback of the loop's own)
            self._parked = False
            self._pump()

    _start = start_task  # the hot path's name; a map driver puts its own in front (see __init__)

    def _pump(self) -> None:
        """Create the next burst of queued tasks (FIFO: same start order as creating them all)."""
        self._burst = 0
        ready = self._ready
        if self._stopping:
            ready.clear()  # never started: _shutdown records them cancelled
            return
        start, calls, ended = self._start, self.calls, self._ended
        for _ in range(min(len(ready), _BURST)):
            if self._held >= _INTENT_WINDOW:  # start_committed drains the queue again
                self._parked = True
                return
            j, args, inline = ready.popleft()
            if args is _LATER:
                args, inline = self.inputs.literal_args(calls[j])
            if calls[j].map is None and not ended[j]:
                # (what a map driver's start does for a call that is not a map: a queued map
                # item's call, the most of these; one that ended while queued goes through it)
                self.start_task(j, args, inline)
            else:
                start(j, args, inline)
        self._burst = _BURST if ready else 0
        if ready:
            self._loop.call_soon(self._pump)

    def new_pass(self) -> None:
        """A task started running: a new pass of the event loop (see _BURST)."""
        self._burst = 0

    def task_done(self, i: int) -> None:
        """Call ``i``'s task is over: only calls still in flight are kept (shutdown cancels
        them, run() waits for them)."""
        self._tasks.pop(i, None)

    def _record_waits(self, j: int) -> None:
        ws = self.waited_on[j]
        ended = self._ended
        ws.update(d for d in self.flow.control[j] if d != j)
        for k in self.flow.read_range(j):
            for w in self.flow.read_writers[k]:
                if ended[w]:
                    ws.add(w)
        for r in self.flow.inline_reads.get(j, ()):
            ws.update(w for w in r.writers if ended[w])

    def policy(self, i: int) -> RetryPolicy | None:
        """The retry policy of call ``i`` (its own ``@retry`` or the run's option)."""
        return policy_for(self.calls[i], self.opts.retry)


    # ------------------------------------------------------------------ run

    def cancel(self, why: str = "cancelled") -> None:
        """Stop the run: running calls are cancelled, pending ones never start.  ``why`` is
        "cancelled", or "waiting" (a durable run left waiting for a person: its calls'
        records say so; the run still ends cancelled here, its store records it waiting)."""
        if self._stopping is None:
            self._stopping = why
            self._done.set()

    def stop(self, error: ErrorInfo) -> None:
        """Stop the run because it reached one of its limits (``Plan.TooManyCalls``): it fails
        with ``error``; running calls are cancelled, pending ones never start."""
        if self._stopping is None:
            self._stop_error = error
            self._stopping = "limit"
            self._done.set()

    @property
    def stopping(self) -> str | None:
        return self._stopping

    def _trip(self, why: str) -> None:
        """The watchdog's verdict (called from its thread): stop the run at the next check
        of the stop flag, and wake the loop for it."""
        if self._stopping is None:
            self._stopping = why
        self._loop.call_soon_threadsafe(self._done.set)

    def _bounds(self) -> float | None:
        """The run's deadline (``time.monotonic()``), the JMESPath bounds of its references,
        and the watchdog when it has a time or memory limit."""
        opts = self.opts
        # (max_time=inf is no limit: no deadline, no watchdog)
        deadline = time.monotonic() + opts.max_time if opts.max_time is not None and opts.max_time < _FOREVER \
            else None
        self.inputs.limits = QueryLimits(
            max_bytes=opts.max_result_bytes if opts.max_result_bytes is not None else _NO_SIZE_BOUND,
            deadline=deadline, stop=lambda: self._stopping)
        if deadline is not None or opts.max_memory is not None:
            self._watchdog = Watchdog(self._trip, deadline=deadline, max_memory=opts.max_memory)
            self._watchdog.start()
        return deadline

    async def run(self) -> RunResult:
        try:
            return await self._run()
        finally:
            if self._watchdog is not None:
                self._watchdog.stop()

    async def _run(self) -> RunResult:
        self._loop = loop = asyncio.get_running_loop()
        if loop.get_task_factory() is None and isinstance(loop, asyncio.BaseEventLoop):
            # what loop.create_task does without a task factory, minus one Python call
            self._create_task = partial(asyncio.Task, loop=loop)
        else:
            self._create_task = loop.create_task
        deadline = self._bounds()
        # (a cluster connects and checks the routed tools on its workers: PlanInvalid before anything runs)
        await self.invoker.open()
        self._running = True
        self.emit("plan_start", "running")
        try:
            decided, waiting, eager = self._decided, self._waiting, self._eager
            for i in range(self.n):
                if decided[i] or self._stopping:
                    continue
                # a call with dependencies is examined when they end (see settled)
                if (waiting[i] <= 0 or eager[i]) and self._consider(i):
                    self.settled(i)
            if self._remaining and not self._stopping:
                if deadline is not None:
                    try:
                        await asyncio.wait_for(self._done.wait(), max(deadline - time.monotonic(), 0.0))
                    except asyncio.TimeoutError:
                        self._stopping = self._stopping or "timeout"
                else:
                    await self._done.wait()
        except asyncio.CancelledError:
            self._stopping = self._stopping or "cancelled"
            await self._shutdown()
            await self.invoker.aclose()
            raise
        if self._stopping:
            await self._shutdown()  # (what is still running after it was abandoned: not waited for)
        else:  # fire-and-forget calls and anything still finishing
            pending = [t for t in self._tasks.values() if not t.done()]
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        self.invoker.close()
        await self.invoker.aclose()
        return self._result()

    def release(self) -> None:
        """The run is over and nothing of it runs any more: drop the scheduler's links to
        the parts that call back into it (run state, runner, input resolver, gate, map
        driver), so that the run's calls, records and data flow are freed as soon as the
        last reference to them goes, not left to the cyclic collector (a 10,000-call run
        left ~9 tracked objects per call for it, each traversed by every later full
        collection of the process).  The result keeps what it holds (records, state,
        events); :meth:`cancel` still answers.  Nothing is dropped while a task abandoned
        at shutdown may still end and call back."""
        if self._running and not self._abandoned and not self.feed.is_open:
            self.inputs.release()
            self.state.finish = self.finish_call  # (not the map driver's: it holds the run state)
            for name in ("state", "runner", "inputs", "gate", "_start", "finish"):
                self.__dict__.pop(name, None)
            self.maps = None
            self._running = False

    def stop_error(self) -> ErrorInfo:
        """Why the run is stopping, as the error its unfinished calls and the run end with."""
        why = self._stopping
        if why == "limit" and self._stop_error is not None:
            return self._stop_error
        if why == "timeout":
            return ErrorInfo(PLAN_TIMEOUT, "the plan hit its time limit")
        if why == "memory":
            return ErrorInfo(PLAN_MEMORY_EXCEEDED, f"the run grew the process by more than "
                                                   f"{self.opts.max_memory:,} bytes (max_memory)")
        return ErrorInfo(PLAN_CANCELLED, stop_cause(why))

    async def _shutdown(self) -> None:
        for t in self._tasks.values():
            if not t.done():
                t.cancel()
        if self._tasks:  # at most _SHUTDOWN_GRACE: a task that ignores its cancellation is left behind
            done, left = await asyncio.wait(list(self._tasks.values()), timeout=_SHUTDOWN_GRACE)
            for t in done:  # (retrieved, as gather did: no "exception was never retrieved" later)
                if not t.cancelled():
                    t.exception()
            self._abandoned = bool(left)
        err = self.stop_error()
        self.plan_error = err
        # finish_call, not finish: a map driver's per-item accounting is moot once the run
        # stops (no item starts, no map ends), and a map that expanded 100,000 items leaves
        # as many records to close here, inside the one second max_time allows
        finish, reason = self.finish_call, "not started: " + err.cause
        for i, rec in enumerate(self.records):
            if rec.status not in TERMINAL:
                rec.error = err
                rec.reason = reason
                finish(i, "cancelled")

    def status(self) -> str:
        if self._stopping in ("cancelled", "waiting"):
            return "cancelled"
        if self._stopping in ("timeout", "memory", "limit"):
            return "failed"
        if any(r.status == "failed" and not r.caught for r in self.records):
            return "failed"
        return "succeeded"

    def _output(self, status: str) -> tuple[Any, ErrorInfo | None]:
        """The plan's output and, for a run that otherwise succeeded, the error that fails
        it (a reference with no value, or a value the output schema rejects).  After a
        failure the output is evaluated loosely (unresolved references are None)."""
        plan = self.feed.plan
        out = plan.output
        if out is None:
            return None, None
        if status != "succeeded":
            return evaluate_loose(out, self.store.get, self.inputs.limits), None
        return final_output(out, self.store.get, plan.output_schema, self.opts.validate_output, self.inputs.limits)

    def state_now(self) -> dict:
        """Every kind's data as the log holds it now (``input`` and a map's own kinds left
        out, as in the run's result): what a run cancelled from outside had reached."""
        hidden = ("input",) if self.maps is None else ("input", *self.maps.hidden)
        return self.store.resolved(exclude=hidden)

    def _result(self) -> RunResult:
        status = self.status()
        output, err = self._output(status)
        if err is not None:
            status, self.plan_error = "failed", err
        if status == "succeeded":
            self.emit("plan_complete", status, preview=preview(output, self.opts.preview_chars))
        else:
            self.emit("plan_failed", status, error=self.plan_error.to_json() if self.plan_error else None)
        # an abandoned task may still end one day and fill in its record: the result keeps
        # the records as they are now
        records = self.records if not self._abandoned else [copy.copy(r) for r in self.records]
        return RunResult(status, self.state_now(), output, records,
                         self.store.snapshot(), self.plan_id, self.feed.plan.goal, self.plan_error,
                         self.bus.snapshot(), run_id=self.run_id)
