"""A reference interpreter: sequential, simple, obviously right.

It shares no scheduling or state code with :mod:`.scheduler`: calls run one
at a time in a topological order (smallest plan position first), every read
re-folds the whole message log from the beginning, writers are found by
comparing every pair of calls.  It exists to check the concurrent scheduler
(tests/runtime/test_reference_agreement.py); it supports the same semantics
except approval gates, timeouts, cancellation and events.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import re
from typing import Any

from dataclasses import replace

from ..jmes_limits import DEFAULT_LIMITS, QueryTooExpensive
from ..maps import body_ids, outer_reads, outer_values, plain_outer_reads, tolerance_exceeded
from ..model import Expression, ListValue, Literal, ObjectValue, OutputMethod, Plan, Reference, Template
from ..refs import query_value
from ..values import template_to_string
from ..tools import as_registry
from ..toolsource import resolve_tools
from ..checks.schema import offline_registry, offline_validator, write_schema
from ..diagnostics import Diagnostic, Severity
from ..errors import OptionError
from .errors import (OUTPUT_INVALID, REF_TOO_EXPENSIVE, REF_UNRESOLVED, STATE_INVALID, TOOL_OUTPUT_INVALID, ErrorInfo,
                     PlanInvalid, error_from_exception, matches)
from .protocols import Branch
from .result import CallRecord, RunResult

__all__ = ["reference_run", "areference_run"]

_NOTHING = object()


def _prefix_related(a: tuple, b: tuple) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _write(root: Any, path: tuple, value: Any, method: OutputMethod) -> Any:
    """Return root with value combined at path (works on a private deep copy)."""
    if len(path) == 0:
        old = root
        if method == OutputMethod.SET or old is _NOTHING:
            if method == OutputMethod.PUSH:
                return [value]
            if method == OutputMethod.CONCAT:
                return list(value) if isinstance(value, list) else [value]
            return value
        if method == OutputMethod.MERGE:
            def merge(a, b):
                if isinstance(a, dict) and isinstance(b, dict):
                    out = dict(a)
                    for k in b:
                        out[k] = merge(a[k], b[k]) if k in a else b[k]
                    return out
                return b
            return merge(old, value)
        if method == OutputMethod.ASSIGN:
            return {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value
        old_list = old if isinstance(old, list) else [old]
        if method == OutputMethod.PUSH:
            return old_list + [value]
        return old_list + (value if isinstance(value, list) else [value])
    head = path[0]
    if isinstance(head, int):
        lst = root if isinstance(root, list) else []
        child = lst[head] if head < len(lst) else _NOTHING
        while len(lst) <= head:
            lst.append(None)
        lst[head] = _write(child, path[1:], value, method)
        return lst
    obj = root if isinstance(root, dict) else {}
    obj[head] = _write(obj.get(head, _NOTHING), path[1:], value, method)
    return obj


def _read(messages: list, kind: str, path: tuple) -> Any:
    root: Any = _NOTHING
    for m_kind, m_path, m_value, m_method, _call in messages:
        if m_kind == kind:
            root = _write(copy.deepcopy(root) if root is not _NOTHING else _NOTHING, m_path,
                          copy.deepcopy(m_value), m_method)
    cur = root
    for seg in path:
        if isinstance(seg, int):
            if isinstance(cur, list) and seg < len(cur):
                cur = cur[seg]
            else:
                return _NOTHING
        elif isinstance(cur, dict) and seg in cur:
            cur = cur[seg]
        else:
            return _NOTHING
    # (a whole kind nothing wrote is missing: deepcopy would make a new, unrelated sentinel)
    return _NOTHING if cur is _NOTHING else copy.deepcopy(cur)


def _read_ref(messages: list, r: Reference) -> Any:
    """What ``r`` reads: the value at its path, with its JMESPath query (if any) applied
    within the default bounds (QueryTooExpensive past them: the runtime's Ref.TooExpensive)."""
    v = _read(messages, r.kind, r.path)
    if r.query is None or v is _NOTHING:
        return v
    from ..refs import query_value

    return query_value(r.query, v)


def _too_expensive(what: str, exc: QueryTooExpensive) -> ErrorInfo:
    if len(what) > 120:
        what = what[:117] + "..."
    return ErrorInfo(REF_TOO_EXPENSIVE, f"{what}: {exc.message}")


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"))


async def areference_run(plan: Plan, tools: Any = None, *, input: Any = None, state: Any = None,
                         retry: Any = None, executor: Any = None, validate_output: bool = True,
                         cascade: str = "skip",
                         _context: dict | None = None, _messages: list | None = None) -> RunResult:
    # (_context: the data of one map item's run, by kind; _messages: that run's log, given back)
    # cascade "partial": a call with a failed dependency runs when another one succeeded, each
    # read the failure broke holding it (the items of a map keep "skip": _map does not pass it)
    registry = as_registry(resolve_tools(tools)).with_plan_decls(plan.tools)
    calls = list(plan.calls)
    n = len(calls)
    ids = plan.call_ids()
    messages: list = [] if _messages is None else _messages
    if input is not None:
        messages.append(("input", (), copy.deepcopy(input), OutputMethod.SET, None))
    if state is not None:
        messages.append(("state", (), copy.deepcopy(state), OutputMethod.SET, None))
    for kind, data in (_context or {}).items():
        messages.append((kind, (), copy.deepcopy(data), OutputMethod.SET, None))
    outputs = [[r.key for r in c.output.paths] if c.output else [] for c in calls]

    def writers(i: int, key: tuple) -> list[int]:
        return [j for j in range(n) if j != i and any(_prefix_related(key, k) for k in outputs[j])]

    deps = []
    for i, c in enumerate(calls):
        d = {ids.index(a) for a in c.after if a in ids and ids.index(a) != i}
        vals = [p.value for p in c.params] + ([c.inline_output] if c.inline_output is not None else [])
        if c.map is not None:  # a map waits for what its body reads outside the item
            vals += list(outer_reads(c.map))
        for v in vals:
            for r in _refs(v):
                d.update(writers(i, r.key))
        deps.append(d)
    if _context is None and (plan.state_schema is None or plan.input_schema is None):
        _refuse_unresolvable(plan, calls, writers, messages)
    # topological order, smallest position first
    order, done = [], set()
    while len(order) < n:
        ready = [i for i in range(n) if i not in done and deps[i] <= done]
        if not ready:
            raise OptionError("dependency cycle", code="Plan.Cycle")  # (a plan that was not checked: E302)
        order.append(ready[0])
        done.add(ready[0])

    recs = [CallRecord(ids[i], c.tool, i) for i, c in enumerate(calls)]
    items_recs: list[CallRecord] = []  # the calls of map items, after the plan's own
    wrote: list[list[tuple]] = [[] for _ in range(n)]

    def failure(ws: list[int]) -> dict | None:
        """The partial cascade's value of a read whose writers ``ws`` wrote nothing: the first
        failed one's error, else the first skipped one's; None if any did otherwise."""
        if not ws or any(wrote[j] or recs[j].status not in ("failed", "skipped") for j in ws):
            return None
        for j in ws:
            if recs[j].status == "failed" and recs[j].error is not None:
                return recs[j].error.to_json()
        return {"error": "Call.Skipped", "cause": f"{recs[ws[0]].id} was skipped"}

    for i in order:
        call, rec = calls[i], recs[i]
        partial = False  # the second pass of the partial cascade: failures are values

        broken: list[str] = []
        missing: list[str] = []
        expensive: list[ErrorInfo] = []  # the first read past its bounds

        def ref_value(r: Reference, caught: bool = True):
            ws = writers(i, r.key)
            if ws and not any(_prefix_related(r.key, k) for j in ws for k in wrote[j]):
                if all(_unwritten_accumulator(calls[j], recs[j], r) for j in ws):
                    # every writer succeeded by another branch of an accumulating `||`
                    return "has", [] if r.query is None else query_value(r.query, [])
                if partial and caught and failure(ws) is not None:
                    return "has", failure(ws)
                return "broken", None
            try:
                v = _read_ref(messages, r)
            except QueryTooExpensive as exc:
                if not expensive:
                    expensive.append(_too_expensive(r.text(), exc))
                return "expensive", None
            return ("missing", None) if v is _NOTHING else ("has", v)

        def ev(v: Any) -> Any:
            if isinstance(v, Literal):
                return v.value
            if isinstance(v, ListValue):
                return [ev(x) for x in v.items]
            if isinstance(v, ObjectValue):
                return {k: ev(x) for k, x in v.entries}
            if isinstance(v, Reference):
                st, val = ref_value(v)
                if st == "broken":
                    broken.append(v.text())
                elif st == "missing":
                    missing.append(v.text())
                return val
            if isinstance(v, Template):
                out, had = "", len(expensive)
                for part in v.parts:
                    text = part if isinstance(part, str) else _text(ev(part))
                    if len(expensive) == had and len(out) + len(text) > DEFAULT_LIMITS.max_bytes:
                        expensive.append(_too_expensive(template_to_string(v), QueryTooExpensive(
                            "size", f"the template's text would be more than {DEFAULT_LIMITS.max_bytes:,} characters")))
                    if len(expensive) == had:
                        out += text
                return out
            if isinstance(v, Expression):
                if v.op == "&&":
                    return [ev(r) for r in v.operands][-1]
                states = []
                for r in v.operands:  # the leftmost with a value (or past its bounds) decides
                    st, val = ref_value(r, caught=False)
                    if st == "has":
                        return val
                    if st == "expensive":
                        return None
                    states.append((st, val))
                for r, (st, _) in zip(v.operands, states):  # partial cascade: the leftmost failure
                    if partial and st == "broken" and failure(writers(i, r.key)) is not None:
                        return failure(writers(i, r.key))
                if any(st == "broken" for st, _ in states):
                    broken.append(v.text())
                else:
                    missing.append(v.text())
                return None
            raise AssertionError(f"not a plan value: {v!r}")  # the value kinds are closed

        def inputs() -> tuple[dict, Any]:
            for a in call.after:
                j = ids.index(a)
                if recs[j].status != "succeeded" and not recs[j].caught and \
                        not (partial and recs[j].status in ("failed", "skipped")):
                    broken.append(a)
            return ({p.name: ev(p.value) for p in call.params},
                    ev(call.inline_output) if call.inline_output is not None else None)

        args, inline = inputs()
        if broken and cascade == "partial" and call.map is None and \
                any(recs[j].status == "succeeded" for j in deps[i]):
            partial = True
            broken, missing, expensive = [], [], []
            args, inline = inputs()
        if call.map is not None:  # what every item reads outside it: broken skips the map
            broken += [r.text() for r in plain_outer_reads(call.map) if ref_value(r)[0] == "broken"]
        if broken:
            rec.status, rec.reason = "skipped", "broken input: " + ", ".join(broken)
            continue
        if expensive:
            rec.status, rec.error = "failed", expensive[0]
            continue
        if missing:
            # (worded as the scheduler words it: the partial cascade hands it to dependents)
            rec.status, rec.error = "failed", ErrorInfo(REF_UNRESOLVED, "no value at " + ", ".join(missing))
            continue

        spec = registry.get(call.tool)
        policy = call.retry
        if policy is None and retry is not None:
            policy = retry if not isinstance(retry, dict) else retry.get(call.tool)
        max_attempts = policy.max_attempts if policy else 1
        if call.map is not None:
            max_attempts = 1  # a map is not retried (its items' calls are)
        while True:
            rec.attempts += 1
            err = None
            target = 0
            try:
                if call.map is not None:
                    result = await _map(plan, call, ids[i], args["over"], messages, items_recs, tools,
                                        retry=retry, executor=executor, validate_output=validate_output)
                    spec = None
                elif call.inline_output is not None:
                    result = inline
                elif spec is not None and spec.func is not None:
                    result = spec.func(**copy.deepcopy(args))
                    if inspect.isawaitable(result):
                        result = await result
                else:
                    result = await executor.execute(args)  # pragma: no cover - minimal
                if isinstance(result, Branch):
                    picked = call.output.pick(result.target) if call.output is not None else None
                    if picked is None:
                        raise _Invalid(f"{call.tool} picked branch {result.target!r}, which is not an "
                                       "alternative of its output path")
                    target = picked
                    result = result.value
                # results are normalised to JSON as pydantic serialises them (tuples, sets,
                # dataclasses, models...); anything else is Tool.OutputInvalid
                try:
                    from pydantic_core import to_jsonable_python
                    result = json.loads(json.dumps(to_jsonable_python(result)))
                except (TypeError, ValueError) as exc:
                    raise _Invalid(f"result is not JSON: {exc}") from None
                if validate_output and spec is not None and call.inline_output is None and spec.output_schema:
                    import jsonschema
                    try:
                        jsonschema.validate(result, spec.output_schema, registry=offline_registry())
                    except jsonschema.ValidationError as exc:
                        # the scheduler's wording: causes can flow into templates via a catch
                        where = "/".join(str(p) for p in exc.absolute_path)
                        raise _Invalid(f"result of {call.tool} does not match its output schema: "
                                       f"{exc.message}" + (f" (at /{where})" if where else "")) from None
                # spec, output methods: merge/assign of a non-object, concat of a non-list is
                # Tool.OutputInvalid of the writing call and nothing is written
                method = call.output.method if call.output is not None else None
                need = {OutputMethod.MERGE: ("an object", dict), OutputMethod.ASSIGN: ("an object", dict),
                        OutputMethod.CONCAT: ("a list", list)}.get(method)
                if need is not None and not isinstance(result, need[1]):
                    raise _Invalid(f"{call.tool} returned {type(result).__name__}, but '{method.value}' "
                                   f"writes need {need[0]}")
                if call.output is not None and plan.state_schema is not None:
                    chosen = list(call.output.targets(target))
                    bad = _state_error(plan.state_schema, chosen, result, method)
                    if bad is not None:
                        raise _StateInvalid(bad)
            except _MapFailed as exc:
                err = exc.info
            except _StateInvalid as exc:
                err = ErrorInfo(STATE_INVALID, str(exc))
            except _Invalid as exc:
                err = ErrorInfo(TOOL_OUTPUT_INVALID, str(exc))
            except Exception as exc:  # noqa: BLE001
                err = error_from_exception(exc)
            if err is None:
                out = call.output
                if out is not None:
                    targets = out.targets(target)
                    for p in targets:
                        messages.append((p.kind, p.path, copy.deepcopy(result), out.method, rec.id))
                        wrote[i].append(p.key)
                        rec.written.append(p.text())
                    if out.is_branching:
                        rec.branch = targets[0].text()
                rec.status = "succeeded"
                break
            if rec.attempts < max_attempts and matches(err.error, policy.errors if policy else ()):
                continue
            rec.status, rec.error = "failed", err
            if call.output is not None and (catch := call.output.catch) is not None:
                messages.append((catch.kind, catch.path, err.to_json(), call.output.method, rec.id))
                wrote[i].append(catch.key)
                rec.written.append(catch.text())
                rec.branch = catch.text()
                rec.caught = True
            break

    kinds = []
    for kind, *_ in messages:
        if kind != "input" and kind not in kinds:
            kinds.append(kind)
    final = {k: _read(messages, k, ()) for k in kinds}
    final = {k: v for k, v in final.items() if v is not _NOTHING}
    status = "failed" if any(r.status == "failed" and not r.caught for r in recs) else "succeeded"
    output, plan_error = None, None
    if plan.output is not None:
        missing: list[str] = []
        try:  # after a failure, loosely: a reference past its bounds is null, as a missing one
            output = _final(plan.output, messages, missing, loose=status != "succeeded")
        except QueryTooExpensive as exc:
            output, plan_error = None, _too_expensive("the plan's output", exc)
        if plan_error is not None:
            pass
        elif status == "succeeded" and missing:
            plan_error = ErrorInfo(REF_UNRESOLVED, "the plan's output has no value at " + ", ".join(missing))
        elif status == "succeeded" and validate_output and isinstance(plan.output_schema, dict):
            import jsonschema
            try:
                jsonschema.validate(output, plan.output_schema, registry=offline_registry())
            except jsonschema.ValidationError as exc:
                plan_error = ErrorInfo(OUTPUT_INVALID, f"the plan's output does not match its output schema: "
                                                       f"{exc.message}")
        if plan_error is not None:
            status = "failed"
    log = [{"kind": k, "path": list(p), "value": v, "method": m.value, "call": c} for k, p, v, m, c in messages]
    return RunResult(status, final, output, recs + items_recs, log, plan.id or "plan", plan.goal, plan_error)


class _MapFailed(Exception):
    def __init__(self, info: ErrorInfo) -> None:
        self.info = info


async def _map(plan: Plan, call: Any, cid: str, over: Any, messages: list, out_recs: list, tools: Any,
               **kw: Any) -> list:
    """A map call, one item after the other: each item's body runs as a plan of its own, seeded
    with the data of every kind so far and the item's names; its records join ``out_recs``."""
    spec = call.map
    if not isinstance(over, list):
        what = {dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}.get(type(over), "a number")
        raise _MapFailed(ErrorInfo("Map.NotAList", f"map {cid} goes over {what}, not a list"))
    shadowed = {"local", spec.item, spec.index}
    kinds = [k for k, *_ in messages if k not in shadowed]
    base = {k: _read(messages, k, ()) for k in dict.fromkeys(kinds)}
    base = {k: v for k, v in base.items() if v is not _NOTHING}
    body = tuple(replace(c, id=b) for c, b in zip(spec.body, body_ids(spec)))
    results: list = []
    failed: list[tuple[int, ErrorInfo]] = []
    for k, item in enumerate(over):
        kind = f"{cid}[{k}]"
        sub_messages: list = []
        res = await areference_run(Plan(body, state_schema=plan.state_schema), tools,
                                   _context={**base, spec.item: item, spec.index: k}, _messages=sub_messages, **kw)
        err = None
        for r in res.calls:
            r.id = f"{kind}.{r.id}"
            if r.status == "failed" and not r.caught:
                err = err or r.error
                r.caught = True
            out_recs.append(r)
        value = None
        if err is None and spec.result is None:
            local = _read(sub_messages, "local", ())
            value = {} if local is _NOTHING else local
        elif err is None:
            missing: list[str] = []
            try:
                value = _final(spec.result, sub_messages, missing)
            except QueryTooExpensive as exc:
                value, err = None, _too_expensive(f"the result of item {k} of map {cid}", exc)
            if err is not None:
                pass
            elif missing:  # named as the scheduler names the item's data: †local@c1[0].x
                named = [re.sub(rf"^†({'|'.join(map(re.escape, shadowed))})(?=[.\[]|$)", rf"†\1@{kind}", m)
                         for m in missing]
                err = ErrorInfo(REF_UNRESOLVED, f"the result of item {k} of map {cid} has no value at "
                                + ", ".join(named))
        if err is not None:
            failed.append((k, err))
            results.append(err.to_json())
            if tolerance_exceeded(spec, len(failed), len(over)):
                first = failed[0][1]
                limit = (f"tolerated: {spec.tolerate}" if spec.tolerate is not None else
                         f"tolerated: {spec.tolerate_percent:g}%" if spec.tolerate_percent is not None
                         else "none tolerated")
                raise _MapFailed(ErrorInfo("Map.Failed", f"{len(failed)} of {len(over)} items of map {cid} failed "
                                           f"({limit}); first: {first.error}: {first.cause}"))
        else:
            results.append(value)
    return results


def _unwritten_accumulator(call: Any, rec: CallRecord, r: Reference) -> bool:
    """``r`` is an alternative of ``call``'s accumulating ``||`` output (``<<=``, ``+=``)
    and the call succeeded (so it took another alternative): ``r`` reads as []."""
    out = call.output
    return (rec.status == "succeeded" and out is not None and out.is_branching
            and out.method in (OutputMethod.PUSH, OutputMethod.CONCAT)
            and out.holds(r))


def _refuse_unresolvable(plan: Plan, calls: list, writers: Any, messages: list) -> None:
    """Raise PlanInvalid (E301) when a parameter or the output reads a ``state`` path that no
    other call writes and the initial state does not hold (for ``||``: every alternative is
    such a read; inline outputs are not checked); E310 likewise for an ``input`` path the
    run's input lacks when the plan has no input schema (a ``||`` only when every
    alternative is an input read, as the checker's W305)."""
    def never(i: int | None, r: Reference) -> bool:
        return (plan.state_schema is None and r.kind == "state" and not writers(i, r.key)
                and _read(messages, "state", r.path) is _NOTHING)

    def missing_input(r: Reference) -> bool:
        return plan.input_schema is None and r.kind == "input" and _read(messages, "input", r.path) is _NOTHING

    def groups(v: Any):
        if isinstance(v, ListValue):
            for x in v.items:
                yield from groups(x)
        elif isinstance(v, ObjectValue):
            for _, x in v.entries:
                yield from groups(x)
        elif isinstance(v, Reference):
            yield [v], False
        elif isinstance(v, Template):
            for part in v.parts:
                if not isinstance(part, str):
                    yield [part], False
        elif isinstance(v, Expression):
            if v.op == "||":
                yield list(v.operands), True
            else:
                for r in v.operands:
                    yield [r], False

    values = [(i, p.value) for i, c in enumerate(calls) for p in c.params]
    if plan.output is not None:
        values.append((None, plan.output))
    outer = [(i, x, True) for i, c in enumerate(calls) if c.map is not None for x in outer_values(c.map)]
    for i, v, in_map in [*((i, v, False) for i, v in values), *outer]:
        for refs, _any_of in groups(v):
            if all(missing_input(r) for r in refs):
                raise PlanInvalid([Diagnostic("E310", f"{refs[0].text()}: the run's input does not have it",
                                              severity=Severity.ERROR)])
            if not in_map and all(never(i, r) for r in refs):
                raise PlanInvalid([Diagnostic("E301", f"{refs[0].text()} can never resolve", severity=Severity.ERROR)])


def _final(v: Any, messages: list, missing: list, loose: bool = False) -> Any:
    """The plan's output against the final log; references with no value go to ``missing``.
    A reference (or template) past its bounds raises QueryTooExpensive, or is null when
    ``loose`` (the output of a run that failed)."""
    if isinstance(v, Literal):
        return v.value
    if isinstance(v, ListValue):
        return [_final(x, messages, missing, loose) for x in v.items]
    if isinstance(v, ObjectValue):
        return {k: _final(x, messages, missing, loose) for k, x in v.entries}
    if isinstance(v, Reference):
        val = _read_loose(messages, v) if loose else _read_ref(messages, v)
        if val is _NOTHING:
            missing.append(v.text())
            return None
        return val
    if isinstance(v, Template):
        text = "".join(p if isinstance(p, str) else _text(_final(p, messages, missing, loose)) for p in v.parts)
        if len(text) > DEFAULT_LIMITS.max_bytes:
            if loose:
                return None
            raise QueryTooExpensive("size", f"the template's text would be more than "
                                            f"{DEFAULT_LIMITS.max_bytes:,} characters")
        return text
    if isinstance(v, Expression):
        if v.op == "&&":
            return [_final(r, messages, missing, loose) for r in v.operands][-1]
        for r in v.operands:
            val = _read_loose(messages, r) if loose else _read_ref(messages, r)
            if val is not _NOTHING:
                return val
        missing.append(v.text())
        return None
    raise AssertionError(f"not a plan value: {v!r}")  # the value kinds are closed


def _read_loose(messages: list, r: Reference) -> Any:
    try:
        return _read_ref(messages, r)
    except QueryTooExpensive:
        return _NOTHING


def _state_error(schema: Any, paths: list, value: Any, method: OutputMethod) -> str | None:
    """Why writing ``value`` to ``paths`` with ``method`` breaks the state schema, or None:
    each written value against the schema at its path (push/concat: each item against the
    list's items; merge/assign: each key, merge recursing into objects)."""
    def at(path: tuple, x: Any) -> str | None:
        sub = write_schema(schema, schema, path)
        if sub is None:
            return None
        if sub is False:
            return f"nothing may be written at {path}"
        if isinstance(sub, dict):
            sub = {**sub, **{k: schema[k] for k in ("$defs", "definitions") if k in schema and k not in sub}}
        errs = list(offline_validator(sub).iter_errors(x))
        return errs[0].message if errs else None

    def written(path: tuple, x: Any) -> str | None:
        if method == OutputMethod.SET:
            return at(path, x)
        if method in (OutputMethod.PUSH, OutputMethod.CONCAT):
            items = x if method == OutputMethod.CONCAT and isinstance(x, list) else [x]
            return next((m for m in (at((*path, 1 << 30), y) for y in items) if m), None)
        if isinstance(x, dict):
            for k, y in x.items():
                m = written((*path, k), y) if method == OutputMethod.MERGE and isinstance(y, dict) \
                    else at((*path, k), y)
                if m:
                    return m
            return None
        return at(path, x)

    for p in paths:
        if p.kind.partition("@")[0] == "state":
            m = written(p.path, value)
            if m:
                return f"{p.text()}: {m}"
    return None


class _Invalid(Exception):
    pass


class _StateInvalid(Exception):
    pass


def _refs(v: Any):
    from ..model import iter_references
    return iter_references(v)


def reference_run(plan: Plan, tools: Any = None, **kw: Any) -> RunResult:
    """Run ``plan`` with the reference interpreter (synchronous wrapper)."""
    return asyncio.run(areference_run(plan, tools, **kw))
