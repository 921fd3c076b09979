"""Map calls at run time: items expanded inside the one scheduler (``docs/runtime.md``, "Maps").

When a map call's inputs are decided (its list, and the outer paths its body reads),
the :class:`MapDriver` takes it instead of the invoker: for each item it stores the
item and its index under the item's own kinds (``text@c3[2]``, ``index@c3[2]``),
instantiates the body's
calls with their scoped references rewritten into that kind
(:func:`sophon_dsl.maps.instantiate`), adds them to the run's data flow (as a
streamed plan's arrivals are added) and lets the scheduler dispatch them like any
call.  No child run, no second loop: an item's calls cost what any call costs.

At most ``concurrency`` items are in flight; the next item is expanded when one
ends.  An item *fails* when one of its calls fails uncaught, or its result has no
value; its slot of the result then holds ``{error, cause}``.  Once more items fail
than the map tolerates, the map fails (``Map.Failed``) and no further item starts;
items in flight finish.  When every item has ended, the results, in item order, are
the map call's result, written like any call's (so ``||`` catches a failed map).
"""

from __future__ import annotations

import time
from asyncio import TimerHandle
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..dataflow import DataFlow, GroupWiring
from ..maps import LOCAL, ItemTemplate, body_ids, item_kind, plain_outer_reads, scope_names, tolerance_exceeded
from ..model import Call, MapSpec, OutputMethod, Reference, Value
from .contracts import final_output
from .errors import ErrorInfo
from .inputs import RefState
from .runner import CallRunner
from .runstate import RunState
from .state import MISSING, get_path

__all__ = ["MAP_FAILED", "MAP_NOT_A_LIST", "MAP_TIMEOUT", "MapDriver", "MapHost"]

MAP_FAILED = "Map.Failed"
MAP_NOT_A_LIST = "Map.NotAList"
MAP_TIMEOUT = "Map.Timeout"
_TERMINAL = frozenset({"succeeded", "failed", "skipped", "cancelled"})
_now = time.time
_BATCH = 1024  # items expanded together at most (see _fill)


@dataclass(slots=True, eq=False)
class MapHost:
    """What a :class:`MapDriver` asks of the loop that runs it (the scheduler), beyond the
    run's shared :class:`~.runstate.RunState`: starting, joining and ending calls, and the
    event loop's timers.  Callables, not the scheduler, so the driver sees only these."""

    start_task: Callable[[int, dict, Any], None]          # start call j's task (args, inline result)
    start_ready: Callable[[Iterable[int]], None]           # start (or decide) those whose inputs are settled
    add_calls: Callable[..., range]                        # (calls, ids, known=None) -> their indexes
    item_joiner: Callable[[GroupWiring], Callable[..., range]]  # -> join(calls, ids, groups=1)
    finish_call: Callable[[int, str], None]                # record call i's final status (no map accounting)
    call_soon: Callable[..., None]                         # (callback, *args) on the run's loop
    call_later: Callable[..., TimerHandle]                 # (delay, callback, *args) -> a cancellable handle
    cancel_call: Callable[[int], bool]                     # cancel call i's task; False when it has none
    stop: Callable[[ErrorInfo], None]                      # stop the run: one of its limits was reached
    stopping: Callable[[], str | None]                     # why the run is stopping, if it is
    watched: Callable[[], bool]                            # someone is told of each dispatch (a stream)


class _MapRun:
    """One map call in progress."""

    __slots__ = ("j", "cid", "spec", "items", "template", "known", "n", "limit", "next", "inflight", "done",
                 "failed", "left", "errors", "result_values", "results", "ended", "filling", "first_error",
                 "timer", "stopped", "source", "join", "make", "reads_index", "local_result", "batch", "item_of",
                 "size", "make_items", "item_paths")

    def __init__(self, j: int, cid: str, spec: MapSpec, items: list) -> None:
        self.j = j
        self.cid = cid
        self.spec = spec
        self.items = items
        ids = body_ids(spec)
        self.template = ItemTemplate(spec, ids)
        known = body_wiring(spec, ids)
        self.known = None if known is None else GroupWiring(spec.body, known)
        self.n = n = len(items)
        self.limit = spec.concurrency or n
        self.next = 0          # the next item to expand
        self.inflight = 0
        self.done = 0
        self.failed = 0
        self.left: dict[int, int] = {}            # item -> its calls not ended (bodies of 2+ calls)
        self.errors: dict[int, ErrorInfo] = {}    # item -> its first uncaught failure
        self.result_values: list[Any] = [None] * n  # item -> its result value (rewritten), or its local kind
        self.results: list[Any] = [None] * n
        self.ended = False
        self.filling = False
        self.first_error: tuple[int, ErrorInfo] | None = None
        self.timer: TimerHandle | None = None     # the @timeout's timer handle
        self.stopped: ErrorInfo | None = None     # why its calls in flight were cancelled (@timeout)
        self.source: tuple[str, tuple] | None = None  # where the list is stored (see _item_source)
        # the scheduler's item_joiner for this map's items (else add_calls): (calls, ids[, groups]) -> indexes
        self.join: Callable[..., range] | None = None
        # the template's maker (with or without the item's source): (kind, source) -> calls, ids, result
        self.make: Callable[[str, Any], tuple[list[Call], list[str], Value | None]] | None = None
        self.make_items: Callable[..., tuple[list[Call], list[str]]] | None = None  # many items at once (_expand_batch)
        self.reads_index = self.template.reads_index
        self.local_result = spec.result is None  # an item's result is its local data
        self.batch = False  # items may be expanded several at once (MapDriver._batchable)
        self.item_paths: tuple[tuple, ...] = ()  # the fields of the item the body reads (when batchable)
        self.item_of: dict[int, int] = {}  # its instance calls not ended -> their item
        self.size = len(spec.body)


class MapDriver:
    """Expands the map calls of one scheduler (see the module docstring).  The scheduler
    starts calls through :meth:`start` (a map call starts here, not in the invoker) and ends
    them through :meth:`finish` (an item's calls ending), when its plan has maps."""

    def __init__(self, state: RunState, runner: CallRunner, host: MapHost) -> None:
        self.s = state
        self.runner = runner
        self.host = host
        self._finish_call = host.finish_call  # (the item hot path's two callables, looked up once)
        self._call_soon = host.call_soon
        # instance call not ended -> its map (and its item: the map's item_of), kept apart
        # so that joining an item allocates no tuple that lives as long as its calls
        self.owner: dict[int, _MapRun] = {}
        self.hidden: set[str] = set()                     # item kinds (not in the run's state)
        self.runs: dict[int, _MapRun] = {}                # map call -> its run, while it runs
        self.stopped = False                              # some map was stopped by its @timeout

    # -- the scheduler's hooks -------------------------------------------------------

    def start(self, j: int, args: dict, inline: Any) -> None:
        s = self.s
        call = s.calls[j]
        if self.stopped and s.records[j].status in _TERMINAL:
            return  # queued to start, then cancelled with its map (see _stop)
        if call.map is None:
            self.host.start_task(j, args, inline)
            return
        broken = self._broken(j, call.map)
        if broken is not None:  # an outer read can never be written: as for any call's input
            s.records[j].reason = broken
            self.host.call_soon(self._skip, j)
            return
        self.runner.started(j)
        s.records[j].attempts = 1
        cid = s.records[j].id
        over = args.get("over")
        if type(over) is not list:
            err = ErrorInfo(MAP_NOT_A_LIST, f"map {cid} goes over {_describe(over)}, not a list")
            self.host.call_soon(self._end, j, err, None)
            return
        # the items' calls are charged against the run's budgets before any is created
        err = s.gate.expand(cid, len(over), len(call.map.body))
        if err is not None:  # a budget of the whole run: it stops, whatever would catch the map
            self.host.call_soon(self._end, j, err, None)
            self.host.stop(err)
            return
        run = _MapRun(j, cid, call.map, over)
        run.source = _item_source(call.map.over, s.inputs.stream_open)
        s.emit("map_start", "running", j, data={"items": run.n})
        if run.n == 0:
            run.ended = True
            self.host.call_soon(self._end, j, None, [])
            return
        self.runs[j] = run
        run.batch = self._batchable(run)
        if call.timeout is not None:  # the whole map's time, from now to its last item's end
            run.timer = self.host.call_later(call.timeout, self._time_out, run, call.timeout)
        self._fill(run)

    def finish(self, i: int, status: str) -> None:
        run = self.owner.pop(i, None)
        if run is None:
            self._finish_call(i, status)
            return
        k = run.item_of.pop(i)
        if status == "succeeded":  # (count_off's common case, inline)
            s = self.s
            self._finish_call(i, status)
            if run.size != 1:  # (an item of one call ends with it: no count kept)
                left = run.left[k] = run.left[k] - 1
                if left:
                    return
            if run.errors or run.ended or not run.local_result:
                self._item_done(run, k)
                return
            # _item_done's common case, inline: no item failed, the item's result is its local data
            run.inflight -= 1
            run.done += 1
            values = run.result_values
            value = s.store.get(values[k], ())
            values[k] = None
            run.results[k] = {} if value is MISSING else value
            j = run.j  # (s.emit's tuple, built inline)
            rec = s.records[j]
            s.bus.emit_raw(("map_item_complete", s.plan_id, s.goal, j, s.n, "succeeded", rec.id, rec.tool, None,
                            None, None, None, _now(), {"item": k}))
            if run.done == run.n:
                run.ended = True
                self._call_soon(self._end, j, None, run.results)
            elif not run.filling and run.next < run.n:  # (as _item_done: successors next pass)
                run.filling = True
                self._call_soon(self._refill, run)
            return
        if status == "cancelled" and run.stopped is not None:
            rec = self.s.records[i]  # cancelled by its map's @timeout, not by the run
            rec.error = run.stopped
            rec.reason = "cancelled: " + rec.error.cause
        self._finish_call(i, status)
        self.count_off(i, status, run, k)

    def count_off(self, i: int, status: str, run: _MapRun, k: int) -> None:
        """Call ``i`` of item ``k`` of ``run`` ended with ``status``: here, or in an earlier
        process (a resumed durable run restored it, so it does not run again)."""
        if status == "failed" or status == "cancelled":
            rec = self.s.records[i]
            if not rec.caught:
                if k not in run.errors:
                    run.errors[k] = rec.error or ErrorInfo(MAP_FAILED, rec.reason or status)
                if status == "failed":
                    # the map answers for its items: it fails when they exceed its tolerance
                    rec.caught = True
                    rec.reason = f"item {k} of map {run.cid} failed: " + (rec.reason or rec.error.cause
                                                                          if rec.error else "")
        if run.size != 1:  # (an item of one call ends with it: no count kept)
            left = run.left[k] = run.left[k] - 1
            if left:
                return
        self._item_done(run, k)

    def hide_restored(self, kinds: Iterable[str]) -> None:
        """Kinds an earlier process wrote (a resumed durable run): those of map items are kept
        out of the run's state, as the kinds of the items expanded here are."""
        s = self.s
        maps = tuple(f"{s.records[j].id}[" for j in range(s.n) if s.calls[j].map is not None)
        self.hidden.update(k for k in kinds if k.partition("@")[2].startswith(maps))

    def _broken(self, j: int, spec: MapSpec) -> str | None:
        """Why the map must be skipped: a whole outer read of its body that is broken (its
        writers ended without writing it); reads inside `||` decide per item."""
        ref_state = self.s.inputs.ref_state
        for ref in plain_outer_reads(spec):
            st, why = ref_state(j, ref)
            if st == RefState.BROKEN:
                return why
        return None

    def _skip(self, j: int) -> None:
        s = self.s
        if s.records[j].status in _TERMINAL or self.host.stopping():
            return
        self.finish(j, "skipped")
        s.settled(j)

    # -- items -------------------------------------------------------------------------

    def _fill(self, run: _MapRun) -> None:
        """Expand items while fewer than the limit are in flight (never re-entered: an item
        that ends while another is expanded only counts off, the loop below goes on)."""
        if run.filling:
            return
        run.filling = True
        try:
            stopping = self.host.stopping
            while not run.ended and not stopping() and run.next < run.n and run.inflight < run.limit:
                if run.batch:
                    # (at most _BATCH items at once: the loop's stopping test runs between batches,
                    # so a run's max_time or max_memory stops a map expanding 100,000 items)
                    room = min(run.limit - run.inflight, run.n - run.next, _BATCH)
                    if room > 1 and run.item_paths:
                        room = self._with_fields(run, room)
                    if room > 1:
                        self._expand_batch(run, room)
                        continue
                k = run.next
                run.next += 1
                run.inflight += 1
                self._expand(run, k)
        finally:
            run.filling = False

    def _refill(self, run: _MapRun) -> None:
        run.filling = False
        self._fill(run)

    @staticmethod
    def _with_fields(run: _MapRun, room: int) -> int:
        """How many of the next ``room`` items have every field of the item the body reads
        (``run.item_paths``): those may be expanded together; an item lacking one is
        expanded alone (a call reading it fails at its first examination)."""
        items, paths, k0 = run.items, run.item_paths, run.next
        for m in range(room):
            item = items[k0 + m]
            for path in paths:
                if get_path(item, path) is MISSING:
                    return m
        return room

    def _batchable(self, run: _MapRun) -> bool:
        """Whether ``run``'s items may be expanded several at once (:meth:`_expand_batch`):
        when no call of an item can end at its first examination, so no item ends (and the
        map cannot fail) while the next ones are expanded; then expanding items together or
        one after the other is the same run: the same calls at the same positions, started
        in the same order.  So: a plain body (literals and whole references only) of calls
        that read the whole item (where it is stored), local data another body call writes
        (it waits) or outer paths that have a value now (they were settled before the map
        started, the same for every item); no index stored per item, no durable journal
        (it restores items' calls as they join), no stream open, nobody told of dispatches.
        Calls reading a field of the item (``†item.text``) are batched for the items that
        have every such field (:meth:`_with_fields`, ``run.item_paths``): their reads have
        a value, as reads of the whole item do."""
        s = self.s
        spec = run.spec
        known = run.known
        if (run.source is None or run.reads_index or known is None or known.plain is None
                or not run.template.plain or not spec.body or s.barrier is not None
                or s.inputs.stream_open or self.host.watched()):
            return False
        scope = scope_names(spec)
        ref_state = s.inputs.ref_state
        reads = iter(known.known)
        paths: dict[tuple, None] = {}
        for call in spec.body:
            for p in call.params:
                ref = p.value
                if type(ref) is not Reference:
                    continue
                writers = next(reads)
                if ref.kind not in scope:
                    if ref_state(run.j, ref)[0] is not RefState.HAS:
                        return False
                elif ref.kind == spec.item:
                    if ref.path:  # a field an item may lack: checked per item (_with_fields)
                        paths[ref.path] = None
                elif ref.kind != LOCAL or not writers:  # (local data no body call writes: missing)
                    return False
        run.item_paths = tuple(paths)
        return True

    def _expand_batch(self, run: _MapRun, m: int) -> None:
        """:meth:`_expand` for the next ``m`` items of a batchable map (see :meth:`_batchable`):
        their calls made one item after the other, joined to the run at once, then started
        in order."""
        k0 = run.next
        run.next += m
        run.inflight += m
        src_kind, src_path = run.source  # type: ignore[misc]
        make_items = run.make_items
        if make_items is None:
            make_items = run.make_items = run.template.batch_maker()
        size = run.size
        items = range(k0, k0 + m)
        # item k: its calls, ids, local kind (hidden) and result value, as _expand makes them
        calls, ids = make_items(run.cid, items, src_kind, run.spec.item, src_path, self.hidden.add,
                                run.result_values)
        if size != 1:
            run.left.update(dict.fromkeys(items, size))
        join = run.join
        if join is None:
            join = run.join = self.host.item_joiner(run.known)
        added = join(calls, ids, m)
        self.owner.update(dict.fromkeys(added, run))
        run.item_of.update(zip(added, items if size == 1 else [k for k in items for _ in range(size)]))
        self.host.start_ready(added)

    def _expand(self, run: _MapRun, k: int) -> None:
        s = self.s
        kind = f"{run.cid}[{k}]"  # (item_kind)
        spec = run.spec
        hidden = self.hidden
        local = f"{LOCAL}@{kind}"
        hidden.add(local)
        source = run.source
        if source is None:  # the item stored under its own kind (a copy)
            item = f"{spec.item}@{kind}"
            hidden.add(item)
            s.store.write(item, (), run.items[k], OutputMethod.SET, run.cid)
        else:  # read where it is
            source = (spec.item, source[0], (*source[1], k))
        if run.reads_index:
            index = f"{spec.index}@{kind}"
            hidden.add(index)
            s.store.write(index, (), k, OutputMethod.SET, run.cid)
        make = run.make
        if make is None:
            make = run.make = run.template.maker(source is not None)
        calls, ids, result = make(kind, source)
        # what _result reads: the `return` value, else the item's local data
        run.result_values[k] = local if run.local_result else result
        if not calls:
            self._item_done(run, k)
            return
        if run.size != 1:  # (one call per body call)
            run.left[k] = len(calls)
        # every call first: a body call may read a later one
        join = run.join
        if join is None:
            host = self.host
            join = run.join = host.item_joiner(run.known) if run.known is not None else host.add_calls
        added = join(calls, ids)
        owner, item_of = self.owner, run.item_of
        for i in added:
            owner[i] = run
            item_of[i] = k
        if s.barrier is not None:  # a resumed durable run: what an earlier process committed stays
            for i in s.barrier.restore_joined(added):
                owner.pop(i)
                self.count_off(i, s.records[i].status, run, item_of.pop(i))
        self.host.start_ready(added)

    def _item_done(self, run: _MapRun, k: int) -> None:
        s = self.s
        run.inflight -= 1
        run.done += 1
        if run.ended:
            return  # the map already failed: a late item changes nothing
        err = run.errors.get(k) if run.errors else None
        if err is None:
            values = run.result_values
            value = values[k]
            values[k] = None
            if type(value) is str:  # (_result's common case, inline: the item's local data)
                value = s.store.get(value, ())
                if value is MISSING:
                    value = {}
            else:
                value, err = self._result(run, k, value)
        if err is not None:
            run.results[k] = err.to_json()
            run.failed += 1
            if run.first_error is None or k < run.first_error[0]:
                run.first_error = (k, err)  # the failed item first in item order (not in time)
            s.emit("map_item_failed", "failed", run.j, error=err.to_json(), data={"item": k})
        else:
            run.results[k] = value
            j = run.j  # (s.emit's tuple, built inline)
            rec = s.records[j]
            s.bus.emit_raw(("map_item_complete", s.plan_id, s.goal, j, s.n, "succeeded", rec.id, rec.tool, None,
                            None, None, None, _now(), {"item": k}))
        if run.failed and tolerance_exceeded(run.spec, run.failed, run.n):
            run.ended = True
            first = run.first_error[1]  # type: ignore[index]
            why = (f"{run.failed} of {run.n} items of map {run.cid} failed ({_tolerated(run.spec)}); "
                   f"first: {first.error}: {first.cause}")
            self.host.call_soon(self._end, run.j, ErrorInfo(MAP_FAILED, why), None)
            return
        if run.done == run.n:
            run.ended = True
            self.host.call_soon(self._end, run.j, None, run.results)
            return
        if not run.filling and run.next < run.n:  # the items that end in this pass of the loop
            run.filling = True  # make room together: their successors are expanded in one go, next pass
            self.host.call_soon(self._refill, run)

    def _result(self, run: _MapRun, k: int, value: Any) -> tuple[Any, ErrorInfo | None]:
        """Item ``k``'s result from what its expansion kept (``value``: its `return` value,
        the kind of its local data, or None)."""
        get = self.s.store.get
        # not copied here: the map's result is copied when it is written, and nothing
        # writes an item's data once the item has ended
        if value is None or type(value) is str:  # no `return`: the item's local data (under that kind)
            local = get(value or f"{LOCAL}@{item_kind(run.cid, k)}", ())
            return ({} if local is MISSING else local), None
        # (its references' values are copies; read with the run's bounds and deadline)
        out, err = final_output(value, get, None, False, self.s.inputs.limits)
        if err is not None:  # (its own name kept: Ref.Unresolved, Ref.TooExpensive)
            cause = err.cause.replace("the plan's output", f"the result of item {k} of map {run.cid}")
            return out, ErrorInfo(err.error, cause)
        return out, None

    def _time_out(self, run: _MapRun, seconds: float) -> None:
        """The map's @timeout elapsed: it fails with Map.Timeout, no further item starts and
        the calls of its items in flight are cancelled."""
        if run.ended or self.host.stopping():
            return
        err = ErrorInfo(MAP_TIMEOUT, f"map {run.cid} did not finish within {seconds:g} s "
                                     f"({run.done} of {run.n} items ended)")
        self._stop(run, err)
        self.host.call_soon(self._end, run.j, err, None)

    def _stop(self, run: _MapRun, err: ErrorInfo) -> None:
        """End ``run`` now: no item starts, and its calls in flight are cancelled (a nested
        map's too).  Calls that wait for a cancelled one are then skipped as usual."""
        run.ended = True
        run.stopped = err
        self.stopped = True
        if run.timer is not None:
            run.timer.cancel()
        s = self.s
        records = s.records
        now = []  # ended here: every call of the run not ended, but those a running task ends
        for i, owner in list(self.owner.items()):
            if owner is not run:
                continue
            inner = self.runs.pop(i, None)
            if inner is not None:  # a nested map in flight (no task: it ends here)
                self._stop(inner, err)
            # a running task ends its call itself (the runner's cancellation path); a task
            # cancelled before its first step never runs a line, so its call ends here
            if not self.host.cancel_call(i) or records[i].status not in ("running", "queued"):
                now.append(i)
        for i in now:  # all first: a call waiting for another of them is cancelled, not skipped
            records[i].error = err
            self.finish(i, "cancelled")
        for i in now:
            s.settled(i)

    def _end(self, j: int, err: ErrorInfo | None, results: list | None) -> None:
        """The map call ends: its result written (or its error delivered) as any call's."""
        s = self.s
        run = self.runs.pop(j, None)
        if run is not None and run.timer is not None:
            run.timer.cancel()
        rec = s.records[j]
        if rec.status in _TERMINAL or self.host.stopping():
            return
        if err is None:
            err = self.runner.accept_json(j, s.calls[j], results)
        if err is None:
            self.finish(j, "succeeded")
        else:
            rec.reason = err.cause
            self.runner.fail(j, err)  # (finishes it)
        if s.barrier is None:
            s.settled(j)
        else:  # the barrier, as for a call the runner ends: its readers start once it is committed
            s.barrier.settle_after_commit(j)


def body_wiring(spec: MapSpec, ids: list[str]) -> list[tuple[int, ...] | None] | None:
    """How every item's calls are wired among themselves, worked out once from the body
    (``DataFlow.add_group``): per read of the body's calls, in order, the body calls writing
    it when it reads the item's own data (which only the item's calls write), else None (an
    outer read, wired per item).  None when a body call writes outside the item (a plan that
    did not check): then each item's calls go through the general analysis."""
    scope = scope_names(spec)
    if any(r.kind not in scope for c in spec.body if c.output is not None for r in c.output.paths):
        return None
    body = DataFlow.build(spec.body, ids)
    known: list[tuple[int, ...] | None] = []
    for b in range(len(spec.body)):
        reads = [(body.read_refs[k], body.read_writers[k]) for k in body.read_range(b)]
        reads.extend(body.inline_reads.get(b, ()))
        known.extend(ws if ref.kind in scope else None for ref, ws in reads)
    return known


def _item_source(over: Any, streaming: bool) -> tuple[str, tuple] | None:
    """Where the map's list is stored, when its items can be read there: the list is a
    plain path (not a literal, an expression or a JMESPath result), and every writer of it
    has ended (the map waited for them), so item k's reads of the item go to
    ``<path>[k]`` and the item is not copied into the store.  Not while a streamed reply
    is open: there a read of a path waits for the reply's end, and of an item's own kind
    it does not."""
    if type(over) is Reference and over.query is None and not streaming:
        return over.kind, over.path
    return None


def _describe(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, bool):
        return "a boolean"
    return "a number"


def _tolerated(spec: MapSpec) -> str:
    if spec.tolerate is not None:
        return f"tolerated: {spec.tolerate}"
    if spec.tolerate_percent is not None:
        return f"tolerated: {spec.tolerate_percent:g}%"
    return "none tolerated"
