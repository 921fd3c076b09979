"""Input decisions: is a call's input settled, and with which value?

Deterministic, whatever the timing (``spec/language.md``, Runtime):

* a reference is *settled* when every other call that writes an overlapping
  path has ended; it then *has a value*, is *missing* (writers wrote, but
  nothing is at that path, or there are no writers and no initial data), or is
  *broken* (it has writers and none of them wrote: they failed, were skipped,
  or took another branch);
* ``a || b``: the leftmost alternative with a value, decided once every
  alternative to its left is settled; ``a && b``: all must have values, the
  value is the last;
* a call with a broken input is skipped (with the reason); otherwise a call
  with a missing input fails with ``Ref.Unresolved``;
* with the partial cascade (``RunOptions.cascade="partial"``, seed 001), a call whose
  read is broken because its writers failed or were skipped runs anyway once one of its
  dependencies succeeded: that read's value is the failure, ``{error, cause}``
  (:meth:`InputResolver.failure`); with no dependency succeeded it is skipped as above;
* a reference whose JMESPath (or a template whose text) passes its bounds
  (:mod:`sophon_dsl.jmes_bounded`: steps, size, nesting, the run's deadline) fails the
  call with ``Ref.TooExpensive``, decided as a missing read is (after broken and pending
  reads: the outcome does not depend on which read is evaluated first);
* while a streamed plan is open, every read waits except of ``input``: a
  writer may still arrive, and the finished plan's read would wait for it
  wherever it stands in the text (so a streamed run decides what the whole
  plan's run decides); in ``written`` order (``runtime.feed``) only missing
  and broken reads wait.
"""

from __future__ import annotations

import json
from enum import IntEnum
from typing import Any

from ..dataflow import DataFlow
from ..jmes_limits import DEFAULT_LIMITS, QueryLimits, QueryTooExpensive
from ..maps import outer_reads
from ..model import Expression, ListValue, Literal, ObjectValue, OutputMethod, Reference, Template
from ..refs import query_value
from ..values import ValueVisitor, template_to_string
from .errors import REF_TOO_EXPENSIVE, REF_UNRESOLVED, ErrorInfo
from .state import MISSING, json_copy

__all__ = ["CALL_SKIPPED", "CASCADES", "InputResolver", "RefState", "Verdict", "evaluate_loose", "read_at",
           "render_template", "render_text_value",
           "too_expensive"]


class RefState(IntEnum):
    HAS = 0
    MISSING = 1
    BROKEN = 2
    PENDING = 3


class Verdict(IntEnum):
    """What :meth:`InputResolver.evaluate` decided for a call."""

    READY = 0   # payload: (args, inline)
    WAIT = 1    # payload: None
    SKIP = 2    # payload: the reason
    FAIL = 3    # payload: an ErrorInfo


_HAS, _MISSING, _BROKEN, _PENDING = RefState.HAS, RefState.MISSING, RefState.BROKEN, RefState.PENDING
_READY, _WAIT, _SKIP, _FAIL = Verdict.READY, Verdict.WAIT, Verdict.SKIP, Verdict.FAIL
_NO_WRITERS: tuple = ()
_ATOMIC = frozenset({str, int, float, bool, type(None)})  # JSON values json_copy returns as they are
# above this many reads, a call's reads are looked up through a map instead of a scan
_SCAN_LIMIT = 16
# output methods that collect (a list that grows): a `||` alternative written with one of
# them that no writer took reads as the empty list once its writers succeeded
_ACCUMULATING = frozenset({OutputMethod.PUSH, OutputMethod.CONCAT})
# the cascade a run applies to a failed call's dependents (RunOptions.cascade): "skip" (seed
# 000, the default) skips them; "partial" (seed 001) runs those with another dependency that
# succeeded, the failed one's {error, cause} in place of what it would have written
CASCADES = ("skip", "partial")
# what a read of a skipped call's output holds under the partial cascade
CALL_SKIPPED = "Call.Skipped"


def render_text_value(value: Any) -> str:
    """How a value is interpolated into a template: strings as-is, others compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def too_expensive(what: str, exc: QueryTooExpensive) -> ErrorInfo:
    """``Ref.TooExpensive`` for the reference (or template) written ``what``."""
    if len(what) > 120:
        what = what[:117] + "..."
    return ErrorInfo(REF_TOO_EXPENSIVE, f"{what}: {exc.message}")


def _text_bound(size: int, limits: QueryLimits) -> None:
    """A template's text so far is ``size`` characters: past the run's bound on a value
    (``max_result_bytes``) it stops here, before the next piece is joined (two hundred
    references to a 16 MiB value would otherwise make a 3 GB string)."""
    if size > limits.max_bytes:
        raise QueryTooExpensive("size", f"the template's text would be more than {limits.max_bytes:,} characters")


def _overlaps(a: tuple, b: tuple) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


class _Acc:
    __slots__ = ("broken", "missing", "pending", "expensive", "partial")

    def __init__(self, partial: bool = False) -> None:
        self.broken: list[str] = []
        self.missing: list[str] = []
        self.pending = False
        self.expensive: ErrorInfo | None = None  # the first read past its bounds (Ref.TooExpensive)
        # the partial cascade's second pass: a read broken by a failure takes the failure
        self.partial = partial

    def too_expensive(self, what: str, exc: QueryTooExpensive) -> None:
        if self.expensive is None:
            self.expensive = too_expensive(what, exc)


class InputResolver:
    """Decides calls' inputs from the flow's wiring, the calls' progress and the store.

    It shares the scheduler's per-call lists (``ended``, ``wrote``, ``records``), which
    grow in place when a streamed plan grows.
    """

    def __init__(self, flow: DataFlow, ended: list, wrote: list, records: list, get: Any) -> None:
        self.flow = flow
        self.ended = ended
        self.wrote = wrote
        self.records = records
        self.get = get
        self._stream_open = False
        self._maps: dict[int, dict[int, int]] = {}
        # a streamed reply that writes writers before readers (GrowingPlan order "written"):
        # a read with a value may be decided while the stream is open
        self.written_order = False
        # order "any" (GrowingPlan.anchored_reads): a read that had a writer written before its
        # call may be decided while the stream is open (a later writer of it is refused, E212)
        self.anchored_reads = False
        # a map's item, index and local kinds (runtime/maps.py): only the item's own calls
        # write them, so their reads never wait for a streamed arrival
        self.item_kinds: set[str] | frozenset[str] = frozenset()
        # no stream open: reads go straight to the settled state (no per-read stream test)
        self._ref_state = self._settled_state
        # the bounds of a reference's JMESPath; the scheduler puts the run's own here when it
        # starts (its max_result_bytes, deadline and stop flag)
        self.limits: QueryLimits = DEFAULT_LIMITS
        self._expensive: dict[int, tuple] = {}  # id(ref) -> (ref, value, its QueryTooExpensive): see _query
        # the partial cascade (RunOptions.cascade="partial"); ``items`` holds the map item calls
        # not ended (the map driver's), which keep the default: an item's failure is the map's
        # to tolerate, and its calls' other dependencies are outside the item
        self.partial = False
        self.items: Any = ()

    # -- one reference ---------------------------------------------------------

    def writers_of(self, i: int, ref: Reference) -> tuple[int, ...]:
        """The calls that may write what call ``i`` reads through ``ref``."""
        flow = self.flow
        offs = flow.read_offs
        a, b = offs[i], offs[i + 1]
        refs = flow.read_refs
        if b - a <= _SCAN_LIMIT:
            for k in range(a, b):
                if refs[k] is ref:
                    return flow.read_writers[k]
        else:
            m = self._maps.get(i)
            if m is None:
                m = self._maps[i] = {id(refs[k]): k for k in range(b - 1, a - 1, -1)}
            k = m.get(id(ref))
            if k is not None and refs[k] is ref:
                return flow.read_writers[k]
        inline = flow.inline_reads.get(i)
        if inline is not None:
            for r in inline:
                if r.ref is ref:
                    return r.writers
        # not one of the plan's own objects (a call edited at approval): compare keys
        key = ref.key
        for k in range(a, b):
            if refs[k].key == key:
                return flow.read_writers[k]
        for r in inline or ():
            if r.ref.key == key:
                return r.writers
        return _NO_WRITERS

    @property
    def stream_open(self) -> bool:
        """A streamed plan is open: reads are decided by :meth:`ref_state`'s streaming rule."""
        return self._stream_open

    @stream_open.setter
    def stream_open(self, value: bool) -> None:
        self._stream_open = value
        self._ref_state = self._streamed_state if value else self._settled_state

    def release(self) -> None:
        """The run is over: the rule bound to this resolver is dropped (a bound method held
        by its own object is a reference cycle, which would keep the run's data flow and
        records for the cyclic collector; see ``Scheduler.release``)."""
        self.__dict__.pop("_ref_state", None)

    def ref_state(self, i: int, ref: Reference) -> tuple[RefState, Any]:
        """What call ``i`` reading ``ref`` sees now: (HAS, value), (MISSING, text),
        (BROKEN, reason) or (PENDING, None), for callers outside the resolver (the map
        driver).  A read whose JMESPath passes its bounds is MISSING here: the call reading
        it fails with ``Ref.TooExpensive`` when :meth:`evaluate` decides it.  (The resolver
        itself calls ``_ref_state``, rebound per instance to the settled or the streamed
        rule when a stream opens or closes, and handles the bound.)"""
        try:
            return self._ref_state(i, ref)
        except QueryTooExpensive:
            return _MISSING, ref.text()

    def _streamed_state(self, i: int, ref: Reference) -> tuple[RefState, Any]:
        if not ref.kind.startswith("input") and ref.kind not in self.item_kinds:
            if self.anchored_reads:
                writers = self.writers_of(i, ref)
                if not writers or writers[0] > i:   # (sorted) no writer written before the reader:
                    return _PENDING, None           # one may still come, as the finished plan's would
                st, val = self._state_among(ref, writers)
                return (_PENDING, None) if st is _MISSING or st is _BROKEN else (st, val)
            if not self.written_order:
                # any call still to come may write this path (or one overlapping it), and a
                # finished plan's read waits for every writer wherever it stands in the text
                return _PENDING, None
            st, val = self._settled_state(i, ref)
            return (_PENDING, None) if st is _MISSING or st is _BROKEN else (st, val)
        return self._settled_state(i, ref)

    def _settled_state(self, i: int, ref: Reference) -> tuple[RefState, Any]:
        return self._state_among(ref, self.writers_of(i, ref))

    def _state_among(self, ref: Reference, writers: tuple[int, ...]) -> tuple[RefState, Any]:
        """:meth:`_settled_state` of a read whose writers are known."""
        value = self._value_among(ref, writers)
        if value is not MISSING:
            return _HAS, value
        if writers:
            ended = self.ended
            for j in writers:
                if not ended[j]:
                    return _PENDING, None
            if not self._written_by(ref, writers):
                if self._unwritten_accumulator(ref, writers):
                    # the error-collecting pattern (`†state.ok || †state.errors <<= f()`):
                    # no writer took this branch, so nothing was collected: the empty list
                    empty: list = []
                    return _HAS, empty if ref.query is None else query_value(ref.query, empty)
                return _BROKEN, self._broken_reason(ref, writers)
        return _MISSING, ref.text()

    def _unwritten_accumulator(self, ref: Reference, writers: tuple[int, ...]) -> bool:
        """Whether every writer of ``ref`` succeeded taking another branch of a ``||`` output
        whose alternatives accumulate (``<<=``, ``+=``), ``ref``'s path being one of them:
        then the read is the empty list (spec/language.md, Output methods)."""
        calls = self.flow.calls
        records = self.records
        for j in writers:
            if j >= len(calls) or records[j].status != "succeeded":
                return False
            out = calls[j].output
            if out is None or not out.is_branching or out.method not in _ACCUMULATING:
                return False
            if not out.holds(ref):
                return False
        return bool(writers)

    def _value_among(self, ref: Reference, writers: tuple[int, ...]) -> Any:
        """The value a read of ``ref`` has now (its JMESPath query applied), its writers
        being ``writers``; MISSING when it has none (yet): :meth:`_state_among` says why.
        The hot path of every run: a read is ready once each of its writers has ended and
        one of them wrote an overlapping path (usually its only writer, this very path)."""
        if len(writers) == 1:
            j = writers[0]
            if not self.ended[j]:
                return MISSING
            done = self.wrote[j]
            if not (len(done) == 1 and done[0].path == ref.path and done[0].kind == ref.kind) and \
                    not self._written_by(ref, writers):
                return MISSING
        elif writers:
            ended = self.ended
            for j in writers:
                if not ended[j]:
                    return MISSING
            if not self._written_by(ref, writers):
                return MISSING
        value = self.get(ref.kind, ref.path)
        if value is MISSING or ref.query is None:
            return value
        return self._query(ref, value)  # JMESPath after the path: applied to the value there

    def _query(self, ref: Reference, value: Any) -> Any:
        """``ref``'s JMESPath applied to ``value`` within the run's bounds.  A read past a
        bound that does not depend on the clock (steps, size, nesting) fails again on the
        same value: remembered, so a call examined again (or the map driver looking at an
        outer read) does not pay a million steps once more."""
        hit = self._expensive.get(id(ref))
        if hit is not None and hit[0] is ref and hit[1] is value:
            raise QueryTooExpensive(hit[2].bound, hit[2].message)
        try:
            return query_value(ref.query, value, self.limits)
        except QueryTooExpensive as exc:
            if exc.bound in ("steps", "size", "depth"):
                self._expensive[id(ref)] = (ref, value, exc)  # (both kept: their ids stay theirs)
            raise

    def _written_by(self, ref: Reference, writers: tuple[int, ...]) -> bool:
        """Some writer wrote a path of ``ref``'s kind that is a prefix of its path or extends it."""
        wrote = self.wrote
        kind, path = ref.kind, ref.path
        for j in writers:
            for r in wrote[j]:
                if r.kind == kind and (r.path == path or _overlaps(path, r.path)):
                    return True
        return False

    def _broken_reason(self, ref: Reference, writers: tuple[int, ...]) -> str:
        reasons = []
        for j in writers:
            rec = self.records[j]
            if self.wrote[j]:
                reasons.append(f"{rec.id} took another branch ({rec.branch or rec.written[0]})")
            elif rec.status == "succeeded":
                reasons.append(f"{rec.id} wrote nothing")
            else:
                reasons.append(f"{rec.id} {rec.status}")
        return f"{ref.text()} has no value ({', '.join(reasons)})"

    # -- values ----------------------------------------------------------------

    def eval(self, i: int, v: Any, acc: _Acc) -> Any:
        """The value of ``v`` as call ``i`` reads it; what is pending, broken or missing
        is noted in ``acc`` (the general route: the shared value visitor)."""
        if type(v) is Literal:
            return v.value
        return _CallValue(self, i, acc).visit(v)

    @staticmethod
    def _note(st: RefState, val: Any, acc: _Acc) -> None:
        if st is _PENDING:
            acc.pending = True
        elif st is _BROKEN:
            acc.broken.append(val)
        else:
            acc.missing.append(val)

    def simple_args(self, i: int, params: tuple) -> dict | None:
        """The arguments of call ``i`` when every parameter is a literal, a reference or a
        list or object of those, and every reference has a value; else None (then :meth:`evaluate`
        takes the general route, which also says why a call waits, is skipped or fails)."""
        if self._stream_open:
            return self._simple_args_looked_up(i, params)
        # The flow lists a call's reads in the order its parameters hold them (DataFlow's
        # wiring walks them so), so each reference's writers are the next read slot's: no
        # lookup per reference.  A slot holding another object (a call edited at approval)
        # sends the call to the lookup per reference.
        flow = self.flow
        k, end = flow.read_offs[i], flow.read_offs[i + 1]
        refs, wss = flow.read_refs, flow.read_writers
        value_among = self._value_among
        ended, wrote, get = self.ended, self.wrote, self.get
        args = {}
        for p in params:
            v = p.value
            tv = type(v)
            if tv is Literal:
                args[p.name] = v.value
            elif tv is Reference:
                if k == end or refs[k] is not v:
                    return self._simple_args_looked_up(i, params)
                ws = wss[k]
                k += 1
                if len(ws) == 1 and ended[ws[0]] and v.query is None and len(done := wrote[ws[0]]) == 1 \
                        and done[0].path == v.path and done[0].kind == v.kind:
                    val = get(v.kind, v.path)  # (the common read: _value_among's first case)
                elif not ws and v.query is None:  # data no call writes (the input: a map's item)
                    val = get(v.kind, v.path)  # (what _value_among does for it)
                else:
                    val = value_among(v, ws)
                if val is MISSING:
                    return None
                args[p.name] = val if type(val) in _ATOMIC else json_copy(val)
            elif tv is ListValue:
                items = []
                for x in v.items:
                    tx = type(x)
                    if tx is Literal:
                        items.append(x.value)
                    elif tx is Reference:
                        if k == end or refs[k] is not x:
                            return self._simple_args_looked_up(i, params)
                        ws = wss[k]
                        k += 1
                        if len(ws) == 1 and ended[ws[0]] and x.query is None and len(done := wrote[ws[0]]) == 1 \
                                and done[0].path == x.path and done[0].kind == x.kind:
                            val = get(x.kind, x.path)  # (the common read: _value_among's first case)
                        else:
                            val = value_among(x, ws)
                        if val is MISSING:
                            return None
                        items.append(val if type(val) in _ATOMIC else json_copy(val))
                    else:
                        return None
                args[p.name] = items
            elif tv is ObjectValue:
                obj = {}
                for key, x in v.entries:
                    tx = type(x)
                    if tx is Literal:
                        obj[key] = x.value
                    elif tx is Reference:
                        if k == end or refs[k] is not x:
                            return self._simple_args_looked_up(i, params)
                        ws = wss[k]
                        k += 1
                        if len(ws) == 1 and ended[ws[0]] and x.query is None and len(done := wrote[ws[0]]) == 1 \
                                and done[0].path == x.path and done[0].kind == x.kind:
                            val = get(x.kind, x.path)  # (the common read: _value_among's first case)
                        else:
                            val = value_among(x, ws)
                        if val is MISSING:
                            return None
                        obj[key] = val if type(val) in _ATOMIC else json_copy(val)
                    else:
                        return None
                args[p.name] = obj
            else:
                return None
        return args

    def _simple_args_looked_up(self, i: int, params: tuple) -> dict | None:
        """:meth:`simple_args` finding each reference's writers by lookup (and through the
        streamed rule while a stream is open)."""
        args = {}
        ref_state = self._ref_state
        for p in params:
            v = p.value
            tv = type(v)
            if tv is Literal:
                args[p.name] = v.value
            elif tv is Reference:
                st, val = ref_state(i, v)
                if st is not _HAS:
                    return None
                args[p.name] = json_copy(val)
            elif tv is ListValue:
                items = []
                for x in v.items:
                    tx = type(x)
                    if tx is Literal:
                        items.append(x.value)
                    elif tx is Reference:
                        st, val = ref_state(i, x)
                        if st is not _HAS:
                            return None
                        items.append(json_copy(val))
                    else:
                        return None
                args[p.name] = items
            elif tv is ObjectValue:
                obj = {}
                for k, x in v.entries:
                    tx = type(x)
                    if tx is Literal:
                        obj[k] = x.value
                    elif tx is Reference:
                        st, val = ref_state(i, x)
                        if st is not _HAS:
                            return None
                        obj[k] = json_copy(val)
                    else:
                        return None
                args[p.name] = obj
            else:
                return None
        return args

    def literal_args(self, call: Any) -> tuple[dict, Any]:
        """Arguments and inline output of a call that reads nothing."""
        ev = self._eval_literal
        args = {p.name: ev(p.value) for p in call.params}
        return args, (ev(call.inline_output) if call.inline_output is not None else None)

    def _eval_literal(self, v: Any) -> Any:
        if type(v) is Literal:
            return v.value
        return self.eval(-1, v, _Acc())

    # -- one call ----------------------------------------------------------------

    def reads_nothing(self, i: int) -> bool:
        flow = self.flow
        offs = flow.read_offs
        return offs[i] == offs[i + 1] and not flow.control[i] and i not in flow.inline_reads

    def evaluate(self, i: int, call: Any) -> tuple[Verdict, Any]:
        """(READY, (args, inline)) | (WAIT, None) | (SKIP, reason) | (FAIL, ErrorInfo).

        A map call (``runtime/maps.py``) also waits while an outer read of its body is
        pending, as for its own reads: its dependencies alone do not hold it back when one of
        them ends early (failed, another branch) or a streamed plan closes, and while a
        stream is open those reads wait by the stream's rule (a writer may still arrive)."""
        expensive = None
        if call.map is not None:  # a map waits while an outer read of its body is pending
            ref_state = self._ref_state
            for ref in outer_reads(call.map):
                try:
                    if ref_state(i, ref)[0] is _PENDING:
                        return _WAIT, None
                except QueryTooExpensive as exc:  # every item would fail on it: the map does
                    if expensive is None:
                        expensive = too_expensive(ref.text(), exc)
        flow = self.flow
        after = flow.control[i]
        if not after and call.inline_output is None and expensive is None:
            try:
                args = self.simple_args(i, call.params)
            except QueryTooExpensive:
                args = None  # the general route below decides (another read may wait or be broken)
            if args is not None:
                return _READY, (args, None)
            if self.reads_nothing(i):
                return _READY, self.literal_args(call)
        acc = _Acc()
        partial = self.partial and call.map is None and i not in self.items
        if after:
            self._after_state(i, after, acc)
            if acc.broken and not partial:
                return _SKIP, "; ".join(acc.broken)
        ev = self.eval
        args = {p.name: ev(i, p.value, acc) for p in call.params}
        inline = ev(i, call.inline_output, acc) if call.inline_output is not None else None
        if acc.broken and partial:
            return self._partial(i, call, after, acc, expensive)
        return self._decide(acc, args, inline, expensive)

    def _decide(self, acc: _Acc, args: dict, inline: Any, expensive: ErrorInfo | None) -> tuple[Verdict, Any]:
        if acc.broken:
            return _SKIP, "; ".join(acc.broken)
        if acc.pending:
            return _WAIT, None
        if expensive is not None or acc.expensive is not None:
            return _FAIL, expensive or acc.expensive
        if acc.missing:
            return _FAIL, ErrorInfo(REF_UNRESOLVED, "no value at " + ", ".join(acc.missing))
        return _READY, (args, inline)

    def _partial(self, i: int, call: Any, after: Any, acc: _Acc,
                 expensive: ErrorInfo | None) -> tuple[Verdict, Any]:
        """The partial cascade for call ``i``, some of whose reads (or ``@after`` calls) are
        broken: it runs when one of its dependencies succeeded, each read broken by a failure
        holding that failure; else it is skipped once every dependency has ended (a
        dependency still running may yet succeed)."""
        records, ended = self.records, self.ended
        deps = [j for j in self.flow.run_deps(i) if j != i]
        if not any(records[j].status == "succeeded" for j in deps):
            if acc.pending or not all(ended[j] for j in deps):
                return _WAIT, None
            return _SKIP, "; ".join(acc.broken)
        if acc.pending:
            return _WAIT, None
        acc = _Acc(partial=True)
        if after:
            self._after_state(i, after, acc)
        ev = self.eval
        args = {p.name: ev(i, p.value, acc) for p in call.params}
        inline = ev(i, call.inline_output, acc) if call.inline_output is not None else None
        return self._decide(acc, args, inline, expensive)

    def failure(self, i: int, ref: Reference) -> dict | None:
        """What a broken read of ``ref`` by call ``i`` holds under the partial cascade: when
        every writer of it failed or was skipped without writing anything, the first failed
        writer's ``{error, cause}`` (in plan order), else ``{"error": "Call.Skipped", "cause":
        "<id> was skipped"}`` of the first skipped one; None when it is broken otherwise (a
        writer took another branch, was cancelled): such a read still skips its call."""
        writers = self.writers_of(i, ref)
        records, wrote = self.records, self.wrote
        first_skipped = None
        for j in writers:
            rec = records[j]
            if wrote[j] or rec.status not in ("failed", "skipped"):
                return None
        for j in writers:
            rec = records[j]
            if rec.status == "failed" and rec.error is not None:
                return rec.error.to_json()
            if first_skipped is None:
                first_skipped = rec
        if first_skipped is None:
            return None
        return {"error": CALL_SKIPPED, "cause": f"{first_skipped.id} was skipped"}

    def use_maps(self, item_kinds: set[str]) -> None:
        """The run has maps (``runtime/maps.py``): ``item_kinds`` are their items' own kinds
        (only the item's calls write them: never waited for while a stream is open), and a
        map call is decided by the outer reads of its body too (see :meth:`evaluate`)."""
        self.item_kinds = item_kinds

    def edited_args(self, i: int, call: Any) -> tuple[dict, Any] | None:
        """Arguments of a call edited at approval time; None when any input is not available."""
        acc = _Acc()
        args = {p.name: self.eval(i, p.value, acc) for p in call.params}
        inline = self.eval(i, call.inline_output, acc) if call.inline_output is not None else None
        if acc.pending or acc.broken or acc.missing or acc.expensive is not None:
            return None
        return args, inline

    def _after_state(self, i: int, after: Any, acc: _Acc) -> None:
        for j in after:
            if j == i:
                continue
            rec = self.records[j]
            if not self.ended[j]:
                acc.pending = True
            elif rec.status != "succeeded" and not rec.caught:
                if acc.partial and rec.status in ("failed", "skipped"):
                    continue  # the partial cascade: a failed dependency does not hold the call
                acc.broken.append(f"@after({rec.id}): {rec.id} {rec.status}")


class _CallValue(ValueVisitor):
    """One call's value tree evaluated against the run (see :meth:`InputResolver.eval`)."""

    __slots__ = ("res", "i", "acc")

    def __init__(self, res: InputResolver, i: int, acc: _Acc) -> None:
        self.res = res
        self.i = i
        self.acc = acc

    def reference(self, node: Reference) -> Any:
        try:
            st, val = self.res._ref_state(self.i, node)
        except QueryTooExpensive as exc:
            self.acc.too_expensive(node.text(), exc)
            return None
        if st is _HAS:
            return json_copy(val)
        if st is _BROKEN and self.acc.partial:
            failed = self.res.failure(self.i, node)
            if failed is not None:
                return failed
        self.res._note(st, val, self.acc)
        return None

    def template(self, node: Template) -> str:
        out = []
        res, i, acc = self.res, self.i, self.acc
        size, limits = 0, res.limits
        failed = False  # a part passed its bounds: the other parts are still read (broken first)
        for part in node.parts:
            if type(part) is str:
                out.append(part)
                size += len(part)
                continue
            try:
                st, val = res._ref_state(i, part)
            except QueryTooExpensive as exc:
                acc.too_expensive(part.text(), exc)
                failed = True
                continue
            if st is _BROKEN and acc.partial:
                caught = res.failure(i, part)
                if caught is not None:
                    st, val = _HAS, caught
            if st is not _HAS:
                res._note(st, val, acc)
            elif not failed:
                text = render_text_value(val)
                size += len(text)
                try:
                    _text_bound(size, limits)
                except QueryTooExpensive as exc:
                    acc.too_expensive(template_to_string(node), exc)
                    failed = True
                    continue
                out.append(text)
        return "" if failed else "".join(out)

    def expression(self, node: Expression) -> Any:
        res, i, acc = self.res, self.i, self.acc
        if node.op == "||":
            broken, missing = [], []
            for r in node.operands:
                try:
                    st, val = res._ref_state(i, r)
                except QueryTooExpensive as exc:  # a bound is not a missing value: no fallback
                    acc.too_expensive(r.text(), exc)
                    return None
                if st is _HAS:
                    return json_copy(val)
                if st is _PENDING:
                    acc.pending = True
                    return None
                (broken if st is _BROKEN else missing).append(val)
            if broken and acc.partial:  # the partial cascade: the leftmost failure
                for r in node.operands:
                    if res._ref_state(i, r)[0] is _BROKEN:
                        failed = res.failure(i, r)
                        if failed is not None:
                            return failed
            if broken:
                acc.broken.append(f"no alternative of {node.text()} has a value: " + "; ".join(broken))
            else:
                acc.missing.append(node.text())
            return None
        last = None
        for r in node.operands:
            last = self.reference(r)
        return last


class _FinalValue(ValueVisitor):
    """A value against the final state; unresolved references become None, and so does a
    reference (or template) past its bounds."""

    __slots__ = ("get", "limits")

    def __init__(self, get: Any, limits: QueryLimits) -> None:
        self.get = get
        self.limits = limits

    def _read(self, ref: Reference) -> Any:
        try:
            return read_at(self.get, ref, self.limits)
        except QueryTooExpensive:
            return MISSING

    def reference(self, node: Reference) -> Any:
        val = self._read(node)
        return None if val is MISSING else json_copy(val)

    def template(self, node: Template) -> str | None:
        try:
            return render_template(node, self.reference, self.limits)
        except QueryTooExpensive:
            return None

    def expression(self, node: Expression) -> Any:
        vals = [self._read(r) for r in node.operands]
        if node.op == "||":
            return next((json_copy(x) for x in vals if x is not MISSING), None)
        return None if any(x is MISSING for x in vals) else json_copy(vals[-1])


def render_template(node: Template, value_of: Any, limits: QueryLimits = DEFAULT_LIMITS) -> str:
    """A template's text against the final state, ``value_of(ref)`` giving each reference's
    value; past ``limits.max_bytes`` characters it stops (QueryTooExpensive)."""
    out, size = [], 0
    for part in node.parts:
        text = part if type(part) is str else render_text_value(value_of(part))
        size += len(text)
        _text_bound(size, limits)
        out.append(text)
    return "".join(out)


def read_at(get: Any, ref: Reference, limits: QueryLimits | None = None) -> Any:
    """The value ``ref`` reads through ``get(kind, path)`` (its JMESPath query applied, within
    ``limits``: QueryTooExpensive past them), or MISSING."""
    val = get(ref.kind, ref.path)
    if ref.query is None or val is MISSING:
        return val
    return query_value(ref.query, val, limits)


def evaluate_loose(v: Any, get: Any, limits: QueryLimits | None = None) -> Any:
    """Evaluate a value against the final state (``get(kind, path)``); unresolved
    references (and those past their bounds) become None."""
    return _FinalValue(get, limits or DEFAULT_LIMITS).visit(v)
