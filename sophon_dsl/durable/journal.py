"""The :class:`~sophon_dsl.runtime.store.StateStore` of a durable run: the in-memory log
(as :class:`~sophon_dsl.runtime.store.MemoryStore`) plus one store transaction per call
completion, and the barrier the runner waits on.

* ``record_ended`` encodes the log entries written since the previous completion (the
  call's own writes: the runner writes and ends a call without awaiting in between) and the
  call's record, and adds them to the pass's batch: what the run's completions and intents
  of one pass of the event loop gathered, handed to the store at the end of the pass as one
  operation (its rows, and the run's last sequence number, in one transaction).  Batches are
  handed in log order and the writer commits its queue in order, so the committed log is
  always a prefix of the in-memory one.  Cancelled calls are not committed: they run again.
* ``settle_after_commit`` (the barrier): the runner's "this call ended, examine its
  dependents".  The call's completion is still in the pass's batch, so the run's
  ``on_ended`` examines them at once and every call that makes ready is *held*
  (:meth:`Journal.hold`): its intent, if it needs one, joins that same batch, and it starts
  when the batch is committed.  So a dependent never starts before its input is committed,
  a call that is not idempotent never before its intent is, and a chain's edge is one
  transaction: the parent's completion and the child's intent land together (a crash
  before leaves neither, after leaves the child's intent: in doubt on resume, as it would
  be one commit later).  Without ``on_ended`` (or once the batch was handed), the barrier
  waits for the commit and calls ``on_committed`` (the journal implements
  :class:`~sophon_dsl.runtime.store.CommitBarrier` and holds the run's
  :class:`~sophon_dsl.runtime.store.CommitListener`, never the scheduler).
* ``before_start``: a call that is not idempotent commits an intent record before its tool
  starts; on resume it decides what to do with a call found in doubt.
* ``start_after_intent``: the scheduler's way to that intent without a task: the call's
  intent joins the pass's batch and its task is made only once the batch is committed
  (``start_committed``).  A wide plan's calls waiting for the store then hold a tuple each
  instead of a suspended task, coroutine and future (10,000 of those brought on a full
  collection of the cyclic GC, ~40 ms, in every such run).
"""

from __future__ import annotations

import asyncio
import json
import time
from enum import Enum
from functools import partial
from typing import TYPE_CHECKING, Any, Awaitable, Iterable, Protocol

from ..model import Call, OutputMethod
from ..runtime.errors import ErrorInfo
from ..runtime.result import Attempt, CallRecord, raw_times, written_so_far
from ..runtime.state import StateLog
from ..runtime.store import CommitListener, MemoryStore
from .base import SCALARS, dumps, dumps_flat

if TYPE_CHECKING:
    from .base import RunStore

__all__ = ["BeforeStart", "CALL_OUTCOME_UNKNOWN", "Journal", "STORE_FAILED", "entry_json", "record_json", "record_text",
           "restore_record"]

CALL_OUTCOME_UNKNOWN = "Call.OutcomeUnknown"
STORE_FAILED = "Store.CommitFailed"
_METHODS = {m.value: m for m in OutputMethod}


class BeforeStart(Enum):
    """What a ready call of a durable run needs before its tool starts."""

    INTENT = "intent"    # its intent committed: gathered without a task (Journal.start_after_intent)
    NOTHING = "nothing"  # idempotent, or an inline result: no intent
    IN_TASK = "in task"  # decided in its task (before_start): in doubt on resume, an agent turn's reply


def entry_json(entry: tuple) -> list:
    """A log entry as stored: ``[kind, path, value, method, call, date]`` (a list: the
    cheapest JSON to write, once per write of every durable run)."""
    kind, path, value, method, call, date = entry
    return [kind, path, value, method, call, date]


def record_json(rec: CallRecord, written: tuple[int, ...]) -> dict:
    """What a committed call keeps: its record and which of its output paths it wrote
    (times as POSIX timestamps, formatted when read)."""
    times = raw_times(rec)
    data = {"id": rec.id, "index": rec.index, "status": rec.status, "attempts": rec.attempts,
            "error": rec.error.to_json() if rec.error else None, "reason": rec.reason,
            "started": times[0], "ended": times[1], "caught": rec.caught,
            "branch": rec.branch, "written": written,
            "output": rec.output if not written else None}
    if rec.attempt_log is not None:  # (only a call attempted more than once: see CallRecord)
        data["attempt_log"] = [a.stored() for a in rec.attempt_log]
    return data


_encode_str = json.encoder.encode_basestring  # (the C function dumps' encoder uses, ensure_ascii=False)
_float_text = float.__repr__  # what JSON writes for a finite float


def record_text(rec: CallRecord, written: tuple[int, ...]) -> str:
    """``dumps(record_json(rec, written))``, the same text, written directly for the common
    record (no error, no attempt log, a scalar output or none): no dict per call, and no
    encoder walking one (this was 10 of the ~50 us a durable run adds to a call)."""
    output = rec.output if not written else None
    if rec.error is not None or rec.attempt_log is not None or type(output) not in SCALARS:
        return dumps(record_json(rec, written))
    reason, branch = rec.reason, rec.branch
    started, ended = raw_times(rec)
    # (the timestamps as kept: floats, but for one read and formatted meanwhile, then text)
    started = _float_text(started) if type(started) is float else dumps_flat(started)
    ended = _float_text(ended) if type(ended) is float else dumps_flat(ended)
    return "".join((
        '{"id":', _encode_str(rec.id), ',"index":', int.__repr__(rec.index),
        ',"status":', _encode_str(rec.status), ',"attempts":', int.__repr__(rec.attempts),
        ',"error":null,"reason":', "null" if reason is None else _encode_str(reason),
        ',"started":', started, ',"ended":', ended,
        ',"caught":', "true" if rec.caught is True else "false" if rec.caught is False else dumps_flat(rec.caught),
        ',"branch":', "null" if branch is None else _encode_str(branch),
        ',"written":[', ",".join(map(int.__repr__, written)), '],"output":',
        "null" if output is None else dumps_flat(output), "}"))


def restore_record(rec: CallRecord, data: dict) -> None:
    rec.status = data["status"]
    rec.attempts = data["attempts"]
    err = data.get("error")
    rec.error = ErrorInfo(err["error"], err.get("cause", "")) if err else None
    rec.reason = data.get("reason")
    rec.started_at = data.get("started")
    rec.ended_at = data.get("ended")
    rec.caught = data.get("caught", False)
    rec.branch = data.get("branch")
    rec.output = data.get("output")
    # (records committed before attempts were logged have no "attempt_log")
    log = data.get("attempt_log")
    if isinstance(log, list):
        rec.attempt_log = [Attempt.from_stored(a) for a in log]


class JournalHooks(Protocol):
    """What a journal asks its durable run (a :class:`~.session.DurableRun`) about calls:
    intents, calls in doubt, calls restored from an earlier process."""

    def need_before_start(self, i: int) -> BeforeStart: ...

    def before_start(self, i: int, call: Call, args: dict, *, intent: bool = True) -> Awaitable[ErrorInfo | None]: ...

    def intent_now(self, i: int, call: Call) -> Awaitable[ErrorInfo | None]: ...

    def restore_items(self, indices: range) -> list[int]: ...


class Journal(MemoryStore):
    """One durable run's state store (see the module docstring): the in-memory log and
    records of :class:`MemoryStore`, and each completion committed to ``backend``; a
    :class:`~sophon_dsl.runtime.store.CommitBarrier`."""

    def __init__(self, backend: RunStore, run_id: str) -> None:
        super().__init__(StateLog())
        self.backend = backend
        self.run_id = run_id
        self.listener: CommitListener | None = None  # the run's callbacks (connect)
        self.failure: BaseException | None = None
        self.committing: list = []   # outcomes of the batches handed to the store, not known to be committed
        self._in_flight: list[_Batch] = []  # batches handed to the store whose landing was not seen yet
        self._sent = 0               # log entries encoded (in a batch) so far
        self._batch: _Batch | None = None  # this pass's completions and intents, not handed yet
        # call index -> the batch its completion is in (True once its runner waits for the commit)
        self._waiting: dict[int, Any] = {}
        self.cleared: set[int] = set()       # calls that need nothing more before their tool starts
        self._loop: asyncio.AbstractEventLoop | None = None
        self.hooks: JournalHooks | None = None  # the DurableRun: intents, doubt, approvals

    def connect(self, listener: CommitListener) -> None:
        self.listener = listener

    # -- StateStore (the rest is MemoryStore's) ---------------------------------------

    def record_started(self, rec: CallRecord) -> None:
        """A call starts, or is about to be retried.  Its start needs nothing (its intent, if
        any, is the journal's business); a retry (``attempt_log`` is kept from the first
        retry on) writes the attempts so far, so that the dashboard shows them while the call
        runs.
        Not waited for and not part of the commit order: the call's completion record holds
        the whole log, and is what a resume reads (a lost write only delays the picture)."""
        log = rec.attempt_log
        if log is not None and self.failure is None:
            self.backend.put_attempts(self.run_id, rec.id, [a.stored() for a in log])

    def record_ended(self, rec: CallRecord) -> None:
        if rec.status == "cancelled" or self.failure is not None:
            return  # not committed: it runs again on resume (its entries wait for the next commit)
        # (few objects per call: each one the cyclic collector tracks brings its next pass nearer)
        seq, run_id = self._sent, self.run_id
        listener = self.listener
        out = listener.calls[rec.index].output if listener is not None else None
        written = _written_indexes(out, rec) if out is not None else ()
        batch = self._batch or self._open_batch()
        rows = batch.log
        kept = len(rows)
        try:  # (an entry is a tuple of six: its JSON is entry_json's)
            for e in self.log.entries(seq):
                rows.append((run_id, seq, dumps_flat(e) if type(e[2]) in SCALARS else dumps(e)))
                seq += 1
            record = record_text(rec, written)
        except Exception as exc:  # noqa: BLE001 - a value the store cannot hold: the run stops
            del rows[kept:]
            self.fail(exc)
            return
        self._sent = seq
        batch.calls.append((run_id, rec.id, record))
        batch.ended.append(rec.index)
        self._waiting[rec.index] = batch

    def _open_batch(self) -> "_Batch":
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        batch = self._batch = _Batch()
        self._loop.call_soon(self._hand_off)
        return batch

    def _hand_off(self) -> None:
        """The pass of the loop is over: its batch goes to the store as one operation."""
        batch, self._batch = self._batch, None
        if batch is None:
            return
        if self.failure is not None:
            batch.resolve(self.failure)
            return
        last = (self.run_id, batch.log[-1][1]) if batch.log else ()
        self._in_flight.append(batch)
        landing = self.backend.commit_rows(batch.log, batch.calls, batch.intents, last,
                                           (self._loop, partial(self._landed, batch)))
        self.committing.append(landing)

    def restore_joined(self, indices: range) -> list[int]:
        """Calls that joined the run while it runs (a map's items): the indexes of those an
        earlier process committed, restored instead of run again (a resumed run only)."""
        hooks = self.hooks
        return hooks.restore_items(indices) if hooks is not None else []

    def before_start(self, i: int, call: Call, args: dict, *, intent: bool) -> Awaitable[ErrorInfo | None]:
        """The run's decision about call ``i`` before its tool starts (see
        :meth:`~.session.DurableRun.before_start`); the runner skips it for ``cleared`` calls."""
        assert self.hooks is not None  # (a journal is made by its DurableRun, which sets it)
        return self.hooks.before_start(i, call, args, intent=intent)

    def intent_now(self, i: int, call: Call) -> Awaitable[ErrorInfo | None]:
        assert self.hooks is not None
        return self.hooks.intent_now(i, call)

    # -- the barrier ------------------------------------------------------------------

    def settle_after_commit(self, i: int) -> None:
        """The runner ended call ``i``: its dependents are examined now, held until its
        completion is committed (see the module docstring), or examined once it is."""
        waiting = self._waiting
        batch = waiting.get(i)
        if batch is None:  # nothing to commit (cancelled), or the store failed
            if self.failure is None:
                self.listener.on_committed(i)
            return
        on_ended = self.listener.on_ended
        if batch is self._batch and on_ended is not None:  # (always, from the runner: same pass)
            del waiting[i]
            on_ended(i)
        else:
            waiting[i] = True

    def hold(self, i: int, args: dict, inline: Any, *, intent: bool) -> None:
        """Call ``i`` became ready in ``on_ended``: it starts once this pass's batch (the
        completion it read) is committed, with its intent in that batch if it needs one and
        ``intent``; ``cleared`` then, but those decided in their task (in doubt on resume, or
        ``intent`` False: an approval first, or their intent committed in their slot)."""
        batch = self._batch or self._open_batch()
        batch.starts.append((i, args, inline))  # (one queue: they start in the order they were ready)
        if i in self.cleared:
            return
        hooks = self.hooks
        need = hooks.need_before_start(i) if intent and hooks is not None else BeforeStart.IN_TASK
        if need is BeforeStart.INTENT:
            cid = self.records[i].id
            batch.intents.append((self.run_id, cid, f"{self.run_id}:{cid}", batch.created))
        elif need is BeforeStart.IN_TASK:  # decided in its task: not cleared when the batch lands
            batch.keep.add(i)

    def uncommitted(self, indices: Iterable[int]) -> bool:
        """True if any of ``indices`` ended in a batch not committed yet (being gathered, or
        handed to the store and not landed): a streamed call reading it must be held."""
        batches = self._in_flight if self._batch is None else [self._batch, *self._in_flight]
        if not batches:
            return False
        wanted = set(indices)
        return any(i in wanted for batch in batches for i in batch.ended)

    def _landed(self, batch: "_Batch", landing: Any) -> None:
        self._in_flight.remove(batch)
        exc = landing.exception()
        if exc is not None:
            self.fail(exc)
        batch.resolve(exc)
        if exc is not None:
            return
        if batch.starts:
            keep = batch.keep
            self.cleared.update(i for i, _, _ in batch.starts if i not in keep)
            self.listener.on_intents(batch.starts)
        waiting, settled = self._waiting, self.listener.on_committed
        for i in batch.ended:
            if waiting.pop(i, None) is True and self.failure is None:
                settled(i)

    def fail(self, exc: BaseException) -> None:
        """The store refused a transaction: nothing more is committed and the run stops (what
        was committed is what a resume starts from)."""
        if self.failure is None:
            self.failure = exc
            if self.listener is not None:
                self.listener.on_failed()

    async def flush(self) -> None:
        """Wait until every transaction handed to the store has landed."""
        self._hand_off()  # what this pass gathered (its scheduled hand-off then finds nothing)
        pending, self.committing = self.committing, []
        if pending and not all(p.done() for p in pending):
            try:
                await asyncio.wrap_future(self.backend.barrier())
            except Exception as exc:  # noqa: BLE001
                self.fail(exc)
        for landing in pending:  # (its callback may not have run yet: look at each)
            if landing.exception() is not None:
                self.fail(landing.exception())

    def failure_error(self) -> ErrorInfo | None:
        if self.failure is None:
            return None
        return ErrorInfo(STORE_FAILED, f"the run store stopped committing: {self.failure}")

    # -- intents ----------------------------------------------------------------------

    async def commit_intent(self, call_id: str) -> ErrorInfo | None:
        """Commit call ``call_id``'s intent (in this pass's batch); an error if the store failed."""
        return self.intent_outcome(await self.intent_landing(call_id))

    def intent_landing(self, call_id: str) -> asyncio.Future:
        """Queue call ``call_id``'s intent in this pass's batch: a future of None once it is
        committed, or of the store's error (what :meth:`intent_outcome` takes)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        done = self._loop.create_future()  # one per call: a cancelled waiter cancels only its own
        if self.failure is not None:
            done.set_result(self.failure)
            return done
        batch = self._batch or self._open_batch()
        batch.intents.append((self.run_id, call_id, f"{self.run_id}:{call_id}", batch.created))
        batch.waiters.append(done)
        return done

    def start_after_intent(self, i: int, args: dict, inline: Any) -> bool:
        """Call ``i`` is ready: True if it waits for its intent to be committed first (queued
        in this pass's batch; the scheduler's ``start_committed`` gets ``(i, args, inline)``
        once it is), False if it starts now: a call that needs no intent (idempotent, an
        inline result) or has one committed (both ``cleared``: the runner skips
        ``before_start``), one decided in its task (``BeforeStart.IN_TASK``), or a run
        whose store failed (the runner reports that)."""
        hooks = self.hooks
        if i in self.cleared or self.failure is not None or hooks is None:
            return False
        need = hooks.need_before_start(i)
        if need is not BeforeStart.INTENT:
            if need is BeforeStart.NOTHING:
                self.cleared.add(i)
            return False
        cid = self.records[i].id
        batch = self._batch or self._open_batch()
        batch.intents.append((self.run_id, cid, f"{self.run_id}:{cid}", batch.created))
        batch.starts.append((i, args, inline))
        return True

    def intent_outcome(self, exc: BaseException | None) -> ErrorInfo | None:
        if exc is not None:
            self.fail(exc)
            return self.failure_error()
        return None


class _Batch:
    """A run's completions and intents of one pass of the event loop, encoded: the rows, the
    indexes of the calls that ended, the futures of the calls waiting for their intents (a
    runner past an approval), the calls to start once the batch is committed (their intents
    in it, or their input: :meth:`Journal.hold`) and those of them decided in their task
    (not ``cleared`` then).  Its intents share one creation time, the batch's (one pass of
    the loop): one clock read per batch, and a server store sends it once (postgres)."""

    __slots__ = ("log", "calls", "intents", "ended", "waiters", "starts", "keep", "created")

    def __init__(self) -> None:
        self.created = time.time()
        self.log: list = []
        self.calls: list = []
        self.intents: list = []
        self.ended: list = []
        self.waiters: list = []
        self.starts: list = []
        self.keep: set = set()

    def resolve(self, exc: BaseException | None) -> None:
        for done in self.waiters:
            if not done.done():
                done.set_result(exc)


def _written_indexes(out: Any, rec: CallRecord) -> tuple[int, ...]:
    """Which of the call's output paths it wrote, by position."""
    done = written_so_far(rec)  # the References written, until someone reads ``written`` (texts)
    if not done:
        return ()
    paths = out.paths
    if type(done) is tuple:
        if len(done) == 1:  # (the common case, without a generator)
            # (the reference written is the output's own object: no dataclass comparison)
            return (0,) if paths[0] is done[0] else (paths.index(done[0]),)
        return tuple(paths.index(p) for p in done)
    return tuple(k for k, p in enumerate(paths) if p.text() in done)


def replay(journal: Journal, entries: list[dict]) -> None:
    """Put the committed log back, in order, as the in-memory log's prefix."""
    write = journal.log.write
    for e in entries:
        write(e["kind"], tuple(e["path"]), e["value"], _METHODS[e["method"]], e["call"], e["date"])
    journal._sent = len(entries)
