"""The concurrent scheduler: eager data-flow dispatch on asyncio.

Each call starts the moment its inputs are settled (not in Kahn waves): when a
call ends, only the calls that read what it may have written are re-examined,
and every one of them whose inputs are now decided is dispatched at once.

Input decisions (deterministic, whatever the timing):

* a reference is *settled* when every other call that writes an overlapping
  path has ended; it then *has a value*, is *missing* (writers wrote, but
  nothing is at that path, or there are no writers and no initial data), or
  is *broken* (it has writers and none of them wrote: they failed, were
  skipped, or took another branch);
* ``a || b``: the leftmost alternative with a value, decided once every
  alternative to its left is settled; ``a && b``: all must have values, the
  value is the last;
* a call with a broken input is skipped (with the reason); otherwise a call
  with a missing input fails with ``Ref.Unresolved``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import time
from collections import deque
from math import isfinite
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

from ..compiler import fast_schema_check
from ..model import (Call, Expression, ListValue, Literal, ObjectValue, OutputMethod, Plan, Reference,
                     RetryPolicy, Risk, Template)
from ..tools import ToolRegistry, ToolSpec
from .analysis import Analysis, analyze, effective_risk, overlaps
from .approval import ApprovalRequest, decide
from .errors import (
    APPROVAL_REJECTED, PLAN_CANCELLED, PLAN_TIMEOUT, REF_UNRESOLVED, TOOL_FAILED, TOOL_INPUT_INVALID,
    TOOL_OUTPUT_INVALID, TOOL_TIMEOUT, ErrorInfo, RunError, error_from_exception, matches,
)
from .events import EventBus, preview
from .protocols import Branch, LatentRequest
from .result import CallRecord, RunResult, new_record
from .state import MISSING, StateLog, json_copy, now_iso, to_json_value

__all__ = ["RunOptions", "Scheduler", "render_text_value", "retry_delay", "schema_validator"]

TERMINAL = frozenset({"succeeded", "failed", "skipped", "cancelled"})

_SCALARS = frozenset({str, int, float, bool, type(None)})
_now = time.time
_perf = time.perf_counter
_UNSET: Any = object()

# Input states
_HAS, _MISSING, _BROKEN, _PENDING = 0, 1, 2, 3

# At most this many tasks are created in one burst (one pass of the event loop); further
# ready calls wait in a FIFO queue that the loop drains at once, burst by burst. Calls start
# in exactly the same order as when every task is created at once, but a 10,000-call wide
# plan no longer holds 10,000 unstarted tasks (and their coroutines, contexts, handles and
# arguments) alive at the same time, which the cyclic GC would promote and rescan.
_BURST = 256
_LATER = object()  # queued arguments not built yet (literal-only calls)


@dataclass
class RunOptions:
    """Every knob of a run (all optional). See docs/runtime.md."""

    max_concurrency: int | None = None        # concurrent tool invocations; None = unlimited
    max_workers: int | None = None            # thread pool size for sync tools
    timeout: float | None = None              # default per-call timeout (s); call @timeout wins
    max_time: float | None = None             # plan wall-clock limit (s) -> Plan.Timeout
    retry: Any = None                         # RetryPolicy (all tools) or {tool name: RetryPolicy}
    approver: Any = None                      # normalised approver callable or None
    approval_timeout: float | None = 600.0
    approve_calls: bool = False               # per-call gate before each risky ready call
    approval_risk: Risk = Risk.MEDIUM         # threshold for both gates
    executor: Any = None                      # LatentExecutor for latent calls without _output
    validate_output: bool = True
    validate_input: bool = True
    preview_chars: int = 200
    sleep: Callable[[float], Any] = asyncio.sleep  # for retry delays (tests may replace it)
    rng: random.Random = field(default_factory=random.Random)


def retry_delay(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Delay before attempt ``attempt + 1`` (``attempt`` >= 1 failed attempts so far)."""
    delay = max(policy.interval, 0.0) * (policy.backoff_rate ** (attempt - 1))
    if policy.max_delay is not None:
        delay = min(delay, policy.max_delay)
    if policy.jitter:
        delay = (rng or random).uniform(0, delay)
    return delay


def render_text_value(value: Any) -> str:
    """How a value is interpolated into a template: strings as-is, others compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------
# Output / input validation: one compiled validator per distinct schema (shared by runs),
# with a fast structural pre-check for the simple schemas ``@tool`` derives from type hints.

class _Validator:
    """``check(value)`` -> None or a message: fast pre-check, then jsonschema for the rest."""

    __slots__ = ("fast", "full")

    def __init__(self, fast: Callable[[Any], bool] | None, full: Any) -> None:
        self.fast = fast
        self.full = full

    def check(self, value: Any) -> str | None:
        fast = self.fast
        if fast is not None and fast(value):
            return None
        err = next(iter(self.full.iter_errors(value)), None)
        if err is None:
            return None
        where = "/".join(str(p) for p in err.absolute_path)
        return f"{err.message}" + (f" (at /{where})" if where else "")


_VALIDATORS: dict[str, _Validator | None] = {}


def schema_validator(schema: Any) -> _Validator | None:
    """The (cached) validator of a tool schema; None when there is nothing to check
    (no schema, an empty one, or one jsonschema rejects as a schema)."""
    if not isinstance(schema, dict) or not schema:
        return None
    try:
        key = json.dumps(schema, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        key = None
    if key is not None and key in _VALIDATORS:
        return _VALIDATORS[key]
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
        v: _Validator | None = _Validator(fast_schema_check(schema), cls(schema))
    except jsonschema.SchemaError:
        v = None
    if key is not None:
        if len(_VALIDATORS) >= 1024:
            _VALIDATORS.clear()
        _VALIDATORS[key] = v
    return v


def _add_written(rec: CallRecord, paths: tuple) -> None:
    """Append output paths (References or texts) to ``rec.written``: kept as a tuple until
    someone reads it (usually the call's own ``output.paths``, no new object)."""
    w = rec._written
    if type(w) is list:
        w.extend(p if type(p) is str else p.text() for p in paths)
    elif w is None:
        rec._written = paths
    else:
        rec._written = w + paths


def _writers(rw: Any, key: tuple) -> tuple:
    """The writers of ``key`` in one call's ``Analysis.ref_writers`` entry (a mapping, or a
    tuple of ``(key, writers)`` pairs)."""
    if type(rw) is tuple:
        for k, ws in rw:
            if k == key:
                return ws
        return ()
    return rw.get(key, ())


class _Acc:
    __slots__ = ("broken", "missing", "pending")

    def __init__(self) -> None:
        self.broken: list[str] = []
        self.missing: list[str] = []
        self.pending = False


# Output methods that only make sense for one JSON type of written value (spec: output methods).
_NEEDS_TYPE = {OutputMethod.MERGE: ("an object", dict), OutputMethod.ASSIGN: ("an object", dict),
               OutputMethod.CONCAT: ("a list", list)}


def _call_in_thread(func: Callable[..., Any], args: dict) -> Any:
    """Run a sync tool in a worker thread.  ``SystemExit``, ``KeyboardInterrupt`` or any other
    ``BaseException`` raised there comes from the tool, never from the user (signals reach the
    main thread), so it becomes an ordinary failure instead of tearing the run down."""
    try:
        return func(**args)
    except Exception:
        raise
    except BaseException as exc:
        raise RunError(TOOL_FAILED, f"tool raised {type(exc).__name__}({exc})") from exc


def _base_failure(tool: str, exc: BaseException) -> ErrorInfo:
    """A tool's own ``BaseException`` (not cancellation, not a user's Ctrl-C) as a failure:
    left alone it would end the call's task without a verdict and the run would never end."""
    if isinstance(exc, SystemExit):
        return ErrorInfo(TOOL_FAILED, f"{tool} raised SystemExit({exc.code!r})")
    return ErrorInfo(TOOL_FAILED, f"{tool} raised {type(exc).__name__}({exc})")


class Scheduler:
    """Runs one plan once. Use :func:`sophon_dsl.runtime.arun` rather than this class directly."""

    def __init__(self, plan: Plan, registry: ToolRegistry, *, ids: list[str] | None = None,
                 input: Any = None, state: Any = None, context: dict | None = None,
                 options: RunOptions | None = None, bus: EventBus | None = None,
                 plan_id: str | None = None, analysis: Analysis | None = None,
                 track_waits: bool = True) -> None:
        self.plan = plan
        self.registry = registry
        self.opts = options or RunOptions()
        self.bus = bus or EventBus()
        self.an = analysis or analyze(plan, ids)
        self.ids = self.an.ids
        self.plan_id = plan_id or plan.id or "plan"
        self._goal = plan.goal
        self.n = len(plan.calls)
        self.log = StateLog()
        if input is not None:
            self.log.append("input", (), to_json_value(input))
        if state is not None:
            self.log.append("state", (), to_json_value(state))
        for kind, data in (context or {}).items():
            self.log.append(kind, (), to_json_value(data))
        self.records = [new_record(cid, c.tool, i) for i, (cid, c) in enumerate(zip(self.ids, plan.calls))]
        get = registry.get
        by_tool: dict[str, ToolSpec | None] = {}
        for c in plan.calls:
            if c.tool not in by_tool:
                by_tool[c.tool] = get(c.tool)
        self.specs: list[ToolSpec | None] = [by_tool[c.tool] for c in plan.calls]
        # the output paths (References) each call wrote: () until it writes; usually its own
        # ``output.paths`` tuple, so a write allocates nothing that outlives it and the
        # cyclic GC has nothing new to promote
        self.wrote: list[tuple] = [()] * self.n
        self._decided = [False] * self.n          # dispatched or terminal
        self._ended = [False] * self.n            # terminal status
        self._remaining = self.n
        self._tasks: dict[int, asyncio.Task] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._create_task: Callable[[Any], asyncio.Task] | None = None  # set by run()
        self._done = asyncio.Event()
        self._stopping: str | None = None        # None | "cancelled" | "timeout"
        self._sem = asyncio.Semaphore(self.opts.max_concurrency) if self.opts.max_concurrency else None
        self._pool: ThreadPoolExecutor | None = None
        self._validators: dict[str, Any] = {}
        self._in_validators: dict[str, Any] = {}
        # tool name -> its coroutine function when calls to it can simply be awaited, else None
        self._direct_funcs: dict[str, Any] = {}
        # a subclass that overrides how tools are invoked (or attempted) always goes through it
        self._plain_invoke = type(self)._invoke is Scheduler._invoke and type(self)._attempt is Scheduler._attempt
        # batched dispatch (see _BURST) unless a subclass looks at _tasks right after _consider
        self._batch = type(self)._consider is Scheduler._consider
        self._ready: deque = deque()
        self._burst = 0
        self.plan_error: ErrorInfo | None = None
        self.track_waits = track_waits
        # which calls each call waited for: only dry-run's predictions need it
        self.waited_on: list[set[int]] = [set() for _ in range(self.n)] if track_waits else []

    # ------------------------------------------------------------------ events

    def _emit(self, type_: str, status: str, i: int | None = None, attempt: int | None = None,
              preview: str | None = None, error: dict | None = None, reason: str | None = None,
              data: Any = None) -> None:
        if i is None:
            self.bus.emit_raw((type_, self.plan_id, self._goal, None, self.n, status, None, None, attempt,
                               preview, error, reason, _now(), data))
        else:
            rec = self.records[i]
            self.bus.emit_raw((type_, self.plan_id, self._goal, i, self.n, status, rec.id, rec.tool,
                               attempt, preview, error, reason, _now(), data))

    # ------------------------------------------------------------------ inputs

    def _ref_state(self, i: int, ref: Reference) -> tuple[int, Any]:
        key = ref.key
        rw = self.an.ref_writers[i]
        if type(rw) is tuple:  # _writers(rw, key), inline
            writers = ()
            for k, ws in rw:
                if k == key:
                    writers = ws
                    break
        else:
            writers = rw.get(key, ())
        wrote_any = False
        if writers:
            ended = self._ended
            for j in writers:
                if not ended[j]:
                    return _PENDING, None
            wrote = self.wrote
            kind, path = ref.kind, ref.path
            for j in writers:
                for r in wrote[j]:  # the same kind and one path a prefix of the other
                    if r.kind == kind and (r.path == path or overlaps(path, r.path)):
                        wrote_any = True
                        break
                if wrote_any:
                    break
        reasons = []
        if writers and not wrote_any:
            for j in writers:
                rec = self.records[j]
                if self.wrote[j]:
                    reasons.append(f"{rec.id} took another branch ({rec.branch or rec.written[0]})")
                elif rec.status == "succeeded":
                    reasons.append(f"{rec.id} wrote nothing")
                else:
                    reasons.append(f"{rec.id} {rec.status}")
            return _BROKEN, f"{ref.text()} has no value ({', '.join(reasons)})"
        value = self.log.get(ref.kind, ref.path)
        if value is MISSING:
            return _MISSING, ref.text()
        return _HAS, value

    def _eval(self, i: int, v: Any, acc: _Acc) -> Any:
        tv = type(v)
        if tv is Literal:
            return v.value
        if tv is ListValue:
            return [x.value if type(x) is Literal else self._eval(i, x, acc) for x in v.items]
        if isinstance(v, Literal):
            return v.value
        if isinstance(v, Reference):
            st, val = self._ref_state(i, v)
            if st == _HAS:
                return json_copy(val)
            if st == _PENDING:
                acc.pending = True
            elif st == _BROKEN:
                acc.broken.append(val)
            else:
                acc.missing.append(val)
            return None
        if isinstance(v, ObjectValue):
            return {k: self._eval(i, x, acc) for k, x in v.entries}
        if isinstance(v, ListValue):
            return [self._eval(i, x, acc) for x in v.items]
        if isinstance(v, Template):
            out = []
            for part in v.parts:
                if isinstance(part, str):
                    out.append(part)
                    continue
                st, val = self._ref_state(i, part)
                if st == _HAS:
                    out.append(render_text_value(val))
                elif st == _PENDING:
                    acc.pending = True
                elif st == _BROKEN:
                    acc.broken.append(val)
                else:
                    acc.missing.append(val)
            return "".join(out)
        if isinstance(v, Expression):
            if v.op == "||":
                broken, missing = [], []
                for r in v.operands:
                    st, val = self._ref_state(i, r)
                    if st == _HAS:
                        return json_copy(val)
                    if st == _PENDING:
                        acc.pending = True
                        return None
                    (broken if st == _BROKEN else missing).append(val)
                if broken:
                    acc.broken.append(f"no alternative of {v.text()} has a value: " + "; ".join(broken))
                else:
                    acc.missing.append(v.text())
                return None
            last = None
            for r in v.operands:
                last = self._eval(i, r, acc)
            return last
        raise TypeError(f"not a plan value: {v!r}")

    def _simple_args(self, i: int, params: tuple) -> dict | None:
        """The arguments of call ``i`` when every parameter is a literal, a reference or a
        list of those, and every reference has a value; else None (then evaluate() takes
        the general route, which also says why a call waits, is skipped or fails). The
        same values as the general route, without its bookkeeping: most ready calls."""
        args = {}
        ref_state = self._ref_state
        for p in params:
            v = p.value
            tv = type(v)
            if tv is Literal:
                args[p.name] = v.value
            elif tv is Reference:
                st, val = ref_state(i, v)
                if st != _HAS:
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
                        if st != _HAS:
                            return None
                        items.append(json_copy(val))
                    else:
                        return None
                args[p.name] = items
            else:
                return None
        return args

    def _eval_literal(self, v: Any) -> Any:
        if type(v) is Literal:
            return v.value
        return self._eval(-1, v, _Acc())

    def _after_state(self, i: int, acc: _Acc) -> None:
        for j in self.an.after[i]:
            rec = self.records[j]
            if not self._ended[j]:
                acc.pending = True
            elif rec.status != "succeeded" and not rec.caught:
                acc.broken.append(f"@after({rec.id}): {rec.id} {rec.status}")

    def evaluate(self, i: int) -> tuple[str, Any]:
        """("ready", (args, inline)) | ("wait", None) | ("skip", reason) | ("fail", ErrorInfo)."""
        call = self.plan.calls[i]
        if not self.an.ref_writers[i] and not self.an.after[i]:
            # nothing to wait for: literals only
            if call.inline_output is None:
                args = self._simple_args(i, call.params)
                if args is not None:
                    return "ready", (args, None)
            ev = self._eval_literal
            args = {p.name: ev(p.value) for p in call.params}
            if call.inline_output is None:
                return "ready", (args, None)
            return "ready", (args, ev(call.inline_output))
        ended = self._ended
        for d in self.an.deps[i]:
            if ended[d]:
                break
        else:
            # No dependency has ended yet. A reference is pending while any of its writers
            # runs, and an @after call while it runs, so when every reference has a writer
            # the verdict is "wait" (nothing can be broken or missing yet): the same answer
            # as the full evaluation below, without building the arguments.
            rw = self.an.ref_writers[i]
            if type(rw) is tuple:
                for _, ws in rw:
                    if not ws:
                        break
                else:
                    return "wait", None
            elif all(rw.values()):
                return "wait", None
        if call.inline_output is None and not self.an.after[i]:
            args = self._simple_args(i, call.params)
            if args is not None:
                return "ready", (args, None)
        acc = _Acc()
        if self.an.after[i]:
            self._after_state(i, acc)
            if acc.broken:
                return "skip", "; ".join(acc.broken)
        args = {p.name: self._eval(i, p.value, acc) for p in call.params}
        inline = self._eval(i, call.inline_output, acc) if call.inline_output is not None else None
        if acc.broken:
            return "skip", "; ".join(acc.broken)
        if acc.pending:
            return "wait", None
        if acc.missing:
            return "fail", ErrorInfo(REF_UNRESOLVED, "no value at " + ", ".join(acc.missing))
        return "ready", (args, inline)

    # ------------------------------------------------------------------ lifecycle

    def _finish(self, i: int, status: str) -> None:
        rec = self.records[i]
        rec.status = status
        rec._ended_at = now = _now()  # formatted when read (CallRecord.ended_at)
        rec.ended = _perf()
        self._decided[i] = True
        self._ended[i] = True
        self._remaining -= 1
        if status == "succeeded":  # (the common case: _emit's tuple, built inline)
            self.bus.emit_raw(("plan_step_complete", self.plan_id, self._goal, i, self.n, status, rec.id,
                               rec.tool, rec.attempts, preview(rec.output, self.opts.preview_chars), None,
                               None, now, None))
        elif status == "failed":
            self._emit("plan_step_failed", status, i, attempt=rec.attempts,
                       error=rec.error.to_json() if rec.error else None, reason=rec.reason)
        elif status == "skipped":
            self._emit("plan_step_skipped", status, i, reason=rec.reason)
        else:
            self._emit("plan_step_cancelled", status, i, reason=rec.reason,
                       error=rec.error.to_json() if rec.error else None)
        if self._remaining == 0:
            self._done.set()

    def _settled(self, i: int) -> None:
        """Re-examine the dependents of ``i`` (and transitively of anything skipped)."""
        if self._stopping:
            return
        decided, consider, dependents = self._decided, self._consider, self.an.dependents
        work = None  # calls that ended here (skipped or failed): their dependents next, breadth first
        while True:
            for j in dependents[i]:
                if not decided[j] and consider(j):
                    if work is None:
                        work = deque()
                    work.append(j)
            if not work or self._stopping:
                return
            i = work.popleft()

    def _consider(self, j: int) -> bool:
        """Dispatch, skip or fail ``j`` if its inputs are decided. True if it ended here."""
        an = self.an
        # (ref_writers[j] is empty exactly when call j reads nothing; cheaper than refs[j])
        if self._batch and not an.ref_writers[j] and not an.after[j] and (self._ready or self._burst >= _BURST):
            # literals only: always ready, and queued: its arguments are built when its task
            # is created (see below), so do not build them twice
            if self.track_waits:
                self._record_waits(j)
            self._decided[j] = True
            if not self._ready:
                self._loop.call_soon(self._pump)
            self._ready.append((j, _LATER, None))
            return False
        verdict, payload = self.evaluate(j)
        if verdict == "wait":
            return False
        rec = self.records[j]
        if self.track_waits:
            self._record_waits(j)
        if verdict == "skip":
            rec.reason = payload
            self._finish(j, "skipped")
            return True
        if verdict == "fail":
            rec.error = payload
            rec.reason = payload.cause
            self._finish(j, "failed")
            return True
        self._decided[j] = True
        args, inline = payload
        if self._batch:
            if self._ready or self._burst >= _BURST:
                if not self._ready:
                    self._loop.call_soon(self._pump)
                if not self.an.ref_writers[j] and not self.an.after[j]:
                    # literals only: the same arguments whenever they are built, so build them
                    # when the task is created rather than holding them while queued
                    self._ready.append((j, _LATER, None))
                else:
                    self._ready.append((j, args, inline))
                return False
            self._burst += 1
        self._tasks[j] = self._create_task(self._run_call(j, args, inline))
        return False

    def _pump(self) -> None:
        """Create the next burst of queued tasks (FIFO: same start order as creating them all)."""
        self._burst = 0
        ready = self._ready
        if self._stopping:
            ready.clear()  # never started: _shutdown records them cancelled
            return
        create = self._create_task
        tasks = self._tasks
        run_call = self._run_call
        for _ in range(min(len(ready), _BURST)):
            j, args, inline = ready.popleft()
            if args is _LATER:
                args, inline = self.evaluate(j)[1]
            tasks[j] = create(run_call(j, args, inline))
        self._burst = _BURST if ready else 0
        if ready:
            self._loop.call_soon(self._pump)

    def _record_waits(self, j: int) -> None:
        if not self.track_waits:
            return
        ws = self.waited_on[j]
        ws.update(self.an.after[j])
        ended = self._ended
        for ref in self.an.refs[j]:
            for w in _writers(self.an.ref_writers[j], ref.key):
                if ended[w]:
                    ws.add(w)

    # ------------------------------------------------------------------ one call

    def _policy(self, i: int) -> RetryPolicy | None:
        call = self.plan.calls[i]
        if call.retry is not None:
            return call.retry
        r = self.opts.retry
        if r is None:
            return None
        if isinstance(r, RetryPolicy):
            return r
        if isinstance(r, dict):
            return r.get(call.tool) or r.get("*")
        return None

    async def _run_call(self, i: int, args: dict, inline: Any) -> None:
        rec = self.records[i]
        call = self.plan.calls[i]
        try:
            if self.opts.approve_calls:
                risk = effective_risk(call, self.specs[i])
                if risk >= self.opts.approval_risk:
                    ok, call, args, inline = await self._call_gate(i, call, args, inline, risk)
                    if not ok:
                        return
            self._burst = 0  # a new pass of the event loop (see _BURST)
            rec.status = "running"
            rec._started_at = now = _now()  # formatted when read (CallRecord.started_at)
            rec.started = _perf()
            self.bus.emit_raw(("plan_step_start", self.plan_id, self._goal, i, self.n, "running", rec.id,
                               rec.tool, None, None, None, None, now, None))
            policy = self._policy(i) if call.retry is not None or self.opts.retry is not None else None
            max_attempts = max(policy.max_attempts, 1) if policy else 1
            func = self._direct(i, call)
            # Every attempt gets the same arguments: a tool that changes a list or object
            # argument in place and then fails must not hand the change to the retry. Only
            # calls that may be retried and have container arguments keep a pristine copy.
            pristine = None
            if max_attempts > 1:
                for v in args.values():
                    if type(v) not in _SCALARS:
                        pristine = json_copy(args)
                        break
            while True:
                if pristine is not None and rec.attempts:
                    args = json_copy(pristine)
                rec.attempts += 1
                if func is not None and self.opts.validate_input and \
                        (err := self._check_input(i, call, args)) is not None:
                    pass
                elif func is not None:
                    # the common case, without the extra coroutine layers of _attempt: an
                    # async tool, no timeout or concurrency limit
                    try:
                        result = await func(**args)
                    except TimeoutError:
                        timeout = self._timeout_for(call)  # None here: same outcome as _attempt
                        err = ErrorInfo(TOOL_TIMEOUT, f"{call.tool} did not finish within {timeout:g} s")
                    except Exception as exc:  # noqa: BLE001
                        err = error_from_exception(exc)
                    except (asyncio.CancelledError, KeyboardInterrupt):
                        raise  # the run's cancellation, or the user's Ctrl-C
                    except BaseException as exc:  # SystemExit or a tool's own: the call failed
                        err = _base_failure(call.tool, exc)
                    else:
                        err = self._accept(i, call, result)
                else:
                    err = await self._attempt(i, call, args, inline)
                if err is None:
                    self._finish(i, "succeeded")
                    break
                if rec.attempts < max_attempts and matches(err.error, policy.errors if policy else ()):
                    self._emit("plan_step_retry", "retrying", i, attempt=rec.attempts, error=err.to_json())
                    delay = retry_delay(policy, rec.attempts, self.opts.rng)
                    if delay > 0:
                        await self.opts.sleep(delay)
                    continue
                self._fail(i, err)
                break
        except asyncio.CancelledError:
            if rec.status not in TERMINAL:
                why = PLAN_TIMEOUT if self._stopping == "timeout" else PLAN_CANCELLED
                rec.error = ErrorInfo(why, "the plan hit its time limit" if why == PLAN_TIMEOUT
                                      else "the run was cancelled")
                rec.reason = rec.error.cause
                self._finish(i, "cancelled")
            return
        except Exception as exc:  # noqa: BLE001 - a bug here must not hang the run
            if rec.status not in TERMINAL:
                rec.error = ErrorInfo(TOOL_FAILED, f"internal error: {type(exc).__name__}: {exc}")
                self._finish(i, "failed")
        finally:
            # keep only calls still in flight (shutdown cancels them, run() waits for them)
            self._tasks.pop(i, None)
        self._settled(i)

    def _direct(self, i: int, call: Call) -> Callable[..., Any] | None:
        """The tool's coroutine function when the call can simply be awaited, else None."""
        if call.inline_output is not None or call.timeout is not None:
            return None
        func = self._direct_funcs.get(call.tool, _UNSET)
        if func is _UNSET:
            func = self._direct_funcs[call.tool] = self._direct_func(call.tool)
        return func

    def _direct_func(self, name: str) -> Callable[..., Any] | None:
        """For calls without their own timeout or inline output: the coroutine function of
        tool ``name`` when such calls can simply be awaited (an async tool, no default
        timeout, no concurrency limit, no subclass hook), else None."""
        if self._sem is not None or not self._plain_invoke or self.opts.timeout is not None:
            return None
        spec = self.registry.get(name)
        if spec is None or spec.func is None:
            return None
        return spec.func if spec.is_async or inspect.iscoroutinefunction(spec.func) else None

    async def _call_gate(self, i, call, args, inline, risk):
        rec = self.records[i]
        req = ApprovalRequest("call", self.plan, ({"id": rec.id, "tool": call.tool, "risk": risk.label,
                                                   "index": i},), call, rec.id, args, self.plan_id, risk)
        self._emit("approval_requested", "pending", i, data=req)
        decision = await decide(self.opts.approver, req, self.opts.approval_timeout)
        if decision.action == "reject":
            self._emit("approval_rejected", "rejected", i, reason=decision.reason)
            rec.error = ErrorInfo(APPROVAL_REJECTED, decision.reason)
            rec.reason = decision.reason
            self._finish(i, "failed")
            self._settled(i)
            return False, call, args, inline
        if decision.action == "edit" and decision.call is not None:
            edited = decision.call
            if edited.tool != call.tool or edited.output != call.output:
                # the plan's wiring (who reads this call's output) and the checks of its tool
                # were decided for the original: a call edit may change arguments only
                why = ("the edited call must keep the tool and output path of the original "
                       "(edit the plan at the plan-level gate to change them)")
                self._emit("approval_rejected", "rejected", i, reason=why)
                rec.error = ErrorInfo(APPROVAL_REJECTED, why)
                rec.reason = why
                self._finish(i, "failed")
                self._settled(i)
                return False, call, args, inline
            self._emit("approval_edited", "approved", i, reason=decision.reason)
            call = edited
            acc = _Acc()
            args = {p.name: self._eval(i, p.value, acc) for p in call.params}
            inline = self._eval(i, call.inline_output, acc) if call.inline_output is not None else None
            if acc.pending or acc.broken or acc.missing:
                rec.error = ErrorInfo(REF_UNRESOLVED, "the edited call reads values that are not available")
                self._finish(i, "failed")
                self._settled(i)
                return False, call, args, inline
        else:
            self._emit("approval_granted", "approved", i, reason=decision.reason)
        return True, call, args, inline

    def _timeout_for(self, call: Call) -> float | None:
        return call.timeout if call.timeout is not None else self.opts.timeout

    async def _invoke(self, i: int, call: Call, args: dict, inline: Any) -> Any:  # noqa: C901
        if call.inline_output is not None:
            return inline
        spec = self.specs[i]
        if spec is not None and spec.func is not None:
            func = spec.func
            if spec.is_async or inspect.iscoroutinefunction(func):
                out = func(**args)
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.opts.max_workers,
                                                    thread_name_prefix="sophon-tool")
                out = asyncio.get_running_loop().run_in_executor(self._pool, partial(_call_in_thread, func, args))
            if inspect.isawaitable(out):
                try:
                    out = await out
                except SystemExit as exc:  # a tool must not end the program: it failed
                    raise RunError(TOOL_FAILED, f"{call.tool} raised SystemExit({exc.code!r})") from exc
            return out
        if spec is not None and spec.explicit:
            raise RunError(TOOL_FAILED, f"{call.tool} is declared as an activity but no implementation "
                                        "is registered: pass its Python function in tools")
        if self.opts.executor is None:
            raise RunError(TOOL_FAILED, f"latent call {self.records[i].id} ({call.tool}) needs an LLM executor")
        return await self.opts.executor.execute(
            LatentRequest(call, self.records[i].id, spec, args, self.plan, self.records[i].attempts))

    def _validator(self, schema: Any, cache: dict, name: str):
        if name in cache:
            return cache[name]
        v = cache[name] = schema_validator(schema)
        return v

    def _check(self, validator, value) -> str | None:
        if validator is None:
            return None
        return validator.check(value)

    def _check_input(self, i: int, call: Call, args: dict) -> ErrorInfo | None:
        spec = self.specs[i]
        if self.opts.validate_input and spec is not None and spec.func is not None:
            msg = self._check(self._validator(spec.input_schema, self._in_validators, spec.name), args)
            if msg:
                return ErrorInfo(TOOL_INPUT_INVALID, f"arguments of {call.tool}: {msg}")
        return None

    async def _attempt(self, i: int, call: Call, args: dict, inline: Any) -> ErrorInfo | None:
        err = self._check_input(i, call, args)
        if err is not None:
            return err
        timeout = self._timeout_for(call)
        try:
            if self._sem is not None:
                async with self._sem:
                    result = await self._timed(self._invoke(i, call, args, inline), timeout)
            else:
                result = await self._timed(self._invoke(i, call, args, inline), timeout)
        except TimeoutError:
            return ErrorInfo(TOOL_TIMEOUT, f"{call.tool} did not finish within {timeout:g} s")
        except Exception as exc:  # noqa: BLE001
            return error_from_exception(exc)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise  # the run's cancellation, or the user's Ctrl-C
        except BaseException as exc:  # SystemExit or a tool's own: the call failed
            return _base_failure(call.tool, exc)
        return self._accept(i, call, result)

    def _accept(self, i: int, call: Call, result: Any) -> ErrorInfo | None:
        """Check a tool's result and write it to its output path(s); an error, or None."""
        rec = self.records[i]
        # pick the target paths
        out = call.output
        branch: int | None = None
        if type(result) in _SCALARS:
            value = result
            if type(result) is float and not isfinite(result):
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"result is not JSON: {result!r} is not a JSON number")
        elif isinstance(result, Branch):
            paths = out.paths if out is not None else ()
            tgt = result.target
            if isinstance(tgt, int) and not isinstance(tgt, bool):
                branch = tgt if 0 <= tgt < len(paths) else None
            else:
                text = str(tgt).lstrip("†$")
                for k, p in enumerate(paths):
                    if p.text("") == text:
                        branch = k
                        break
            if branch is None or (branch > 0 and not (out is not None and out.op == "||")):
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"{call.tool} picked branch {tgt!r}, which is not an "
                                 "alternative of its output path")
            result = result.value
        if branch is not None or type(result) not in _SCALARS:
            try:
                value = to_json_value(result)
            except (TypeError, ValueError) as exc:
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"result is not JSON: {exc}")
        if self.opts.validate_output and call.inline_output is None:
            spec = self.specs[i]
            msg = self._check(self._validator(spec.output_schema if spec is not None else None,
                                              self._validators, call.tool), value)
            if msg:
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"result of {call.tool} does not match its output schema: {msg}")
        if out is not None and out.method in _NEEDS_TYPE:
            kind, ok = _NEEDS_TYPE[out.method]
            if not isinstance(value, ok):
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"{call.tool} returned {type(value).__name__}, but "
                                 f"'{out.method.value}' writes need {kind}")
        rec.output = value
        if out is not None:
            op = out.op
            if op == "&&":
                targets = out.paths
            elif op == "||":
                targets = (out.paths[branch or 0],)
            else:
                targets = out.paths if len(out.paths) == 1 else (out.paths[0],)
            if op == "||" and len(out.paths) > 1:
                rec.branch = targets[0].text()
            append = self.log._write
            method, cid = out.method, rec.id
            for p in targets:
                append(p.kind, p.path, value, method, cid)
            done = self.wrote[i]
            self.wrote[i] = done + targets if done else targets
            _add_written(rec, targets)
        rec.error = None
        return None

    async def _timed(self, aw, timeout: float | None):
        if timeout is None:
            return await aw
        async with asyncio.timeout(timeout):
            return await aw

    def _fail(self, i: int, err: ErrorInfo) -> None:
        rec = self.records[i]
        call = self.plan.calls[i]
        rec.error = err
        out = call.output
        if out is not None and out.is_branching:
            catch = out.paths[-1]
            self.log._write(catch.kind, catch.path, err.to_json(), out.method, rec.id)
            self.wrote[i] += (catch,)
            _add_written(rec, (catch,))
            rec.caught = True
            rec.branch = catch.text()
            rec.reason = f"error delivered to {catch.text()}"
        self._finish(i, "failed")

    # ------------------------------------------------------------------ run

    def cancel(self) -> None:
        if self._stopping is None:
            self._stopping = "cancelled"
            self._done.set()

    async def run(self) -> RunResult:
        self._loop = loop = asyncio.get_running_loop()
        if loop.get_task_factory() is None and isinstance(loop, asyncio.BaseEventLoop):
            # what loop.create_task does without a task factory, minus one Python call
            self._create_task = partial(asyncio.Task, loop=loop)
        else:
            self._create_task = loop.create_task
        self._emit("plan_start", "running")
        try:
            decided = self._decided
            deps, ref_writers = self.an.deps, self.an.ref_writers
            for i in range(self.n):
                if decided[i] or self._stopping:
                    continue
                if deps[i]:
                    # Every reference of i has a writer, and i depends on at least one call:
                    # nothing about i can be decided before one of those calls ends, and the
                    # call that ends re-examines i then (_settled), also when it ended earlier
                    # in this loop. So i waits, as evaluate() would say, without asking it.
                    rw = ref_writers[i]
                    if type(rw) is tuple:
                        for _, ws in rw:
                            if not ws:
                                break
                        else:
                            continue
                    elif all(rw.values()):
                        continue
                if self._consider(i):
                    self._settled(i)
            if self._remaining and not self._stopping:
                if self.opts.max_time is not None:
                    try:
                        await asyncio.wait_for(self._done.wait(), self.opts.max_time)
                    except asyncio.TimeoutError:
                        self._stopping = "timeout"
                else:
                    await self._done.wait()
        except asyncio.CancelledError:
            self._stopping = self._stopping or "cancelled"
            await self._shutdown()
            raise
        if self._stopping:
            await self._shutdown()
        # fire-and-forget calls and anything still finishing
        pending = [t for t in self._tasks.values() if not t.done()]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        if self._pool is not None:
            self._pool.shutdown(wait=False)
        return self._result()

    async def _shutdown(self) -> None:
        why = self._stopping
        for t in self._tasks.values():
            if not t.done():
                t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        err = ErrorInfo(PLAN_TIMEOUT, "the plan hit its time limit") if why == "timeout" else \
            ErrorInfo(PLAN_CANCELLED, "the run was cancelled")
        self.plan_error = err
        for i, rec in enumerate(self.records):
            if rec.status not in TERMINAL:
                rec.error = err
                rec.reason = "not started: " + err.cause
                self._finish(i, "cancelled")

    def status(self) -> str:
        if self._stopping == "cancelled":
            return "cancelled"
        if self._stopping == "timeout":
            return "failed"
        if any(r.status == "failed" and not r.caught for r in self.records):
            return "failed"
        return "succeeded"

    def _output(self) -> Any:
        if self.plan.output is None:
            return None
        return evaluate_loose(self.plan.output, self.log)

    def _result(self) -> RunResult:
        status = self.status()
        output = self._output()
        if status == "succeeded":
            self._emit("plan_complete", status, preview=preview(output, self.opts.preview_chars))
        else:
            self._emit("plan_failed", status, error=self.plan_error.to_json() if self.plan_error else None)
        return RunResult(status, self.log.resolved(exclude=("input",)), output, self.records,
                         self.log.snapshot(), self.plan_id, self.plan.goal, self.plan_error,
                         self.bus.snapshot())


def evaluate_loose(v: Any, log: StateLog) -> Any:
    """Evaluate a value against the final state; unresolved references become None."""
    if isinstance(v, Literal):
        return v.value
    if isinstance(v, Reference):
        val = log.get(v.kind, v.path)
        return None if val is MISSING else json_copy(val)
    if isinstance(v, ObjectValue):
        return {k: evaluate_loose(x, log) for k, x in v.entries}
    if isinstance(v, ListValue):
        return [evaluate_loose(x, log) for x in v.items]
    if isinstance(v, Template):
        return "".join(p if isinstance(p, str) else render_text_value(evaluate_loose(p, log)) for p in v.parts)
    if isinstance(v, Expression):
        vals = [log.get(r.kind, r.path) for r in v.operands]
        if v.op == "||":
            return next((json_copy(x) for x in vals if x is not MISSING), None)
        return None if any(x is MISSING for x in vals) else json_copy(vals[-1])
    return None
