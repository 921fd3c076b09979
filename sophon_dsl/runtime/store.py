"""Where a run keeps what it produces: the :class:`StateStore` seam.

A store holds the append-only log of data messages (every write, with its
resolved view per kind) and the call records.  The scheduler talks to it only
through this interface; :class:`MemoryStore` is the default and keeps
everything in the process.  A durable store (SQLite, PostgreSQL) implements the
same methods and persists what it is told: a write as it happens, a record when
a call starts and when it ends.

Contract (every store):

* :meth:`write` appends one message; the store copies the value (the caller may
  keep using its object); :meth:`get` reads the resolved value at a path
  (:data:`~sophon_dsl.runtime.state.MISSING` when absent) and the caller must
  copy it before handing it out;
* :meth:`add_record` registers a call's record, in call order;
  :meth:`record_started` and :meth:`record_ended` are called when the record
  changed that way (the in-memory store has nothing to do); :meth:`record_started`
  again when an attempt failed and the call is retried (the record's ``attempt_log``
  then holds each attempt so far: a durable store shows them while the call runs);
* :meth:`resolved`, :meth:`snapshot` build what the run result reports.

The scheduler tells a store it was given about record changes; its own default
:class:`MemoryStore` has nothing to do then, and is not told (two calls per call saved).

A durable store also implements :class:`CommitBarrier`: a call's dependents start only once
its completion is committed, and a call that is not idempotent starts only once its intent
is.  They may be *examined* before: while the completion waits in the batch being gathered,
the dependents it makes ready are decided at once and held (:meth:`CommitBarrier.hold`), the
intents of those that need one join that same batch, and they start when it is committed;
a chain's edge is then one commit instead of two (the completion's, then the intent's).
The scheduler hands it a :class:`CommitListener` (what to do when something is committed,
or when the store fails) and otherwise talks to it through the protocol's methods: it never
reaches into the store, and the store never holds the scheduler.

``tests/test_store_conformance.py`` runs one suite on every implementation (memory, the
SQLite and PostgreSQL journals, the dry-run's sampled store), by capability: ``log`` and
``records`` are required, ``commit_barrier`` and ``sampled_reads`` optional.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Protocol, Sequence, runtime_checkable

from ..model import Call, OutputMethod
from .errors import ErrorInfo
from .result import CallRecord
from .state import LogSnapshot, StateLog

__all__ = ["CommitBarrier", "CommitListener", "MemoryStore", "StateStore"]


@runtime_checkable
class StateStore(Protocol):
    """The log and the call records of one run (see the module docstring)."""

    records: list[CallRecord]

    def write(self, kind: str, path: tuple, value: Any, method: OutputMethod = OutputMethod.SET,
              call: str | None = None) -> None: ...

    def get(self, kind: str, path: tuple = ()) -> Any: ...

    def resolved(self, exclude: Iterable[str] = ()) -> dict[str, Any]: ...

    def snapshot(self) -> Any: ...

    def add_record(self, record: CallRecord) -> None: ...

    def record_started(self, record: CallRecord) -> None: ...

    def record_ended(self, record: CallRecord) -> None: ...


@dataclass(frozen=True, slots=True)
class CommitListener:
    """What a :class:`CommitBarrier` calls back into the run (the scheduler makes one).

    ``on_committed(i)``: call ``i``'s completion is committed, its dependents may be
    examined; ``on_intents(starts)``: the intents of these ``(call, args, inline)`` are
    committed, their tasks may start; ``on_failed()``: the store refused a transaction,
    the run stops; ``calls``: the run's calls by index (grown in place as calls join),
    read for a call's output paths when its completion is encoded; ``on_ended(i)``, when
    given: call ``i``'s completion is in the batch being gathered (not committed yet), its
    dependents are examined now and every call that makes ready goes to
    :meth:`CommitBarrier.hold` instead of starting (without it, the barrier waits for the
    commit and calls ``on_committed``)."""

    on_committed: Callable[[int], None]
    on_intents: Callable[[Sequence[tuple]], None]
    on_failed: Callable[[], None]
    calls: Sequence[Call]
    on_ended: Callable[[int], None] | None = None


@runtime_checkable
class CommitBarrier(Protocol):
    """A store whose commits the run waits on (a durable run's journal).

    ``cleared`` holds the calls that need nothing more before their tool starts (their
    intent committed, or none needed): the runner skips :meth:`before_start` for them."""

    run_id: str
    cleared: set[int]

    def connect(self, listener: CommitListener) -> None:
        """The run's callbacks (called once, when the scheduler is built)."""

    def start_after_intent(self, i: int, args: dict, inline: Any) -> bool:
        """Call ``i`` is ready: True if its intent is queued and ``on_intents`` starts it
        once committed; False if it starts now."""

    def settle_after_commit(self, i: int) -> None:
        """The runner ended call ``i``: ``on_committed(i)`` once its completion is committed
        (at once when it has nothing to commit), or ``on_ended(i)`` at once while its
        completion waits in the batch being gathered."""

    def hold(self, i: int, args: dict, inline: Any, *, intent: bool) -> None:
        """Call ``i`` is ready during ``on_ended``: it starts (``on_intents``) only once the
        batch being gathered is committed; its intent joins that batch if it needs one and
        ``intent`` (False: it commits its own later, after an approval or in its slot)."""

    def before_start(self, i: int, call: Call, args: dict, *, intent: bool) -> Awaitable[ErrorInfo | None]:
        """What call ``i`` needs before its tool starts (a decision about a call in doubt, its
        intent committed unless ``intent`` is False); an error fails the call."""

    def intent_now(self, i: int, call: Call) -> Awaitable[ErrorInfo | None]:
        """Commit call ``i``'s intent now (it got its slot under ``max_concurrency``)."""

    def restore_joined(self, indices: range) -> list[int]:
        """Calls that joined the run while it runs (a map's items): those an earlier process
        committed are restored instead of run again; their indexes."""

    def uncommitted(self, indices: Iterable[int]) -> bool:
        """True if the completion of any of ``indices`` (calls that ended) is not committed
        yet: a call that arrives while the run runs (a streamed line) and reads one of them
        goes to :meth:`hold` instead of starting at once."""


class MemoryStore:
    """The default store: a :class:`~sophon_dsl.runtime.state.StateLog` and a list of records."""

    __slots__ = ("log", "records", "write", "get")

    def __init__(self, log: StateLog | None = None) -> None:
        self.log = log if log is not None else StateLog()
        self.records: list[CallRecord] = []
        # the log's own methods, bound once: they are the store's hot path
        self.write = self.log.write
        self.get = self.log.get

    def resolved(self, exclude: Iterable[str] = ()) -> dict[str, Any]:
        return self.log.resolved(exclude)

    def snapshot(self) -> LogSnapshot:
        return self.log.snapshot()

    def add_record(self, record: CallRecord) -> None:
        self.records.append(record)

    def record_started(self, record: CallRecord) -> None:
        pass

    def record_ended(self, record: CallRecord) -> None:
        pass
