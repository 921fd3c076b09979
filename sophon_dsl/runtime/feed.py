"""Where a scheduler's calls come from: the :class:`PlanFeed` seam.

A :class:`FixedPlan` hands over a whole checked plan at once.  A
:class:`GrowingPlan` receives calls one by one while a model's reply streams
in (``sophon_dsl.llm.stream``): each arriving call is wired into the plan's
:class:`~sophon_dsl.dataflow.DataFlow` and announced to the scheduler, which
dispatches it as soon as its inputs are decided.  While a growing plan is open:

* ``order="any"`` (the default; issue 30 item 6): a read that had a writer when it
  arrived (a writer written before it in the reply) goes ahead once its writers have
  ended and it has a value; a read written before any of its writers waits for the
  end of the reply (a writer may still arrive, and data of earlier turns is not its
  final value).  A call arriving later that writes what such an *anchored* read reads
  is refused (:data:`LATE_WRITER`), whatever has run: the rule depends on the text
  alone, so a streamed run decides what a run of the whole plan decides, except for
  the calls it refuses and names.  Write every writer of a path before the calls that
  read it (or all of them after);
* ``order="written"``: the reply promises writers before readers: a read whose writers
  so far have all ended goes ahead, even with no writer (data of earlier turns); a
  call arriving later that writes what such a read already consumed is refused;
* a plan fed whole before it runs (``streamed=False``: a lazy plan, an agent turn with
  ``dispatch="after_reply"``): every read waits for the close, as in a fixed plan.

When the plan closes, every waiting read settles as in a fixed plan.

A scheduler *attaches* to its feed and is told, through
:class:`FeedListener`, about arrivals, refusals and the close.

A map's item calls join the run's data flow while the run goes on (``runtime/maps.py``),
between arrivals: an arrival's index in the flow is what :meth:`GrowingPlan.add` returns,
and the plan (``plan``, ``len``) holds the arrived calls only, as a fixed plan holds its
own calls and not its maps' items.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol, Sequence

from ..errors import OptionError
from ..dataflow import DataFlow
from ..model import Call, Plan, Value
from .errors import ErrorInfo

__all__ = ["FeedListener", "FixedPlan", "GrowingPlan", "LATE_WRITER", "ORDERS", "PlanFeed"]

#: How a growing plan treats the order of its calls (see the module docstring).
ORDERS = ("any", "written")
#: The diagnostic code of a call refused for writing what an earlier read already consumed.
LATE_WRITER = "E212"


class FeedListener(Protocol):
    """What a feed tells its scheduler."""

    def call_arrived(self, i: int, new_edges: Sequence[tuple[int, int]],
                     refused: ErrorInfo | None = None) -> None: ...

    def call_refused(self, i: int, error: ErrorInfo) -> None: ...

    def feed_closed(self) -> None: ...

    def is_decided(self, i: int) -> bool:
        """Call ``i`` was dispatched or has ended (its reads are decided)."""
        ...


class PlanFeed(Protocol):
    """The calls a scheduler runs (see the module docstring)."""

    flow: DataFlow
    ids: list[str]

    @property
    def plan(self) -> Plan: ...

    @property
    def header(self) -> Plan:
        """The header (schemas, goal, declarations), cheap to read while calls arrive."""
        ...

    @property
    def is_open(self) -> bool: ...

    @property
    def written_order(self) -> bool:
        """While open: reads may be decided as calls arrive (the reply writes writers first)."""
        ...

    @property
    def anchored_reads(self) -> bool:
        """While open: reads that had a writer when they arrived may be decided."""
        ...

    def attach(self, listener: FeedListener) -> None: ...


class FixedPlan:
    """A whole plan, known before the run starts."""

    __slots__ = ("plan", "flow", "ids")

    is_open = False
    written_order = False   # (read only while a feed is open: a fixed plan never is)
    anchored_reads = False

    def __init__(self, plan: Plan, flow: DataFlow | None = None, ids: Sequence[str] | None = None) -> None:
        self.plan = plan
        self.ids = list(ids) if ids is not None else (list(flow.ids) if flow is not None else plan.call_ids())
        self.flow = flow if flow is not None else DataFlow.build(plan.calls, self.ids)

    @property
    def header(self) -> Plan:
        return self.plan

    def attach(self, listener: FeedListener) -> None:
        pass  # nothing will arrive


class GrowingPlan:
    """A plan whose calls arrive one at a time (a streamed reply)."""

    def __init__(self, header: Plan, order: str = "any", streamed: bool = True) -> None:
        if order not in ORDERS:
            raise OptionError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
        self.order = order
        self.streamed = streamed  # False: every call arrives before any runs (reads wait for the close)
        self.late: dict[int, tuple[int, ...]] = {}  # refused call -> the decided readers it came too late for
        self._header = replace(header, calls=(), output=None)
        self.flow = DataFlow()
        self.ids = self.flow.ids
        self._arrived: list[Call] = []  # the plan's own calls (the flow also holds maps' items)
        self._output: Value | None = None
        self._plan: Plan | None = self._header
        self._open = True
        self._listener: FeedListener | None = None

    @property
    def plan(self) -> Plan:
        """The plan so far (built on access: arrivals do not copy the call tuple)."""
        if self._plan is None:
            self._plan = replace(self._header, calls=tuple(self._arrived), output=self._output)
        return self._plan

    @property
    def header(self) -> Plan:
        return self._header  # (``plan`` would copy the calls after each arrival)

    @property
    def is_open(self) -> bool:
        return self._open

    def attach(self, listener: FeedListener) -> None:
        self._listener = listener

    def set_header(self, header: Plan) -> None:
        """Header fields (goal, schemas, tool declarations) seen later in the reply."""
        self._header = replace(header, calls=(), output=None)
        self._plan = None

    @property
    def written_order(self) -> bool:
        """Reads may be decided while the plan is open (the reply writes writers first)."""
        return self.streamed and self.order == "written"

    @property
    def anchored_reads(self) -> bool:
        """Reads that had a writer when they arrived may be decided while the plan is open."""
        return self.streamed and self.order == "any"

    def _anchored_for(self, r: int, i: int) -> bool:
        """Does earlier call ``r`` read something new call ``i`` writes through a read that
        already had a writer written before ``r`` (an anchored read, possibly decided)?"""
        flow = self.flow
        rw = flow.read_writers
        for k in flow.read_range(r):
            ws = rw[k]
            if i in ws and ws[0] < r:   # (writer tuples are sorted)
                return True
        for read in flow.inline_reads.get(r) or ():
            ws = read.writers
            if i in ws and min(ws) < r:
                return True
        return False

    def add(self, call: Call, call_id: str, refused: ErrorInfo | None = None) -> int:
        """Append a call; a ``refused`` one is recorded as failed without running (and so is,
        in written order, a call writing what an already decided read consumed).  Returns the
        call's index in the flow."""
        edges = self.flow.add_call(call, call_id)
        self._arrived.append(call)
        self._plan = None
        i = len(self.flow.calls) - 1
        if refused is None and edges and self.written_order and self._listener is not None:
            decided = self._listener.is_decided
            late = tuple(sorted({r for r, w in edges if w == i and r != i and decided(r)}))
            if late:
                self.late[i] = late
                ids = self.flow.ids
                refused = ErrorInfo("Plan.Invalid", f"{LATE_WRITER} call {call_id} writes what "
                                    f"{', '.join(ids[r] for r in late)} already read while the reply streamed; "
                                    "write a call before the calls that read its output")
        elif refused is None and edges and self.anchored_reads:
            # (from the text alone, not from what has run: the same reply is refused the same way)
            late = tuple(sorted({r for r, w in edges if w == i and r != i and self._anchored_for(r, i)}))
            if late:
                self.late[i] = late
                ids = self.flow.ids
                refused = ErrorInfo("Plan.Invalid", f"{LATE_WRITER} call {call_id} writes what "
                                    f"{', '.join(ids[r] for r in late)} read(s), after a writer written before "
                                    "them; reads go ahead while the reply streams, so write every writer of a "
                                    "path before the calls that read it (or all of them after)")
        if self._listener is not None:
            self._listener.call_arrived(i, edges, refused)
        return i

    def refuse(self, i: int, error: ErrorInfo) -> None:
        """A call already added turned out invalid (a whole-plan check at the close)."""
        if self._listener is not None:
            self._listener.call_refused(i, error)

    def close(self, output: Value | None = None) -> None:
        """No more calls: waiting reads settle now."""
        if not self._open:
            return
        self._open = False
        if output is not None:
            self._output = output
            self._plan = None
        if self._listener is not None:
            self._listener.feed_closed()

    def __len__(self) -> int:
        return len(self._arrived)
