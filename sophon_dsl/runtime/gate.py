"""The call gate: the one place that decides whether a call may start (issue 24).

Every call that runs passes :meth:`CallGate.admit` right before its first attempt,
whatever made it: a call of the plan as written, a map item (nested or not), a latent
call, a call of an agent's turn or of a goal step's sub-agent, a call restored by a
resumed run, a call shipped to an executor.  They all start in
:meth:`sophon_dsl.runtime.runner.CallRunner.run_call`, so the gate sits there, and the
map driver asks it (:meth:`CallGate.expand`) before it creates a map's items.

What it decides:

* **approval**: a call whose risk (its own ``@risk`` or its tool's, raised by taint
  below) reaches the threshold runs only when an approval covers it.  The plan gate's
  approval (:func:`plan_risky` lists every risky call the plan may run, map bodies
  included) covers the calls it showed, by template id (``c1[*].charge`` for each item
  of map ``c1``), up to the risk shown.  Anything else asks the approver for that call;
  with no approver it is rejected.  A map whose item count was not known when the plan
  was approved asks once, before its first risky item, with the count.
* **taint**: values read from this machine (files, memory, the shell: a tool whose role
  is ``local-source``) are remembered for the session (:class:`TaintSet`, shared by an
  agent's turns and its goal steps).  A network sink whose arguments carry such data is
  high risk, whatever the plan says, so it needs an approval that covers high risk.
* **budget**: the calls that run, not the calls written: a map's items are charged
  against ``max_calls`` and ``max_expanded_calls`` before they are created
  (``Plan.TooManyCalls`` names the map).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..model import Call, Literal, Plan, Reference, Risk
from .errors import ErrorInfo
from .risk import RAISED_TO, effective_risk, flow_risks, role_of

__all__ = ["ApprovalScope", "CallGate", "PLAN_TOO_MANY_CALLS", "TaintSet", "plan_risky", "template_id",
           "DEFAULT_MAX_EXPANDED_CALLS"]

PLAN_TOO_MANY_CALLS = "Plan.TooManyCalls"
# Calls a run may create by expanding maps, unless the caller says otherwise: far above
# any plan a person or a model writes on purpose, far below what exhausts the machine
# (a 700 x 700 nested map is 490,000 calls and 1.4 GB).
DEFAULT_MAX_EXPANDED_CALLS = 100_000

_ITEM_INDEX = re.compile(r"\[\d+\]")


def template_id(call_id: str) -> str:
    """The id of the plan call an instance comes from: ``c1[3].c2[0].x`` -> ``c1[*].c2[*].x``."""
    return _ITEM_INDEX.sub("[*]", call_id) if "[" in call_id else call_id


def _map_instance(call_id: str) -> str:
    """The map instance an item call belongs to: ``c1[3].c2[0].x`` -> ``c1[3].c2``."""
    cut = call_id.rfind("[")
    return call_id[:cut] if cut > 0 else call_id


# -- taint -------------------------------------------------------------------------------

_TOKEN_SPLIT = re.compile(r"[\s\"'<>(){}\[\],;?&=/:#|\\]+")
MIN_TOKEN = 6       # a shorter word is too common to say anything about where it came from
MIN_SUBSTRING = 8   # an argument this long found inside local data came from it
MAX_TAINT_CHARS = 64 << 20  # remembered local data per session; past it, every sink asks


class TaintSet:
    """What a session read from this machine: the text of each local-source result, its
    lines and its tokens.  Shared by the runs of one session (an agent's turns, a goal's
    steps), so a value the model saw in one turn and wrote as a literal in the next is
    still recognised.  See docs/security.md, "Data-flow taint", for the rule and its limits."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.tokens: set[str] = set()
        self.chars = 0
        self.overflowed = False

    def __bool__(self) -> bool:
        return bool(self.texts) or self.overflowed

    def add(self, value: Any) -> None:
        for text in _strings(value):
            if self.chars + len(text) > MAX_TAINT_CHARS:
                self.overflowed = True
                return
            self.chars += len(text)
            self.texts.append(text)
            for line in text.splitlines():
                line = line.strip()
                if len(line) >= MIN_SUBSTRING:
                    self.tokens.add(line)
            for tok in _TOKEN_SPLIT.split(text):
                if len(tok) >= MIN_TOKEN:
                    self.tokens.add(tok)

    def carries(self, value: Any) -> str | None:
        """A piece of local data ``value`` carries, or None: a string of ``value`` that is a
        line or token of local data, holds such a token, or lies inside local data.  (A line
        of local data made only of short tokens, inside a longer argument, is not seen: the
        cost of a check stays linear in the argument, whatever was read.)"""
        if not self:
            return None
        if self.overflowed:
            return "(more local data was read than the taint set keeps)"
        tokens = self.tokens
        for text in _strings(value):
            if text in tokens:
                return text
            for tok in _TOKEN_SPLIT.split(text):
                if len(tok) >= MIN_TOKEN and tok in tokens:
                    return tok
            if len(text) >= MIN_SUBSTRING:
                for local in self.texts:  # (a C substring search per remembered text)
                    if text in local:
                        return text
        return None


def _strings(value: Any) -> Iterable[str]:
    """The strings inside JSON data (keys included), and numbers as text."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if v:
                yield v
        elif isinstance(v, dict):
            for k, x in v.items():
                stack.append(k)
                stack.append(x)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            text = str(v)
            if len(text) >= MIN_TOKEN:
                yield text


# -- what the plan gate shows ------------------------------------------------------------

def plan_risky(plan: Plan, ids: Sequence[str], flow: Any, get: Callable[[str], Any], threshold: Risk,
               input: Any = None) -> list[dict]:
    """Every call of ``plan`` that may run at risk ``threshold`` or above: the plan's own
    calls and, for each map, its body's calls (nested maps too) with template ids
    (``c1[*].charge``), the map's id and its item count when known before the run
    (``"items": None`` otherwise).  Entries: ``{id, tool, risk, index[, body][, why][, map,
    items]}`` (``index`` the top-level call, ``body`` the path of body indices under it)."""
    out: list[dict] = []
    if flow is None:
        from ..dataflow import DataFlow

        flow = DataFlow.build(plan.calls, ids)
    raised = flow_risks(flow, plan.calls, ids, get)
    tainted = _tainted_calls(flow, plan.calls, get)
    risk_of: dict[tuple, Risk] = {}

    def risk(call: Call) -> Risk:
        key = (call.tool, call.risk)
        r = risk_of.get(key)
        if r is None:
            r = risk_of[key] = effective_risk(call, get(call.tool))
        return r

    for i, call in enumerate(plan.calls):
        r = risk_of.get((call.tool, call.risk))  # (risk's lookup inline: once per tool and @risk)
        if r is None:
            r = risk(call)
        why = raised.get(i)
        if why is not None and r < RAISED_TO:
            r = RAISED_TO
        if r >= threshold:
            out.append({"id": ids[i], "tool": call.tool, "risk": r.label, "index": i,
                        **({"why": why} if why is not None else {})})
        if call.map is not None:
            items = _known_count(call.map.over, input)
            _body_risky(call, ids[i], i, (), items, i in tainted, risk, get, threshold, out)
    return out


def _body_risky(map_call: Call, map_id: str, index: int, path: tuple, items: int | None, tainted: bool,
                risk: Callable[[Call], Risk], get: Callable[[str], Any], threshold: Risk, out: list[dict]) -> None:
    from ..maps import body_ids

    spec = map_call.map
    bids = body_ids(spec)
    # data read from this machine inside the body (or the list itself) reaches the body's
    # later calls: a network sink among them sends it (the run-time taint set is exact;
    # this is what can be said before the run)
    local = tainted
    for k, call in enumerate(spec.body):
        role = role_of(call.tool, get(call.tool))
        r = risk(call)
        why = None
        if role == "network-sink" and local and r < RAISED_TO:
            r, why = RAISED_TO, f"sends data read from this machine (through map {map_id}) to the network"
        tid = f"{map_id}[*].{bids[k]}"
        if r >= threshold:
            out.append({"id": tid, "tool": call.tool, "risk": r.label, "index": index, "body": [*path, k],
                        "map": map_id, "items": items, **({"why": why} if why else {})})
        if role == "local-source":
            local = True
        if call.map is not None:
            _body_risky(call, tid, index, (*path, k), None, local, risk, get, threshold, out)


def _known_count(over: Any, input: Any) -> int | None:
    """A map's item count when the list is known before the run (a literal, the input)."""
    if isinstance(over, Literal):
        return len(over.value) if isinstance(over.value, list) else None
    if isinstance(over, Reference) and over.kind == "input" and over.query is None and input is not None:
        from .state import MISSING, get_path

        v = get_path(input, tuple(over.path))
        return len(v) if v is not MISSING and isinstance(v, list) else None
    return None


def _tainted_calls(flow: Any, calls: Sequence[Call], get: Callable[[str], Any]) -> set[int]:
    """Top-level calls whose inputs (or own results) are data read from this machine."""
    roles = {t: role_of(t, get(t)) for t in {c.tool for c in calls}}
    if "local-source" not in roles.values():
        return set()
    order, _cyclic = flow.topo_order()
    writers = flow.read_writers
    out: set[int] = set()
    for i in order:
        if roles[calls[i].tool] == "local-source" or any(w in out for k in flow.read_range(i) for w in writers[k]):
            out.add(i)
    return out


# -- the gate ------------------------------------------------------------------------------

@dataclass
class ApprovalScope:
    """What an approval covers: template id -> the risk approved for it; the maps whose
    item count was unknown when approved (each asks once, with its count)."""

    risks: dict[str, Risk] = field(default_factory=dict)
    count_unknown: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, entries: Iterable[dict]) -> "ApprovalScope":
        scope = cls()
        for e in entries:
            scope.risks[e["id"]] = Risk.parse(e["risk"])
            if "map" in e and e.get("items") is None:
                scope.count_unknown.add(e["id"])
        return scope


@dataclass
class Admission:
    """The gate's verdict for one call: ``ask`` with the risk and why, or pass (``ask`` False)."""

    ask: bool
    risk: Risk = Risk.NONE
    why: str | None = None
    group: str | None = None  # a map instance asked once for all its items


_PASS = Admission(False)


class CallGate:
    """One run's gate (see the module docstring).  Built by the scheduler from its options;
    ``spec_of(i)`` and ``id_of(i)`` read the run's calls."""

    def __init__(self, opts: Any, spec_of: Callable[[int], Any], id_of: Callable[[int], str]) -> None:
        self.threshold: Risk = opts.approval_risk
        self.ask_every = bool(opts.approve_calls)
        self.scope: ApprovalScope = opts.approved if opts.approved is not None else ApprovalScope()
        self.taint: TaintSet = opts.taint if opts.taint is not None else TaintSet()
        self.max_calls: int | None = opts.max_calls
        self.max_expanded: int | None = opts.max_expanded_calls
        self._spec_of = spec_of
        self._id_of = id_of
        self._risk: dict[tuple, Risk] = {}       # (tool, @risk) -> effective risk
        self._role: dict[str, str | None] = {}   # tool -> data-flow role
        self._plain: dict[tuple, bool] = {}      # (tool, @risk) -> passes whatever its arguments
        # tool -> whether its results are local data (read by the runner for each result)
        self.local_sources: dict[str, bool] = {}
        self.written = 0                          # calls of the plan (and streamed arrivals)
        self.expanded = 0                         # calls created by expanding maps
        self.map_counts: dict[str, int] = {}      # map instance -> its item count
        self.groups: dict[str, asyncio.Future] = {}  # map instance -> its one decision

    # -- budget ----------------------------------------------------------------------

    def count_written(self, n: int) -> None:
        self.written += n

    def expand(self, map_id: str, items: int, body: int) -> ErrorInfo | None:
        """Charge a map's items (``items`` x ``body`` calls) before any is created."""
        self.map_counts[map_id] = items
        new = items * body
        if self.max_expanded is not None and self.expanded + new > self.max_expanded:
            return ErrorInfo(PLAN_TOO_MANY_CALLS,
                             f"map {map_id} would create {items:,} item(s) x {body} call(s) = {new:,} calls; with "
                             f"the {self.expanded:,} already created that is over the run's limit of "
                             f"{self.max_expanded:,} expanded calls (max_expanded_calls)")
        total = self.written + self.expanded + new
        if self.max_calls is not None and total > self.max_calls:
            return ErrorInfo(PLAN_TOO_MANY_CALLS,
                             f"map {map_id} would create {new:,} calls ({items:,} item(s) x {body}); the run "
                             f"would then have {total:,} calls, over its budget of {self.max_calls:,} (max_calls)")
        self.expanded += new
        return None

    # -- taint -----------------------------------------------------------------------

    def role(self, tool: str, spec: Any) -> str | None:
        r = self._role.get(tool, _UNSEEN)
        if r is _UNSEEN:
            r = self._role[tool] = role_of(tool, spec)
        return r

    def observe(self, tool: str, spec: Any, value: Any) -> None:
        """A call's result was written: local data joins the session's taint set.  (The
        runner first reads ``local_sources`` itself: most results are not local data.)"""
        source = self.local_sources.get(tool)
        if source is None:
            source = self.local_sources[tool] = self.role(tool, spec) == "local-source"
        if source:
            self.taint.add(value)

    # -- approval --------------------------------------------------------------------

    def static_risk(self, call: Call, spec: Any) -> Risk:
        key = (call.tool, call.risk)
        r = self._risk.get(key)
        if r is None:
            r = self._risk[key] = effective_risk(call, spec)
        return r

    def may_ask(self, i: int, call: Call) -> bool:
        """Whether call ``i`` may stop at the gate (a durable run then commits no intent
        before the answer).  Conservative: it may still pass."""
        plain = self._plain.get((call.tool, call.risk))
        if plain or (plain is None and self._is_plain(i, call)):  # (the common call: it never stops)
            return False
        spec = self._spec_of(i)
        if self.static_risk(call, spec) >= self.threshold:
            return True
        return bool(self.taint) and self.role(call.tool, spec) == "network-sink"

    def _is_plain(self, i: int, call: Call) -> bool:
        """Call ``i`` passes whatever its arguments: (tool, @risk) -> below the threshold and
        not a network sink (which local data in the session could raise), kept in ``_plain``."""
        key = (call.tool, call.risk)
        plain = self._plain.get(key)
        if plain is None:
            spec = self._spec_of(i)
            plain = self._plain[key] = (self.static_risk(call, spec) < self.threshold
                                        and self.role(call.tool, spec) != "network-sink")
        return plain

    def check(self, i: int, call: Call, args: dict) -> Admission:
        """The verdict for call ``i`` about to start with ``args``."""
        # the common call passes at one dict lookup (see _is_plain)
        plain = self._plain.get((call.tool, call.risk))
        if plain or (plain is None and self._is_plain(i, call)):
            return _PASS
        spec = self._spec_of(i)
        r = self.static_risk(call, spec)
        why = None
        if self.taint and r < RAISED_TO and self.role(call.tool, spec) == "network-sink":
            piece = self.taint.carries(args)
            if piece is not None:
                r, why = RAISED_TO, (f"its arguments carry data read from this machine "
                                     f"({_short(piece)}) to the network")
        if r < self.threshold:
            return _PASS
        cid = self._id_of(i)
        if self.ask_every:  # every risky call asks; a map's items by one question (unless tainted)
            if why is None and "[" in cid:
                group = _map_instance(cid)
                fut = self.groups.get(group)
                if fut is not None and fut.done() and fut.result():
                    return _PASS
                return Admission(True, r, why, group)
            return Admission(True, r, why)
        tid = template_id(cid)
        granted = self.scope.risks.get(tid)
        if granted is None or granted < r:
            return Admission(True, r, why)
        if tid in self.scope.count_unknown:
            group = _map_instance(cid)
            fut = self.groups.get(group)
            if fut is None or not fut.done() or not fut.result():
                return Admission(True, r, why, group)
        return _PASS

    async def decide_group(self, group: str, ask: Callable[[], Any]) -> bool:
        """One decision for every item of a map instance: the first item asks, the others wait."""
        fut = self.groups.get(group)
        if fut is None:
            fut = self.groups[group] = asyncio.get_running_loop().create_future()
            try:
                ok = bool(await ask())
            except BaseException:
                del self.groups[group]
                fut.cancel()
                raise
            fut.set_result(ok)
            return ok
        return bool(await asyncio.shield(fut))


_UNSEEN: Any = object()


def _short(text: str, limit: int = 40) -> str:
    from .approval import escape_hidden

    text = escape_hidden(text)
    return repr(text if len(text) <= limit else text[:limit - 1] + "…")
