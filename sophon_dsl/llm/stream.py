"""Streamed dispatch: parse the model's reply while it arrives and run each call at once.

Three pieces:

* :class:`StatementSplitter` cuts a stream of text deltas into complete DSL
  statements.  A statement is complete when a newline (or ``;``) arrives at
  bracket depth 0, outside strings and comments.  Attribute lines
  (``@risk(high)`` alone on a line) wait for the call they decorate; ``#``
  comments are dropped; Markdown code fences are ignored.
* :class:`StreamScheduler` is the runtime's :class:`~sophon_dsl.runtime.scheduler.Scheduler`
  accepting calls while the reply streams.  While the stream is open, a read
  *waits*, because a writer may still arrive (in ``written`` order only a read
  with no value yet waits; see :mod:`sophon_dsl.runtime.feed`); ``input`` never waits.
  When the stream closes, every waiting read settles exactly as in the runtime
  (missing -> ``Ref.Unresolved``, broken -> skipped).
* :class:`StreamTurn` ties them together for one turn of the agent loop: each
  call is checked on arrival against the calls seen so far; a call that fails
  is *not dispatched* (it is recorded as failed with ``Plan.Invalid``, so every
  call reading its output is skipped when the stream closes); the others go to
  the scheduler at once.  At the end of the stream the whole-plan checks
  (reads nothing writes, cycles, ...) run, and calls they condemn that have not
  started are refused too.  The rule is written in ``spec/language.md``
  (Streaming) and ``docs/llm.md``.

A reply may also be seed-shaped JSON (``{"calls": [...], "output": ...}`` or a
list of calls): it is detected from its first character and scanned as it
arrives (:mod:`.json_stream`): each call object is read, checked and dispatched
the moment its closing brace arrives, through the same per-call checks as a DSL
statement, so both forms obey one rule; the output comes from the whole
document at the end.
In lazy mode (``dispatch=False``) nothing runs while streaming: the whole plan
is checked first and :meth:`StreamTurn.execute` runs it only if it is clean.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..errors import OptionError
from ..checks import Checker, deferred_codes
from ..compiler import MAP_SPEC, effective_registry
from ..diagnostics import Diagnostic
from ..instances import instance_kind, route_instance  # re-exported
from ..maps import MAP_TOOL, known_calls
from ..model import Call, Mode, Plan, Value
from ..outputpath import prescribe_call
from ..runtime.errors import OUTPUT_INVALID, REF_UNRESOLVED, ErrorInfo, PlanInvalid
from ..runtime.events import EventBus
from ..runtime.feed import LATE_WRITER, ORDERS, GrowingPlan
from .json_stream import JsonItem, JsonReplyScanner
from ..runtime.invoker import Invocation, LocalInvoker
from ..runtime.protocols import LatentExecutor, ScopedLatentExecutor
from ..runtime.result import RunResult
from ..runtime.scheduler import RunOptions, Scheduler
from ..runtime.store import StateStore
from ..tools import ToolRegistry

if TYPE_CHECKING:  # (named in annotations only)
    from .delegate import DelegateExecutor

__all__ = [
    "DEFERRED_CODES", "PLAN_INVALID", "Statement", "StatementSplitter", "StreamScheduler", "StreamTurn",
    "TurnOutcome", "diagnostic_error", "route_instance", "strip_fences",
]

PLAN_INVALID = "Plan.Invalid"

# Checks that need the whole plan (the whole-plan rules' codes): they run when the stream closes.
DEFERRED_CODES = deferred_codes()

_ATTR_NAME = re.compile(r"@[A-Za-z_][\w.]*")


def _attributes_only(text: str) -> bool:
    """Is ``text`` nothing but attributes (``@risk(high) @retry(3)``), waiting for its call?"""
    i, n = 0, len(text)
    seen = False
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i == n:
            return seen
        m = _ATTR_NAME.match(text, i)
        if m is None:
            return False
        seen = True
        i = m.end()
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == "(":
            depth, quote, esc = 0, None, False
            while i < n:
                ch = text[i]
                if quote:
                    if esc:
                        esc = False
                    elif ch == "\\":
                        esc = True
                    elif ch == quote:
                        quote = None
                elif ch in "\"'":
                    quote = ch
                elif ch in "([{":
                    depth += 1
                elif ch in ")]}":
                    depth -= 1
                    if depth == 0:
                        i += 1
                        break
                i += 1
            else:
                return False


# ---------------------------------------------------------------------------
# Splitting the stream into statements


@dataclass(frozen=True)
class Statement:
    text: str          # the statement's text, comments removed, newlines inside kept
    line: int          # 1-based line of the statement's first character in the reply
    column: int        # 1-based column of that character
    end_line: int      # line of the terminator


class StatementSplitter:
    """Feed text deltas, get complete statements back as soon as they are complete."""

    def __init__(self) -> None:
        self._buf: list[str] = []
        self._depth = 0
        self._quote: str | None = None
        self._escape = False
        self._comment = False
        self._line = 1
        self._col = 1
        self._start = (1, 1)

    def feed(self, text: str) -> list[Statement]:
        out: list[Statement] = []
        buf = self._buf
        for ch in text:
            if self._comment:
                if ch == "\n":
                    self._comment = False
                    self._terminate(out, newline=True)
                self._advance(ch)
                continue
            if self._quote is not None:
                buf.append(ch)
                if self._escape:
                    self._escape = False
                elif ch == "\\":
                    self._escape = True
                elif ch == self._quote or ch == "\n":   # a newline ends a broken string
                    self._quote = None
                self._advance(ch)
                continue
            if ch == "#":
                self._comment = True
            elif ch in "\"'":
                self._quote = ch
                buf.append(ch)
            elif ch in "([{":
                self._depth += 1
                buf.append(ch)
            elif ch in ")]}":
                self._depth = max(self._depth - 1, 0)
                buf.append(ch)
            elif ch == "\n":
                if self._depth == 0:
                    self._terminate(out, newline=True)
                else:
                    buf.append(ch)
            elif ch == ";" and self._depth == 0:
                self._advance(ch)
                self._terminate(out, newline=False)
                continue
            else:
                buf.append(ch)
            self._advance(ch)
        return out

    def close(self) -> list[Statement]:
        """The last statement, if the reply did not end with a newline."""
        out: list[Statement] = []
        self._comment = False
        self._quote = None
        self._depth = 0
        self._terminate(out, newline=False, final=True)
        return out

    def _advance(self, ch: str) -> None:
        if ch == "\n":
            self._line += 1
            self._col = 1
        else:
            self._col += 1

    def _terminate(self, out: list[Statement], *, newline: bool, final: bool = False) -> None:
        text = "".join(self._buf)
        stripped = text.strip()
        if not stripped or stripped.startswith("```"):
            self._reset(newline)
            return
        if not final and _attributes_only(stripped):
            if newline:
                self._buf.append("\n")   # attributes wait for the call they decorate
            else:
                self._buf.append(" ")
            return
        lead = len(text) - len(text.lstrip())
        line, col = self._start
        for ch in text[:lead]:
            if ch == "\n":
                line, col = line + 1, 1
            else:
                col += 1
        out.append(Statement(stripped, line, col, self._line))
        self._reset(newline)

    def _reset(self, newline: bool) -> None:
        self._buf.clear()
        # the next statement starts after the terminator
        self._start = (self._line + 1, 1) if newline else (self._line, self._col)


def strip_fences(text: str) -> str:
    """Blank out Markdown code-fence lines (```dsl ... ```), keeping line numbers."""
    return "\n".join("" if ln.lstrip().startswith("```") else ln for ln in text.split("\n"))


class _LeadScan:
    """Whether a reply is still only blank lines and Markdown fence lines, so that
    :func:`_detect_form` cannot tell its form yet, read one delta at a time (asking
    ``_detect_form`` the whole reply at each delta would cost its square: 100 KB of
    blank lines in 16-character deltas took minutes)."""

    def __init__(self) -> None:
        self.lead = ""  # the current line's first characters, from its first non-space one (<= 3)

    def feed(self, delta: str) -> bool:
        """True while the form is still unknown (``_detect_form`` would say None)."""
        lead = self.lead
        for k, line in enumerate(delta.split("\n")):
            if k:  # a line ended: a fence line is blank to the reader, a line starting with ` is text
                if lead and lead != "```":
                    return False
                lead = ""
            if len(lead) < 3:
                piece = line if lead else line.lstrip()
                if piece:
                    if not lead and piece[0] != "`":
                        return False
                    lead = (lead + piece)[:3]
        self.lead = lead
        return True


def _detect_form(text: str) -> str | None:
    body = strip_fences(text).lstrip()
    if not body or (body[0] == "`" and "\n" not in body):
        return None  # nothing yet, or a fence line still arriving (```json split across deltas)
    return "json" if body[0] in "{[" else "dsl"


# ---------------------------------------------------------------------------
# Instances: `_instance` routes a call's reads and writes to that instance's data


# ---------------------------------------------------------------------------
# The scheduler that accepts calls while the reply streams


class StreamInvoker:
    """The stream's :class:`~sophon_dsl.runtime.invoker.Invoker`: a ``_delegate`` call goes to
    the delegate (with the run's data), a latent call with ``_scopes`` to an executor that
    offers ``execute_scoped``; everything else runs as in a plain run."""

    def __init__(self, inner: LocalInvoker, delegate: DelegateExecutor | None = None,
                 executor: LatentExecutor | None = None) -> None:
        self.inner = inner
        self.delegate = delegate
        self.executor = executor

    def direct(self, call: Call, spec: Any) -> Any:
        if call.delegate and self.delegate is not None:
            return None  # must go through invoke()
        return self.inner.direct(call, spec)

    async def invoke(self, inv: Invocation) -> Any:
        call, spec, ex = inv.call, inv.spec, self.executor
        if call.inline_output is None and call.delegate and self.delegate is not None:
            return await self.delegate.execute(inv.latent_request(), context=inv.state())
        if call.inline_output is None and (spec is None or spec.func is None) and call.activity is None \
                and isinstance(ex, ScopedLatentExecutor) and call.scopes:
            return await ex.execute_scoped(inv.latent_request(), inv.state())
        return await self.inner.invoke(inv)

    async def open(self) -> None:
        await self.inner.open()

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner.aclose()


class StreamScheduler:
    """A run whose plan grows while the model is still writing it: the runtime's
    :class:`~sophon_dsl.runtime.scheduler.Scheduler` fed by a
    :class:`~sophon_dsl.runtime.feed.GrowingPlan`.

    Use: construct, start :meth:`run` as a task, :meth:`add_call` as calls arrive,
    :meth:`close_stream` at the end of the reply, then await the task.
    """

    def __init__(self, header: Plan, registry: ToolRegistry, *, input: Any = None, state: Any = None,
                 context: dict | None = None, options: RunOptions | None = None, bus: EventBus | None = None,
                 plan_id: str | None = None, delegate: DelegateExecutor | None = None, order: str = "any",
                 store: StateStore | None = None, streamed: bool = True) -> None:
        opts = options or RunOptions()
        # streamed=False: the whole plan is added before it runs (lazy, after_reply): reads wait for the close
        self.feed = GrowingPlan(header, order, streamed)
        local = LocalInvoker(opts.executor, opts.max_threads or opts.max_workers)
        invoker = StreamInvoker(local, delegate, opts.executor)
        self.scheduler = Scheduler(self.feed, registry, input=input, state=state, context=context,
                                   options=opts, bus=bus, plan_id=plan_id, invoker=invoker, store=store)
        self.scheduler.on_dispatch = self._dispatched
        self.delegate = delegate
        self.dispatched_at: dict[int, float] = {}
        self.arrived_at: dict[int, float] = {}

    @property
    def records(self) -> list:
        return self.scheduler.records

    @property
    def n(self) -> int:
        return self.scheduler.n

    def is_decided(self, i: int) -> bool:
        return self.scheduler.is_decided(i)

    def _dispatched(self, i: int) -> None:
        self.dispatched_at.setdefault(i, time.perf_counter())

    def add_call(self, call: Call, call_id: str, *, refused: ErrorInfo | None = None,
                 arrived: float | None = None) -> int:
        """Append ``call``; dispatch it at once if its inputs are decided (and it is not refused).

        ``arrived`` is when its last token came in (``time.perf_counter()``), for latency stats.
        Returns the call's index in the run (a map's item calls join the run too, so it may
        be past the number of calls that arrived)."""
        at = arrived if arrived is not None else time.perf_counter()
        i = self.feed.add(call, call_id, refused)
        self.arrived_at[i] = at
        return i

    def set_registry(self, registry: ToolRegistry) -> None:
        self.scheduler.set_registry(registry)

    def refuse(self, i: int, error: ErrorInfo) -> None:
        """Record call ``i`` as failed without running it (it failed a check)."""
        self.feed.refuse(i, error)

    def close_stream(self, output: Value | None = None) -> None:
        """The reply is complete: settle every waiting read as the runtime does."""
        self.feed.close(output)

    def cancel(self) -> None:
        self.scheduler.cancel()

    async def run(self) -> RunResult:
        return await self.scheduler.run()


# ---------------------------------------------------------------------------
# One turn


def diagnostic_error(d: Diagnostic) -> dict:
    """The ``error`` half of an error message for a diagnostic."""
    out: dict[str, Any] = {"code": d.code, "message": d.message}
    if d.span is not None:
        out["line"], out["column"] = d.span.line, d.span.column
    return out


@dataclass
class TurnOutcome:
    plan: Plan
    reply: str
    form: str                       # "dsl" or "json"
    errors: list[dict]              # error messages {call, error}
    diagnostics: list[Diagnostic]   # everything the checks said (warnings too)
    result: RunResult | None        # None when nothing ran (lazy plan failing check, rejected)
    output: Any = None
    status: str = "succeeded"       # run status, or "invalid" / "rejected"
    refused: list[str] = field(default_factory=list)
    dispatch_latency: dict[str, float] = field(default_factory=dict)   # call id -> s from arrival to dispatch

    @property
    def calls(self) -> list[dict]:
        if self.result is None:
            ids = self.plan.call_ids()
            return [{"id": cid, "tool": c.tool, "status": "pending", "attempts": 0, "error": None,
                     "reason": None, "started_at": None, "ended_at": None}
                    for cid, c in zip(ids, self.plan.calls)]
        return [c.to_json() for c in self.result.calls]

    @property
    def state(self) -> dict:
        return dict(self.result.state) if self.result is not None else {}


class StreamTurn:
    """Parse, check and (in eager mode) dispatch one streamed reply.

    ``feed(delta)`` as text arrives, then ``await finish()``.  ``initial`` maps each
    kind (``state``, ``data``, ``state@X`` ...) to the data earlier turns left.
    """

    def __init__(self, registry: ToolRegistry, *, mode: Mode | str = Mode.EAGER, input: Any = None,
                 initial: dict[str, Any] | None = None, state_schema: Any = None, max_calls: int | None = 100,
                 options: RunOptions | None = None, bus: EventBus | None = None, plan_id: str | None = None,
                 delegate: DelegateExecutor | None = None, instance_inputs: dict[str, Any] | None = None,
                 dispatch: bool | None = None, on_call: Callable[[str, Call, list[Diagnostic]], Any] | None = None,
                 order: str = "any", store: StateStore | None = None,
                 on_start: Callable[[Scheduler], Any] | None = None):
        if order not in ORDERS:
            raise OptionError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
        self.order = order
        self.mode = Mode(mode)
        self.registry = registry
        self.input = input
        self.initial = dict(initial or {})
        self.max_calls = max_calls
        self.options = options or RunOptions()
        self.bus = bus or EventBus()
        self.plan_id = plan_id
        self.delegate = delegate
        self.instance_inputs = instance_inputs or {}
        self.dispatch = (self.mode is Mode.EAGER) if dispatch is None else dispatch
        self.on_call = on_call
        # a durable agent turn (sophon_dsl.durable.agent_run): the scheduler's state store, and
        # what to do with the scheduler just before it starts (every call known so far has arrived)
        self.store = store
        self.on_start = on_start
        self.header = Plan(mode=self.mode, state_schema=state_schema)
        self.calls: list[Call] = []
        self.ids: list[str] = []
        self.output: Value | None = None
        self.errors: list[dict] = []
        self.provider_error: dict | None = None
        # the reply was cut off mid-stream (a provider failure, or a recorded reply cut by a
        # crash): its unfinished end is dropped at close_stream, not reported as an error
        self.cut = False
        self.diagnostics: list[Diagnostic] = []
        self.refused: dict[int, ErrorInfo] = {}
        self._text: list[str] = []
        self._form: str | None = None
        self._lead = _LeadScan()  # decides when the form can be known, at the cost of each delta
        self._splitter = StatementSplitter()
        self._json: JsonReplyScanner | None = None
        self._known_kinds = {k for k in self.initial} | {"input", "state", "data"}
        self._known_kinds |= {k.split("@", 1)[0] for k in self.initial}
        self._sched: StreamScheduler | None = None
        self._task: asyncio.Task | None = None
        self._arrival: float | None = None
        self._closed: Plan | None = None
        self._checker: Checker | None = None
        self._maps = False  # a map arrived: the builtin map tool joins the checker's and the run's tools
        # each call's index in the run (item calls of maps join the run between arrivals), and back
        self._at: list[int] = []
        self._turn_index: dict[int, int] = {}
        registry.prepare_schemas()  # now, not when the first call arrives
        if self.dispatch:
            self._start_scheduler()

    # -- scheduler ------------------------------------------------------------

    def _context(self) -> dict:
        ctx = {k: v for k, v in self.initial.items() if k != "state"}
        for inst, data in self.instance_inputs.items():
            if data is not None:
                ctx[instance_kind("input", inst)] = data
        return ctx

    def _start_scheduler(self) -> None:
        self._sched = StreamScheduler(self.header, self._run_tools(),
                                      input=self.input, state=self.initial.get("state"),
                                      context=self._context(), options=self.options, bus=self.bus,
                                      plan_id=self.plan_id, delegate=self.delegate, order=self.order,
                                      store=self.store, streamed=self.dispatch)
        self._task = asyncio.ensure_future(self._run_scheduler(self._sched))

    async def _run_scheduler(self, sched: StreamScheduler) -> RunResult:
        if self.on_start is not None:
            self.on_start(sched.scheduler)
        return await sched.run()

    @property
    def scheduler(self) -> StreamScheduler | None:
        return self._sched

    # -- feeding ----------------------------------------------------------------

    @property
    def text(self) -> str:
        return "".join(self._text)

    def feed(self, delta: str) -> None:
        if not delta:
            return
        self._arrival = time.perf_counter()
        self._text.append(delta)
        if self._form is None:
            if self._lead.feed(delta):  # still only blank and fence lines: the form is not known yet
                return
            self._form = _detect_form(self.text) or "dsl"
            if self._form == "dsl":
                for st in self._splitter.feed(self.text):
                    self._statement(st)
            elif self._form == "json":
                self._json = JsonReplyScanner()
                for item in self._json.feed(self.text):
                    self._json_item(item)
            return
        if self._form == "dsl":
            for st in self._splitter.feed(delta):
                self._statement(st)
        elif self._json is not None:
            for item in self._json.feed(delta):
                self._json_item(item)

    def _plan_now(self, calls: Iterable[Call] | None = None, output: Value | None = None) -> Plan:
        return replace(self.header, calls=tuple(self.calls if calls is None else calls), output=output,
                       source=self.text, form=self._form or "dsl")

    def _head_now(self) -> Plan:
        """The header as the checker sees it: no calls, and no source text (the checker does not
        read it; joining the reply so far at every header statement cost the reply's square)."""
        return replace(self.header, calls=(), output=None, form=self._form or "dsl")

    def _statement(self, st: Statement) -> None:
        from ..syntax.dsl_parser import parse_dsl

        # the statement alone, placed at its line (padding it with the lines above would
        # make every statement cost as much as the reply so far)
        plan, diags = parse_dsl(" " * (st.column - 1) + st.text, first_line=st.line)
        errs = [d for d in diags if d.is_error]
        if errs:
            self.diagnostics.extend(diags)
            for d in errs:
                self.errors.append({"call": st.text, "error": diagnostic_error(d)})
            return
        self._merge_header(plan)
        if plan.output is not None:
            self.output = plan.output
        for call in plan.calls:
            self._arrive(call, st.text)

    def _json_item(self, item: JsonItem) -> None:
        """A call object (or a header member) of a JSON reply just closed: read it in place,
        then the call goes through the same checks and dispatch as a DSL statement."""
        from ..loader import parse

        res = parse(item.document, "json")
        errs = [d for d in res.diagnostics if d.is_error]
        if item.kind == "member":
            if not errs:  # (a broken member is reported by the whole document at the end)
                self._merge_header(replace(res.plan, calls=(), output=None))
            return
        if errs:
            self.diagnostics.extend(res.diagnostics)
            for d in errs:
                self.errors.append({"call": item.text, "error": diagnostic_error(d)})
            return
        for call in res.plan.calls:
            self._arrive(call, item.text)

    def _merge_header(self, plan: Plan) -> None:
        changes: dict[str, Any] = {}
        for name in ("goal", "id", "input_schema", "state_schema", "output_schema"):
            val = getattr(plan, name)
            if val is not None:
                changes[name] = val
        if plan.tools:
            changes["tools"] = self.header.tools + plan.tools
        if changes:
            self.header = replace(self.header, **changes)
            if self._checker is not None:
                head = self._head_now()
                self._checker.set_header(head, self._check_tools(head))
            if self._sched is not None:  # the run checks writes and the output against its schemas
                self._sched.feed.set_header(self.header)
            if "tools" in changes and self._sched is not None:
                self._sched.set_registry(self._run_tools())

    def _check_tools(self, head: Plan) -> ToolRegistry:
        """The checker's tools: the compiler's (plus the builtin map tool once a map arrived)."""
        reg = effective_registry(head, self.registry)
        return reg.with_tools([MAP_SPEC]) if self._maps and reg.given(MAP_TOOL) is None else reg

    def _run_tools(self) -> ToolRegistry:
        """The run's tools: the registry and the reply's declarations (and the map tool)."""
        reg = self.registry
        if self._maps and reg.given(MAP_TOOL) is None:
            reg = reg.with_tools([MAP_SPEC])
        return reg.with_plan_decls(self.header.tools)

    def _map_arrived(self) -> None:
        """The first map of the reply: the checker and the run learn the builtin map tool."""
        self._maps = True
        if self._checker is not None:
            head = self._head_now()
            self._checker.set_header(head, self._check_tools(head))
        if self._sched is not None:
            self._sched.set_registry(self._run_tools())

    def _check(self) -> Checker:
        """The checker the calls go through as they arrive (built on the first call)."""
        if self._checker is None:
            head = self._head_now()
            self._checker = Checker(head, self._check_tools(head),
                                    require_executor=self.options.executor is None)
        return self._checker

    # -- checking one call on arrival ------------------------------------------

    def _keep(self, d: Diagnostic) -> bool:
        """Drop what earlier turns' data already answers (like the runtime's initial kinds)."""
        if d.code == "E306" and (d.data or {}).get("kind") in self._known_kinds:
            return False
        if d.code in ("E301", "W303") and self.initial:
            return False
        return True

    def _arrive(self, call: Call, text: str | None = None) -> None:
        if call.map is not None and not self._maps:
            self._map_arrived()
        checker = self._check()
        call = prescribe_call(call, checker.ctx.tools.get(call.tool))  # the tool's own output path
        i = len(self.calls)
        self.calls.append(call)
        cid = call.id if call.id is not None else f"c{i + 1}"
        self.ids.append(cid)
        # the per-call rules on this call alone, against the calls so far (no recompile)
        diags = [d for d in checker.add_call(call, cid) if d.code not in DEFERRED_CODES and self._keep(d)]
        if self.max_calls is not None and i >= self.max_calls:
            diags = [Diagnostic("E305", f"call {cid} is beyond the limit of {self.max_calls} calls per plan",
                                call.span or call.tool_span)]
        self.diagnostics.extend(diags)
        errs = [d for d in diags if d.is_error]
        if self.on_call is not None:
            self.on_call(cid, call, diags)
        if errs:
            self._refuse(i, call, errs, text)
        elif self._sched is not None:
            at = self._add(i, route_instance(call, self.instance_inputs), cid, arrived=self._arrival)
            if at in self._sched.feed.late:  # written order: it came after a read of its output
                self._late_writer(i, call, text)

    def _add(self, i: int, call: Call, cid: str, **kw: Any) -> int:
        """Hand turn call ``i`` to the run; its index there."""
        assert self._sched is not None
        at = self._sched.add_call(call, cid, **kw)
        self._at.append(at)
        self._turn_index[at] = i
        return at

    def _late_writer(self, i: int, call: Call, text: str | None) -> None:
        err = self._sched.records[self._at[i]].error if self._sched is not None else None
        message = err.cause.removeprefix(f"{LATE_WRITER} ") if err is not None else "written too late"
        d = Diagnostic(LATE_WRITER, message, call.span or call.tool_span)
        self.diagnostics.append(d)
        self.errors.append({"call": text or _call_text(call), "id": self.ids[i], "error": diagnostic_error(d)})
        self.refused[i] = err if err is not None else ErrorInfo(PLAN_INVALID, message)

    def _refuse(self, i: int, call: Call, errs: list[Diagnostic], text: str | None) -> None:
        cid = self.ids[i]
        shown = text or _call_text(call)
        for d in errs:
            self.errors.append({"call": shown, "id": cid, "error": diagnostic_error(d)})
        err = ErrorInfo(PLAN_INVALID, "; ".join(f"{d.code} {d.message}" for d in errs))
        self.refused[i] = err
        if self._sched is not None:
            if i < len(self._at):
                self._sched.refuse(self._at[i], err)
            else:
                self._add(i, route_instance(call, self.instance_inputs), cid, refused=err)

    # -- the end of the reply ---------------------------------------------------

    def _finish_json(self, cut: bool = False) -> None:
        """The end of a JSON reply: its output (and anything the scan could not place) from
        the whole document; calls read while it streamed are not read again.  ``cut``: the
        provider failed mid-reply, so a document that does not parse is only cut short."""
        from ..loader import parse

        if self._json is None or self._json.calls_seen == 0:
            self._parse_json(cut)
            return
        res = parse(strip_fences(self.text), "json")
        if cut and any(d.is_error for d in res.diagnostics):
            return
        told = {_where(d) for d in self.diagnostics}
        for d in res.diagnostics:
            if _where(d) in told:
                continue
            self.diagnostics.append(d)
            if d.is_error:
                self.errors.append({"call": None, "error": diagnostic_error(d)})
        self.output = res.plan.output

    def _parse_json(self, cut: bool = False) -> None:
        from ..loader import parse

        res = parse(strip_fences(self.text), "json")
        errs = [d for d in res.diagnostics if d.is_error]
        if errs and cut:  # no call arrived whole before the provider failed: nothing to keep
            return
        if errs:
            self.diagnostics.extend(res.diagnostics)
            for d in errs:
                self.errors.append({"call": None, "error": diagnostic_error(d)})
            return
        self._merge_header(replace(res.plan, calls=(), output=None))
        self.output = res.plan.output
        for call in res.plan.calls:
            self._arrive(call)

    def close_stream(self) -> Plan:
        """No more text: flush, parse JSON replies, run the whole-plan checks (once)."""
        if self._closed is not None:
            return self._closed
        if self.provider_error is not None:
            # the cause, not its symptom: a reply the provider cut short (or never sent) is not
            # the model's fault, so it is reported instead of Reply.Empty
            self.errors.append({"call": None, "error": {"code": "Provider.Error", **self.provider_error}})
        cut = self.cut or self.provider_error is not None
        if self._form is None:
            self._form = _detect_form(self.text) or "dsl"
            if not cut and not strip_fences(self.text).strip():
                self.errors.append({"call": None, "error": {
                    "code": "Reply.Empty", "message": "the reply was empty: write calls, or return the final output"}})
        # A cut reply ends where the connection broke (or the process died), not where the
        # model stopped: its unfinished last statement (or unclosed JSON document) is
        # dropped, not reported as the model's syntax error; the calls that arrived whole stay.
        if self._form == "dsl":
            if not cut:
                for st in self._splitter.close():
                    self._statement(st)
        else:
            self._finish_json(cut)
        plan = self._plan_now(output=self.output)
        checker = self._check()
        found = [(i, d) for i, d in checker.finish(self.output) if self._keep(d)]
        self.diagnostics.extend(d for _, d in found)
        condemned: dict[int, list[Diagnostic]] = {}
        members: list[int] | None = None
        for idx, d in found:
            if not d.is_error:
                continue
            if d.code == "E302":  # every call on a cycle is refused, not only the one named
                if members is None:
                    members = sorted({j for comp in checker.flow.cycles() for j in comp})
                targets = members
            else:
                targets = [idx] if idx is not None else []
            for j in targets:
                condemned.setdefault(j, []).append(d)
            self.errors.append({"call": _call_text(self.calls[idx]) if idx is not None else None,
                                "id": self.ids[idx] if idx is not None else None,
                                "error": diagnostic_error(d)})
        if not self.dispatch and self.max_calls is not None:
            self._over_budget(condemned)
        for j in sorted(condemned):
            if j in self.refused:
                continue
            err = ErrorInfo(PLAN_INVALID, "; ".join(f"{x.code} {x.message}" for x in condemned[j]))
            self.refused[j] = err
            if self._sched is not None and j < len(self._at) and not self._sched.is_decided(self._at[j]):
                self._sched.refuse(self._at[j], err)
        self._closed = plan
        return plan

    def _over_budget(self, condemned: dict[int, list[Diagnostic]]) -> None:
        """A plan read whole before it runs (lazy, ``after_reply``) whose size is known to be over
        ``max_calls`` runs none of its calls: the calls written plus the items of every map whose
        list is known now (a literal, the input) are a lower bound of the calls it would run."""
        assert self.max_calls is not None
        size = known_calls(self.calls, self.input)
        if size <= self.max_calls:
            return
        d = Diagnostic("E305", f"the plan would run at least {size:,} calls (map items included), over the limit "
                               f"of {self.max_calls:,} calls per plan: none of its calls was started; write fewer "
                               "calls (a map over a list is one call per item)", None)
        self.diagnostics.append(d)
        self.errors.append({"call": None, "error": diagnostic_error(d)})
        for j in range(len(self.calls)):
            condemned.setdefault(j, []).append(d)

    async def execute_reply(self) -> TurnOutcome:
        """Run a reply read whole before any of its calls starts (``Agent(dispatch="after_reply")``):
        close the stream (the whole-plan checks), then start every call at once; calls the checks
        refused are recorded failed, as in a streamed turn."""
        plan = self.close_stream()
        if self._sched is None:
            self._start_scheduler()
        assert self._sched is not None
        for i in range(len(self._at), len(self.calls)):
            self._add(i, route_instance(self.calls[i], self.instance_inputs), self.ids[i], refused=self.refused.get(i))
        self._sched.close_stream(self.output)
        result = await self._task
        return self._outcome(plan, result, result.status)

    async def finish(self) -> TurnOutcome:
        """Close the stream (if not yet) and wait for the dispatched calls (eager mode)."""
        plan = self.close_stream()
        result = None
        status = "succeeded"
        if self._sched is not None:
            self._sched.close_stream(self.output)
            result = await self._refusable()
            status = result.status if result is not None else "invalid"
        elif any(d.is_error for d in self.diagnostics):
            status = "invalid"
        return self._outcome(plan, result, status)

    async def abort(self) -> None:
        """Cancel whatever was dispatched (the reply failed in a way the loop cannot use)."""
        if self._sched is not None and self._task is not None and not self._task.done():
            self._sched.cancel()
            self._sched.close_stream()
            await asyncio.gather(self._task, return_exceptions=True)

    async def execute(self) -> TurnOutcome:
        """Lazy mode: run the whole (already checked) plan now."""
        plan = self._plan_now(output=self.output)
        self._start_scheduler()
        assert self._sched is not None
        for i, (call, cid) in enumerate(zip(self.calls, self.ids)):
            self._add(i, route_instance(call, self.instance_inputs), cid)
        self._sched.close_stream(self.output)
        result = await self._refusable()
        return self._outcome(plan, result, result.status if result is not None else "invalid")

    async def _refusable(self) -> RunResult | None:
        """The turn's run result; None when the run was refused before any call started (an
        executor's preflight: a tool no worker can run): the model hears why, as for a call
        the checker refused, instead of the agent stopping on an exception."""
        try:
            return await self._task
        except PlanInvalid as exc:
            for d in exc.diagnostics:
                self.diagnostics.append(d)
                self.errors.append({"call": None, "error": diagnostic_error(d)})
            return None

    def _outcome(self, plan: Plan, result: RunResult | None, status: str) -> TurnOutcome:
        errors = list(self.errors)
        output = result.output if result is not None else None
        if result is not None:
            at = self._turn_index
            for i, rec in enumerate(result.calls):
                if (rec.status == "failed" and not rec.caught and at.get(i) not in self.refused
                        and rec.error is not None):
                    call = self.calls[at[i]] if i in at else self._sched.scheduler.calls[i]  # (or a map's item call)
                    errors.append({"call": _call_text(call), "id": rec.id, "error": rec.error.to_json()})
            if result.error is not None and result.error.error in (REF_UNRESOLVED, OUTPUT_INVALID):
                errors.append({"call": "return", "error": result.error.to_json()})  # the final output failed
        lat: dict[str, float] = {}
        if self._sched is not None:
            arrived = self._sched.arrived_at
            for i, t in self._sched.dispatched_at.items():
                if i in arrived:  # (a map's item calls never arrived: they are the map's)
                    lat[self.ids[self._turn_index[i]]] = t - arrived[i]
        return TurnOutcome(plan, self.text, self._form or "dsl", errors, list(self.diagnostics), result, output,
                           status, [self.ids[i] for i in sorted(self.refused)], lat)


def _where(d: Diagnostic) -> tuple:
    return (d.code, d.span.line, d.span.column) if d.span is not None else (d.code, d.message)


def _call_text(call: Call) -> str:
    from ..syntax.dsl_printer import format_call

    try:
        return format_call(call)
    except Exception:  # noqa: BLE001 - a message must never fail
        return call.tool
