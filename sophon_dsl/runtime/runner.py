"""One call's run: the per-call approval gate, attempts with retries and timeouts, and
what happens to the result (checked, written to the output path, or delivered as an
error to a catching alternative).

A :class:`CallRunner` belongs to one run: it gets the run's
:class:`~.runstate.RunState` (the per-call lists, the seams) from the scheduler, never the
scheduler itself, and reports back through its callables (``finish``, ``settled``,
``emit``, ``task_done``).
"""

from __future__ import annotations

import asyncio
import json
import time
from functools import partial
from math import isfinite
from typing import Any, Callable

from ..model import Call, Literal, OutputMethod
from ..outputpath import parameter_schema
from .approval import ApprovalDecision, ApprovalRequest, decide
from .errors import (
    APPROVAL_REJECTED, REF_UNRESOLVED, TOOL_FAILED, TOOL_INPUT_INVALID,
    TOOL_OUTPUT_INVALID, TOOL_TIMEOUT, ErrorInfo, error_from_exception, matches,
)
from .contracts import state_writes
from .invoker import Invocation
from .protocols import Branch
from .result import Attempt, CallRecord, started_stamp
from .retry import alternative_for, retry_delay
from .runstate import RunState
from .gate import Admission
from .state import json_copy, to_json_value
from .validation import RESULT_TOO_LARGE, json_size, schema_validator, static_verdict, statically_valid

# accept_json's sizer: its values are trees (no cycle), so the C encoder's id() bookkeeping
# per container is skipped; a cycle would still end in RecursionError, which it catches
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode

__all__ = ["CallRunner"]


class _Expired(Exception):
    """The runtime's own per-call timeout fired (told apart from a tool's TimeoutError)."""


_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIXED_SIZE = frozenset({float, bool, type(None)})  # results too small to measure
_TERMINAL = frozenset({"succeeded", "failed", "skipped", "cancelled"})
# input-schema keywords about parameter names only (checked before the run) or annotations
_UNSET: Any = object()
_NAME_ONLY_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "title", "description",
                             "$schema", "$id", "$comment", "examples", "default"})
_now = time.time
_perf = time.perf_counter

# Output methods that only make sense for one JSON type of written value (spec: output methods).
_SET_METHOD = OutputMethod.SET
_NEEDS_TYPE = {OutputMethod.MERGE: ("an object", dict), OutputMethod.ASSIGN: ("an object", dict),
               OutputMethod.CONCAT: ("a list", list)}


def _base_failure(tool: str, exc: BaseException) -> ErrorInfo:
    """A tool's own ``BaseException`` (not cancellation, not a user's Ctrl-C) as a failure:
    left alone it would end the call's task without a verdict and the run would never end."""
    if isinstance(exc, SystemExit):
        return ErrorInfo(TOOL_FAILED, f"{tool} raised SystemExit({exc.code!r})")
    return ErrorInfo(TOOL_FAILED, f"{tool} raised {type(exc).__name__}({exc})")


def _attempt_failed(rec: CallRecord, err: ErrorInfo) -> None:
    """The call's current attempt failed and another follows: it is logged as failed (the
    first such failure starts the call's ``attempt_log`` with its first attempt).  The last
    attempt is closed by the scheduler when the call ends (``finish_call``)."""
    now = _now()
    log = rec.attempt_log
    if log is None:
        start = started_stamp(rec)
        rec.attempt_log = [Attempt(1, start if start is not None else now, now, "failed", err)]
    else:
        log[-1].close(now, "failed", err)


def stop_cause(why: str | None) -> str:
    """What a call's record says when the run stopped before it ended (not a time limit)."""
    if why == "waiting":
        return "the run was left waiting for approval: this call runs when it continues"
    return "the run was cancelled"


def _cancelled_by_the_run() -> bool:
    """Whether a CancelledError reaching a call is the run's (its time limit, a cancel):
    then this task is being cancelled.  A tool that raises CancelledError itself (or
    KeyboardInterrupt: asyncio.run turns the user's Ctrl-C into a cancellation of the
    main task, never into an exception inside a tool) only fails its own call."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


class CallRunner:
    """Runs the calls of one scheduler (see the module docstring)."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.opts = opts = state.opts
        self._sem = asyncio.Semaphore(opts.max_concurrency) if opts.max_concurrency else None
        # a durable run's intents: committed when a call gets its slot under max_concurrency
        # (in _attempt), not when it starts waiting for one
        self.intent_in_slot = self._sem is not None
        self._validators: dict[str, Any] = {}
        self._in_validators: dict[str, Any] = {}
        self._plain: bool | None = None  # no concurrency limit and no default timeout
        # (tool, names of the parameters that read values) -> the run-time input check
        self._read_checks: dict[tuple, Any] = {}
        self._param_props: dict[str, dict] = {}  # tool -> its input schema's properties (less _outputPath)
        # tool -> {(parameter, value type): static_verdict}: most calls' parameters are
        # decided by their value's type alone, once per tool instead of once per call
        self._verdicts: dict[str, dict[tuple, bool | None]] = {}
        self.result_bytes = 0  # the run's results so far, as JSON (max_run_result_bytes)

    # -- one call ------------------------------------------------------------------

    async def run_call(self, i: int, args: dict, inline: Any) -> None:
        s = self.state
        rec = s.records[i]
        call = s.calls[i]
        opts = self.opts
        checked = False  # an approval edit brings arguments the checker never saw
        try:
            # the one gate every call passes, whatever made it (runtime/gate.py)
            verdict = s.gate.check(i, call, args)
            if verdict.ask:
                ok, edited, args, inline = await self._call_gate(i, call, args, inline, verdict)
                if not ok:
                    return
                checked = edited is not call
                call = edited
            s.new_pass()
            barrier = s.barrier  # (a call cleared when it was ready skips before_start)
            if barrier is not None and i not in barrier.cleared and (
                    err := await barrier.before_start(i, call, args, intent=not self.intent_in_slot)):
                self.fail(i, err)  # in doubt and not re-run (Call.OutcomeUnknown), or the store failed
                barrier.settle_after_commit(i)
                return
            if self._sem is None:  # (started(i), inline: the path of every call)
                rec.status = "running"
                rec.started_at = now = _now()
                rec.started = _perf()
                if s.store_hooks:
                    s.store.record_started(rec)
                s.bus.emit_raw(("plan_step_start", s.plan_id, s.goal, i, s.n, "running", rec.id,
                                rec.tool, None, None, None, None, now, None))
            else:  # started when a slot under max_concurrency is free (see _attempt)
                rec.status = "queued"
                s.emit("plan_step_queued", "queued", i)
            policy = s.policy(i) if call.retry is not None or opts.retry is not None else None
            max_attempts = max(policy.max_attempts, 1) if policy else 1
            plain = self._plain  # (_direct's test inline: no timeout and no concurrency limit)
            if plain is None:
                plain = self._plain = self._sem is None and opts.timeout is None
            func = s.invoker.direct(call, s.specs[i]) if plain and call.timeout is None else None
            # Literal arguments were checked against the tool's schema before the run (E204);
            # only values read at run time (or edited at approval) are checked here.
            check_input = self._read_params_check(i, call, checked) if opts.validate_input else None
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
                if check_input is not None and (err := check_input(args)) is not None:
                    pass
                elif func is not None:
                    # the common case, without the extra coroutine layers of _attempt: an
                    # async tool, no timeout or concurrency limit
                    try:
                        result = await func(**args)
                    except Exception as exc:  # noqa: BLE001 - a TimeoutError here is the tool's own
                        err = error_from_exception(exc)
                    except asyncio.CancelledError as exc:
                        if _cancelled_by_the_run():
                            raise
                        err = _base_failure(call.tool, exc)
                    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt: the tool's own
                        err = _base_failure(call.tool, exc)
                    else:
                        err = self.accept(i, call, result)
                else:
                    err = await self._attempt(i, call, args, inline)
                if err is None:
                    s.finish(i, "succeeded")
                    break
                if rec.attempts < max_attempts and matches(err.error, policy.errors if policy else ()):
                    self._retrying(rec, err)
                    s.emit("plan_step_retry", "retrying", i, attempt=rec.attempts, error=err.to_json())
                    delay = retry_delay(policy, rec.attempts, opts.rng)
                    if delay > 0:
                        await opts.sleep(delay)
                    rec.attempt_log.append(Attempt(rec.attempts + 1, _now()))  # (after the backoff)
                    continue
                if opts.advisor is not None and rec.alternative is None:
                    # one alternative after the policy (runtime.retry): same output path, own attempt
                    swapped = await alternative_for(s, i, call, err)
                    if swapped is not None:
                        call, args, inline = swapped
                        func, check_input, pristine = self._direct(i, call), None, None
                        max_attempts = rec.attempts + 1
                        self._retrying(rec, err)
                        rec.attempt_log.append(Attempt(rec.attempts + 1, _now()))
                        continue
                self.fail(i, err)
                break
        except asyncio.CancelledError:
            if rec.status not in _TERMINAL:  # the run's reason: time, memory, a budget, a cancel
                rec.error = s.stop_error()
                rec.reason = rec.error.cause
                s.finish(i, "cancelled")
            return
        except Exception as exc:  # noqa: BLE001 - a bug here must not hang the run
            if rec.status not in _TERMINAL:
                rec.error = ErrorInfo(TOOL_FAILED, f"internal error: {type(exc).__name__}: {exc}")
                s.finish(i, "failed")
        finally:
            s.task_done(i)
        if s.barrier is None:
            s.settled(i)
        else:  # the barrier: dependents start once this call's completion is committed
            s.barrier.settle_after_commit(i)

    def started(self, i: int) -> None:
        """Call ``i`` starts running: its record, the store and the subscribers are told
        (``run_call`` does the same inline when it starts a call at once)."""
        s = self.state
        rec = s.records[i]
        rec.status = "running"
        rec.started_at = now = _now()  # a timestamp, formatted when read
        rec.started = _perf()
        if s.store_hooks:
            s.store.record_started(rec)
        s.bus.emit_raw(("plan_step_start", s.plan_id, s.goal, i, s.n, "running", rec.id,
                        rec.tool, None, None, None, None, now, None))

    def _retrying(self, rec: CallRecord, err: ErrorInfo) -> None:
        """The call's attempt failed and it will be attempted again: the attempt is logged
        and the store told, as at the call's start (a durable store keeps the attempts so
        far, which the dashboard draws while the call waits out its backoff)."""
        _attempt_failed(rec, err)
        if self.state.store_hooks:
            self.state.store.record_started(rec)

    def _direct(self, i: int, call: Call) -> Callable[..., Any] | None:
        """The tool's coroutine function when the call can simply be awaited, else None."""
        if self._plain is None:
            self._plain = self._sem is None and self.opts.timeout is None
        if not self._plain or call.timeout is not None:
            return None
        return self.state.invoker.direct(call, self.state.specs[i])

    async def _call_gate(self, i: int, call: Call, args: dict, inline: Any, verdict: Admission):
        s = self.state
        rec = s.records[i]
        risk = verdict.risk
        entry = {"id": rec.id, "tool": call.tool, "risk": risk.label, "index": i}
        if verdict.why is not None:
            entry["why"] = verdict.why
        if verdict.group is not None:  # the first risky item of a map whose count was unknown
            n = s.gate.map_counts.get(verdict.group)
            entry["why"] = (f"map {verdict.group} runs {call.tool} on each of its "
                            f"{'?' if n is None else format(n, ',')} item(s): one answer for them all")
        req = ApprovalRequest("call", s.plan, (entry,), call, rec.id, args, s.plan_id, risk)

        async def ask() -> ApprovalDecision:
            s.emit("approval_requested", "pending", i, data=req)
            return await decide(self.opts.approver, req, self.opts.approval_timeout)

        if verdict.group is not None:
            answers: list[ApprovalDecision] = []

            async def ask_once() -> bool:
                answers.append(await ask())
                return answers[0].action != "reject"

            if await s.gate.decide_group(verdict.group, ask_once):
                # (an edit applies to the item that asked; the others run as planned)
                decision = answers[0] if answers else ApprovalDecision.approve(f"approved with map {verdict.group}")
            else:
                decision = answers[0] if answers else ApprovalDecision.reject(
                    f"rejected with the other items of map {verdict.group}")
        else:
            decision = await ask()
        if decision.action == "reject":
            s.emit("approval_rejected", "rejected", i, reason=decision.reason)
            self._refuse(i, ErrorInfo(APPROVAL_REJECTED, decision.reason), decision.reason)
            return False, call, args, inline
        if decision.action == "edit" and decision.call is not None:
            edited = decision.call
            if edited.tool != call.tool or edited.output != call.output:
                # the plan's wiring (who reads this call's output) and the checks of its tool
                # were decided for the original: a call edit may change arguments only
                why = ("the edited call must keep the tool and output path of the original "
                       "(edit the plan at the plan-level gate to change them)")
                s.emit("approval_rejected", "rejected", i, reason=why)
                self._refuse(i, ErrorInfo(APPROVAL_REJECTED, why), why)
                return False, call, args, inline
            s.emit("approval_edited", "approved", i, reason=decision.reason)
            built = s.inputs.edited_args(i, edited)
            if built is None:
                self._refuse(i, ErrorInfo(REF_UNRESOLVED, "the edited call reads values that are not available"))
                return False, edited, args, inline
            return True, edited, built[0], built[1]
        s.emit("approval_granted", "approved", i, reason=decision.reason)
        return True, call, args, inline

    def _refuse(self, i: int, err: ErrorInfo, reason: str | None = None) -> None:
        rec = self.state.records[i]
        rec.error = err
        if reason is not None:
            rec.reason = reason
        s = self.state
        s.finish(i, "failed")
        if s.barrier is None:
            s.settled(i)
        else:  # as after any end: its readers start once the failure is committed
            s.barrier.settle_after_commit(i)

    def _timeout_for(self, call: Call) -> float | None:
        return call.timeout if call.timeout is not None else self.opts.timeout

    # -- attempts ------------------------------------------------------------------

    def _validator(self, schema: Any, cache: dict, name: str):
        if name in cache:
            return cache[name]
        v = cache[name] = schema_validator(schema)
        return v

    def _check_input(self, spec: Any, tool: str, args: dict) -> ErrorInfo | None:
        """The whole arguments against the tool's input schema."""
        v = self._validator(parameter_schema(spec.input_schema), self._in_validators, spec.name)
        msg = v.check(args) if v is not None else None
        if msg:
            return ErrorInfo(TOOL_INPUT_INVALID, f"arguments of {tool}: {msg}")
        return None

    def _read_params_check(self, i: int, call: Call, edited: bool) -> Callable[[dict], ErrorInfo | None] | None:
        """What of call ``i``'s arguments to validate at run time: only the parameters the
        checker could not prove valid (literals were checked before the run, E204; a
        reference where the schema accepts anything, or a list or object of such, needs
        nothing), each against its own property schema when the tool's input schema says
        no more than ``properties``/``required``/``additionalProperties`` (names were
        checked statically, E202/E203); else the whole arguments.  A call edited at
        approval is checked in full."""
        spec = self.state.specs[i]
        if spec is None or (spec.func is None and call.activity is None):  # only code gets checked arguments
            return None
        if edited:
            return partial(self._check_input, spec, call.tool)
        if self.state.inputs.reads_nothing(i):
            return None  # every value is a literal tree, validated before the run
        props = self._param_props.get(call.tool)
        if props is None:  # once per tool: the properties arguments are checked against
            schema = parameter_schema(spec.input_schema)
            props = schema.get("properties") if isinstance(schema, dict) else None
            props = self._param_props[call.tool] = props if isinstance(props, dict) else {}
            self._verdicts[call.tool] = {}
        verdicts = self._verdicts[call.tool]
        key = None  # (tool, the names of the parameters to check at run time...)
        for p in call.params:
            v = p.value
            tv = type(v)
            if tv is Literal:
                continue
            name = p.name
            ok = verdicts.get((name, tv), _UNSET)
            if ok is _UNSET:
                ok = verdicts[(name, tv)] = static_verdict(tv, props.get(name, False))
            if ok is None:  # depends on the literals inside the list or object
                ok = statically_valid(v, props.get(name, False))
            if not ok:
                key = (call.tool, name) if key is None else (*key, name)
        if key is None:
            return None
        check = self._read_checks.get(key, _UNSET)
        if check is _UNSET:
            check = self._read_checks[key] = self._build_read_check(spec, call, key[1:])
        return check

    def _build_read_check(self, spec: Any, call: Call, names: tuple) -> Callable[[dict], ErrorInfo | None] | None:
        schema = parameter_schema(spec.input_schema)
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict) or set(schema) - _NAME_ONLY_KEYS:
            if self._validator(schema, self._in_validators, spec.name) is None:
                return None
            return partial(self._check_input, spec, call.tool)
        checks = []
        for name in names:
            if name not in props:
                continue
            v = self._validator(props[name], self._in_validators, f"{spec.name}\0{name}")
            if v is not None:
                checks.append((name, v))
        if not checks:
            return None
        tool = call.tool
        if len(checks) == 1:  # the common case: one parameter read at run time (no list per call)
            (name, v), = checks
            accepts = v.accepts

            def check_one(args: dict) -> ErrorInfo | None:
                value = args[name]
                if type(value) in accepts:  # (what v.check says at once for such a value)
                    return None
                msg = v.check(value)
                if msg:
                    return ErrorInfo(TOOL_INPUT_INVALID, f"arguments of {tool}: parameter '{name}': {msg}")
                return None

            return check_one

        def check(args: dict) -> ErrorInfo | None:
            # every parameter's problems at once, not only the first parameter's
            problems = [f"parameter '{name}': {msg}" for name, v in checks
                        if type(args[name]) not in v.accepts and (msg := v.check(args[name]))]
            if problems:
                return ErrorInfo(TOOL_INPUT_INVALID, f"arguments of {tool}: {'; '.join(problems)}")
            return None

        return check

    async def _attempt(self, i: int, call: Call, args: dict, inline: Any) -> ErrorInfo | None:
        s = self.state
        timeout = self._timeout_for(call)
        inv = Invocation(call, s.records[i].id, i, s.specs[i], args, inline, s.records[i].attempts, s.plan,
                         s.store.resolved, s.registry)
        try:
            if self._sem is not None:
                async with self._sem:
                    if s.records[i].started is None:  # (its first attempt)
                        if s.barrier is not None and (err := await s.barrier.intent_now(i, call)):
                            return err
                        self.started(i)
                    result = await self._timed(s.invoker.invoke(inv), timeout)
            else:
                result = await self._timed(s.invoker.invoke(inv), timeout)
        except _Expired:
            return ErrorInfo(TOOL_TIMEOUT, f"{call.tool} did not finish within {timeout:g} s")
        except Exception as exc:  # noqa: BLE001 - a TimeoutError the tool raised is its own failure
            return error_from_exception(exc)
        except asyncio.CancelledError as exc:
            if _cancelled_by_the_run():
                raise
            return _base_failure(call.tool, exc)
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt: the tool's own
            return _base_failure(call.tool, exc)
        return self.accept(i, call, result)

    @staticmethod
    async def _timed(aw: Any, timeout: float | None) -> Any:
        if timeout is None:
            return await aw
        # Only this deadline is Tool.Timeout: a TimeoutError the tool raises itself (a socket
        # timeout, its own asyncio.wait_for) passes through as the tool's failure.
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await aw
        except TimeoutError:
            if deadline.expired():
                raise _Expired from None
            raise

    # -- results -------------------------------------------------------------------

    def accept(self, i: int, call: Call, result: Any) -> ErrorInfo | None:
        """Check a tool's result and write it to its output path(s); an error, or None."""
        out = call.output
        branch: int | None = None
        if type(result) in _SCALARS:
            value = result
            if type(result) is float and not isfinite(result):
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"result is not JSON: {result!r} is not a JSON number")
        elif isinstance(result, Branch):
            branch = out.pick(result.target) if out is not None else None
            if branch is None:
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"{call.tool} picked branch {result.target!r}, which is "
                                 "not an alternative of its output path")
            result = result.value
        rt = type(result)
        if rt is str or (rt is int and (bits := result.bit_length()) < 14_000):
            # the common results, sized at once as json_size would (under 4,215 digits: JSON can hold it)
            measured = True
            size = len(result) + 2 if rt is str else bits * 30103 // 100000 + 2
            per_call, per_run = self.opts.max_result_bytes, self.opts.max_run_result_bytes
            if (per_call is None or size <= per_call) and (per_run is None or self.result_bytes + size <= per_run):
                self.result_bytes += size  # (what _charge does when nothing is over)
            elif (err := self._charge(call.tool, size)) is not None:
                return err
        else:
            measured = rt in _FIXED_SIZE
            if not measured:  # before converting: a result shaped as a bomb never expands
                size = json_size(result, self._size_room())
                if size is not None:
                    measured = True
                    if (err := self._charge(call.tool, size)) is not None:
                        return err
        if branch is not None or type(result) not in _SCALARS:
            try:
                value = to_json_value(result)
            except (TypeError, ValueError) as exc:
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"result is not JSON: {exc}")
        if not measured:
            size = json_size(value, self._size_room())
            if size is None:  # converted JSON data that is still not JSON: an integer past the limit
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"result is not JSON: {call.tool} returned an integer "
                                 "over 4,300 digits, which JSON readers refuse")
            if (err := self._charge(call.tool, size)) is not None:
                return err
        return self._write_result(i, call, value, branch)

    def accept_json(self, i: int, call: Call, value: Any) -> ErrorInfo | None:
        """:meth:`accept` for a result that is plain JSON data already, a tree (no value
        shared, no NaN: a map's item results, read from the store): not converted, and
        sized by the C encoder instead of :func:`json_size`'s walk."""
        try:
            size = len(_encode(value))
        except (TypeError, ValueError, RecursionError):  # not what it was said to be
            return self.accept(i, call, value)
        if (err := self._charge(call.tool, size)) is not None:
            return err
        return self._write_result(i, call, value, None)

    def _write_result(self, i: int, call: Call, value: Any, branch: int | None) -> ErrorInfo | None:
        """Validate a result (JSON data) and write it to its output path(s)."""
        s = self.state
        rec = s.records[i]
        out = call.output
        if self.opts.validate_output and call.inline_output is None:
            v = self._validators.get(call.tool, _UNSET)
            if v is _UNSET:
                spec = s.specs[i]
                v = self._validator(spec.output_schema if spec is not None else None, self._validators, call.tool)
            msg = v.check(value) if v is not None and type(value) not in v.accepts else None
            if msg:
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"result of {call.tool} does not match its output schema: {msg}")
        if out is not None and out.method is not _SET_METHOD and out.method in _NEEDS_TYPE:
            kind, ok = _NEEDS_TYPE[out.method]
            if not isinstance(value, ok):
                return ErrorInfo(TOOL_OUTPUT_INVALID, f"{call.tool} returned {type(value).__name__}, but "
                                 f"'{out.method.value}' writes need {kind}")
        if out is not None:
            targets = out.targets(branch)
            schema = s.feed.header.state_schema
            sw = state_writes(schema) if schema is not None else None
            if sw is not None:  # State.Invalid: checked before anything is written
                err = sw.check(call.tool, targets, value, out.method)
                if err is not None:
                    return err
        rec.output = value
        if s.gate.local_sources.get(call.tool, True):  # local data joins the session's taint set
            s.gate.observe(call.tool, s.specs[i], value)
        if out is not None:
            if out.is_branching:
                rec.branch = targets[0].text()
            write = s.store.write
            method, cid = out.method, rec.id
            for p in targets:
                write(p.kind, p.path, value, method, cid)
            done = s.wrote[i]
            s.wrote[i] = done + targets if done else targets
            rec.add_written(targets)
        rec.error = None
        return None

    def _size_room(self) -> int:
        """The most bytes the next result may take: its own bound and what the run has left."""
        per_call, per_run = self.opts.max_result_bytes, self.opts.max_run_result_bytes
        room = per_call if per_call is not None else 1 << 62
        if per_run is not None:
            room = min(room, max(per_run - self.result_bytes, 0))
        return room

    def _charge(self, tool: str, size: int) -> ErrorInfo | None:
        """Result.TooLarge when a result of ``size`` bytes passes a bound, else count it."""
        per_call, per_run = self.opts.max_result_bytes, self.opts.max_run_result_bytes
        if per_call is not None and size > per_call:
            return ErrorInfo(RESULT_TOO_LARGE, f"the result of {tool} is over {per_call:,} bytes as JSON "
                             "(max_result_bytes)")
        if per_run is not None and self.result_bytes + size > per_run:
            return ErrorInfo(RESULT_TOO_LARGE, f"the result of {tool} would bring the run's results over "
                             f"{per_run:,} bytes as JSON (max_run_result_bytes)")
        self.result_bytes += size
        return None

    def fail(self, i: int, err: ErrorInfo) -> None:
        """Call ``i`` failed: a branching output delivers the error to its last alternative."""
        s = self.state
        rec = s.records[i]
        rec.error = err
        out = s.calls[i].output
        if out is not None and (catch := out.catch) is not None:
            s.store.write(catch.kind, catch.path, err.to_json(), out.method, rec.id)
            s.wrote[i] += (catch,)
            rec.add_written((catch,))
            rec.caught = True
            rec.branch = catch.text()
            rec.reason = f"error delivered to {catch.text()}"
        s.finish(i, "failed")
