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
  changed that way (the in-memory store has nothing to do);
* :meth:`resolved`, :meth:`snapshot` build what the run result reports.
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol, runtime_checkable

from ..model import OutputMethod
from .result import CallRecord
from .state import LogSnapshot, StateLog

__all__ = ["MemoryStore", "StateStore"]


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
