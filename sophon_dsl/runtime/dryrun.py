"""Dry-run: run a plan with every tool mocked (like the Step Functions TestState API).

Nothing real runs.  Each call answers from ``mocks`` (by call id first, then by
tool name) or, failing that, from a sample derived from the tool's output
schema.  A mock entry is ``{"result": ...}``, ``{"error": "Name"}`` /
``{"error": {"error": ..., "cause": ...}}``, optionally with ``"latency"``
(seconds), or a list of such entries answered in turn (the last repeats), so
retries can be simulated.  ``"branch"`` (a 0-based index or an alternative's
path text, ``"†state.b"`` or ``"state.b"``) picks an alternative of a
``†a || †b`` output path: the mock answers ``Branch(branch, result)``, as an
activity would.  Mocks files are YAML or JSON::

    web.search: {result: {hits: [a, b]}, latency: 0.8}
    s5: [{error: Tool.Timeout, latency: 30}, {result: {sent: true}, latency: 1}]
    pay: {branch: "†state.declined", result: {reason: expired}}

The report gives the order, which calls would run in parallel, which branches
are taken and which skipped (with reasons), the approvals that would be asked
for, the makespan predicted from the latencies (unbounded concurrency), and
the arguments each mocked call was given, per attempt (``arguments``).

A sample stands in for what the simulation cannot know, so it never fails the
run: a schema no sample satisfies (a ``pattern``, contradictory keywords) and a
read that finds nothing inside a sampled result (``†state.hits[0].url`` when the
tool returns ``list[dict]``) are listed in ``unknown_samples`` and the read gets
the placeholder text ``<unknown sample: REF>``.  Mock entries whose key is
neither a call id nor a tool the plan calls are listed in ``warnings``, with the
closest name.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import OptionError, OptionTypeError
from ..maps import called_tools, expansion
from ..model import OutputMethod, Plan, Reference, Risk
from ..tools import ToolRegistry
from .api import _load, _validate_input, prepare, seeded
from .approval import auto_approver
from .gate import plan_risky
from .errors import RunError
from .events import EventBus
from .protocols import Branch, LatentRequest
from .result import RunResult
from .retry import retry_delay
from .samples import sample, sample_from_schema
from .scheduler import RunOptions, Scheduler
from .state import MISSING
from .store import MemoryStore

__all__ = ["DryRunReport", "dry_run", "adry_run", "load_mocks", "mock_problems", "mock_key_warnings",
           "sample_from_schema"]


def load_mocks(source: Any) -> dict:
    """Mocks from a dict, a JSON/YAML file path, or JSON/YAML text."""
    if source is None:
        return {}
    if isinstance(source, dict):
        return _checked(source)
    text = None
    if isinstance(source, (str, os.PathLike)) and os.path.exists(source):
        text = Path(source).read_text(encoding="utf-8")
    elif isinstance(source, str):
        text = source
    if text is None:
        raise OptionTypeError(f"cannot read mocks from {source!r}")
    try:
        data = json.loads(text)
    except ValueError:
        import yaml

        data = yaml.safe_load(text)
    if data is None:
        return {}
    return _checked(data)


def _checked(data: Any) -> dict:
    problems = mock_problems(data)
    if problems:
        raise OptionError("; ".join(f"{path}: {message}" for path, message in problems), code="DryRun.MocksInvalid")
    return data


def mock_problems(mocks: Any) -> list[tuple[str, str]]:
    """``(JSON path, what was expected)`` for each malformed part of a mocks mapping."""
    from ..syntax.located import child_path

    if not isinstance(mocks, dict):
        return [("$", f"a mocks file maps tool names or call ids to mock entries; got {_kind(mocks)}")]
    problems: list[tuple[str, str]] = []
    for key, value in mocks.items():
        path = child_path("$", str(key))
        entries = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for k, entry in entries:
            where = path if k is None else child_path(path, k)
            if isinstance(entry, dict) and _ENTRY_KEYS & set(entry):
                problems.extend(_entry_problems(where, entry))
    return problems


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return "a list" if isinstance(value, list) else "an object"


def _entry_problems(path: str, entry: dict) -> list[tuple[str, str]]:
    from ..syntax.located import child_path

    out = []
    for key in entry:
        if key not in _ENTRY_KEYS:
            out.append((child_path(path, str(key)),
                        f"unknown mock entry key {str(key)!r}; expected {', '.join(sorted(_ENTRY_KEYS))} "
                        "(a result holding these keys goes under \"result\")"))
    lat = entry.get("latency")
    if lat is not None and not (isinstance(lat, (int, float)) and not isinstance(lat, bool)
                                and math.isfinite(lat) and lat >= 0):
        out.append((child_path(path, "latency"), f"latency must be a number of seconds >= 0, got {_kind(lat)}"))
    err = entry.get("error")
    if isinstance(err, dict):
        for key in err:
            if key not in ("error", "cause"):
                out.append((child_path(child_path(path, "error"), str(key)),
                            f"unknown error key {str(key)!r}; expected error, cause"))
        for key in ("error", "cause"):
            if key in err and not isinstance(err[key], str):
                out.append((child_path(child_path(path, "error"), key),
                            f"{key} must be a string, got {_kind(err[key])}"))
    elif err is not None and not isinstance(err, str):
        out.append((child_path(path, "error"), "error must be an error name such as \"Tool.Timeout\" or "
                                               f"{{\"error\": ..., \"cause\": ...}}, got {_kind(err)}"))
    branch = entry.get("branch")
    if branch is not None and not (isinstance(branch, str) or (isinstance(branch, int)
                                                                and not isinstance(branch, bool) and branch >= 0)):
        out.append((child_path(path, "branch"), "branch must be an alternative's index (0, 1, ...) or its path "
                                                f"(\"†state.b\"), got {_kind(branch)}"))
    return out


def mock_key_warnings(mocks: dict, ids: Any, tools: Any) -> list[str]:
    """A warning for each mock key that is neither a call id nor a tool the plan calls (such an
    entry is never used), naming the closest id or tool name."""
    known = list(dict.fromkeys([*ids, *tools]))
    out = []
    for key in mocks:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        out.append(f"mock {str(key)!r} matches no call id or tool name of the plan, so it is never used{hint}")
    return out


@dataclass
class DryRunReport:
    status: str
    order: list[str]
    parallel_groups: list[list[str]]
    schedule: list[dict]
    branches: list[dict]
    skipped: list[dict]
    approvals: list[dict]
    makespan: float
    sequential_time: float
    result: RunResult = field(repr=False, default=None)  # type: ignore[assignment]
    # the arguments each mocked call was given, one dict per attempt, by call id
    arguments: dict[str, list[dict]] = field(repr=False, default_factory=dict)
    # what the samples could not stand for: {"id", "tool", "reason"} (+ "ref" for a read)
    unknown_samples: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)   # mock keys that match nothing
    # each map call's expansion: {"id", "items": [{"item", "calls": [{"id", "status"}]}], ...}
    maps: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "status": self.status, "order": self.order, "parallel_groups": self.parallel_groups,
            "schedule": self.schedule, "branches": self.branches, "skipped": self.skipped,
            "approvals": self.approvals, "predicted_makespan": round(self.makespan, 6),
            "sequential_time": round(self.sequential_time, 6),
            "calls": [c.to_json() for c in self.result.calls] if self.result else [],
            "state": self.result.state if self.result else {},
            "unknown_samples": self.unknown_samples, "warnings": self.warnings, "maps": self.maps,
        }

    def to_text(self) -> str:
        lines = [f"dry-run: {self.status}; predicted makespan {self.makespan:.3f} s "
                 f"(sequential {self.sequential_time:.3f} s)"]
        if self.approvals:
            lines.append("approval needed for: " + ", ".join(_approval_text(a) for a in self.approvals))
        for k, group in enumerate(self.parallel_groups, 1):
            lines.append(f"  step {k}: " + ", ".join(group))
        for b in self.branches:
            if b["taken"] is None:  # the call failed, was skipped or never ran: no branch was taken
                lines.append(f"  branch {b['id']}: none taken ({b.get('status', 'not run')})")
            else:
                lines.append(f"  branch {b['id']}: took {b['taken']}; not taken: {', '.join(b['not_taken']) or '-'}")
        for m in self.maps:
            calls = [c["id"] for item in m["items"][:2] for c in item["calls"]]
            more = ", ..." if len(m["items"]) > 2 else ""
            lines.append(f"  map {m['id']}: {len(m['items'])} item(s), {m['failed_items']} failed: "
                         f"{', '.join(calls)}{more}")
        for u in self.unknown_samples:
            lines.append(f"  unknown sample {u['id']} ({u['tool']}): {u['reason']}")
        for s in self.skipped:
            lines.append(f"  skipped {s['id']}: {s['reason']}")
        for rec in self.result.calls if self.result else ():
            if rec.status == "failed" and rec.error is not None:
                lines.append(f"  failed {rec.id} ({rec.tool}): {rec.error}")
        return "\n".join(lines)


_ENTRY_KEYS = frozenset({"result", "error", "latency", "branch"})


class Samples:
    """Each tool's output sample (made once), and the calls a sample answered."""

    def __init__(self, registry: ToolRegistry):
        self.registry = registry
        self.by_tool: dict[str, tuple[Any, str | None]] = {}
        self.answered: dict[str, str] = {}   # call id -> tool
        self.unknown: list[dict] = []

    def of(self, tool: str) -> tuple[Any, str | None]:
        """``(sample, problem)``; no usable schema gives the text ``<TOOL result>``."""
        if tool not in self.by_tool:
            spec = self.registry.get(tool)
            schema = spec.output_schema if spec is not None else None
            self.by_tool[tool] = sample(schema) if schema else (f"<{tool} result>", None)
        return self.by_tool[tool]

    def answer(self, cid: str, tool: str) -> Any:
        value, problem = self.of(tool)
        self.answered[cid] = tool
        if problem is not None:
            self.unknown.append({"id": cid, "tool": tool,
                                 "reason": f"no sample satisfies the output schema ({problem})"})
        return value

    def accepting(self, spec: Any) -> Any:
        """``spec`` whose output schema also accepts its own sample when that sample is not valid,
        so the run goes on past what the simulation cannot produce (a mock result is still
        checked against the tool's schema)."""
        schema = spec.output_schema
        if not schema or not isinstance(schema, dict):
            return spec
        value, problem = self.of(spec.name)
        if problem is None:
            return spec
        # keywords that address the whole document stay at the root, so "#/$defs/..." still resolves
        root_keys = ("$schema", "$id", "$defs", "definitions")
        inner = {k: v for k, v in schema.items() if k not in root_keys}
        wrapped = {k: schema[k] for k in root_keys if k in schema}
        wrapped["anyOf"] = [{"const": value}, inner]
        return replace(spec, output_schema=wrapped)


class SampledStore(MemoryStore):
    """The run's store, where a read that finds nothing inside a value a sample wrote gets a
    placeholder (and is reported) instead of failing with Ref.Unresolved: the sample could not
    know what the real tool would have put there."""

    def __init__(self, samples: Samples):
        super().__init__()
        self.samples = samples
        self.sampled_writes: list[tuple[str, tuple, str]] = []
        self._reported: set[str] = set()
        write, get = self.write, self.get

        def write_through(kind: str, path: tuple, value: Any, method: OutputMethod = OutputMethod.SET,
                          call: str | None = None) -> None:
            write(kind, path, value, method, call)
            if call in samples.answered:
                self.sampled_writes.append((kind, tuple(path), call))

        def read(kind: str, path: tuple = ()) -> Any:
            value = get(kind, path)
            if value is MISSING and self.sampled_writes:
                return self._unknown(kind, tuple(path), value)
            return value

        self.write, self.get = write_through, read

    def _unknown(self, kind: str, path: tuple, missing: Any) -> Any:
        for wkind, wpath, cid in self.sampled_writes:
            if wkind == kind and path[:len(wpath)] == wpath and len(path) > len(wpath):
                ref = Reference(kind, path).text()
                if ref not in self._reported:
                    self._reported.add(ref)
                    tool = self.samples.answered[cid]
                    self.samples.unknown.append({
                        "id": cid, "tool": tool, "ref": ref,
                        "reason": f"the sample of {tool}'s output has no value at {ref}"})
                return f"<unknown sample: {ref}>"
        return missing


class _MockExecutor:
    def __init__(self, mocks: dict, samples: Samples):
        self.mocks = mocks
        self.samples = samples
        self.seen: dict[str, int] = {}
        self.latency: dict[str, list[float]] = {}
        self.arguments: dict[str, list[dict]] = {}

    async def execute(self, request: LatentRequest) -> Any:
        cid = request.call_id
        entry = self.mocks.get(cid, self.mocks.get(request.call.tool))
        k = self.seen.get(cid, 0)
        self.seen[cid] = k + 1
        self.arguments.setdefault(cid, []).append(request.args)
        if isinstance(entry, list):
            entry = entry[min(k, len(entry) - 1)] if entry else None
        if not isinstance(entry, dict) or not (_ENTRY_KEYS & set(entry)):
            entry = {"result": entry} if entry is not None else {}
        self.latency.setdefault(cid, []).append(float(entry.get("latency", 0.0) or 0.0))
        if "error" in entry and entry["error"] is not None:
            err = entry["error"]
            if isinstance(err, dict):
                raise RunError(str(err.get("error", "Tool.Failed")), str(err.get("cause", "")))
            raise RunError(str(err), "mocked error")
        if "result" in entry:
            value = entry["result"]
        else:
            value = self.samples.answer(cid, request.call.tool)
        if entry.get("branch") is not None:
            return Branch(entry["branch"], value)
        return value


async def adry_run(plan: Any, tools: Any = None, *, mocks: Any = None, input: Any = None, state: Any = None,
                   retry: Any = None, approval_risk: Risk = Risk.MEDIUM) -> DryRunReport:
    mocks = load_mocks(mocks)
    input, state = seeded(_load(plan), input, state)  # a context list's data, as a run uses it
    prep = prepare(plan, tools, executor=object(), initial_kinds=["state"] if state is not None else ())
    samples = Samples(prep.registry)
    called = _called(prep.plan)
    mock_reg = ToolRegistry([samples.accepting(mock) if mock.name in called else mock
                             for mock in (replace(s, func=None, is_async=False) for s in prep.registry.values())])
    ex = _MockExecutor(mocks, samples)
    store = SampledStore(samples)

    async def no_sleep(_d: float) -> None:
        return None

    given_input = input  # (a sampled input says nothing about a map's real item count)
    if input is None and prep.plan.input_schema is not None:
        # Nothing real runs, so an input the caller did not give is sampled from its schema.
        input = sample_from_schema(prep.plan.input_schema)
    else:
        _validate_input(prep.plan, input)  # an input the caller gave is checked, as a run would
    # nothing real runs: every call is let through the gate; the approvals a real run would
    # ask for are reported (``approvals``), map bodies included
    opts = RunOptions(executor=ex, retry=retry, sleep=no_sleep, validate_input=False,
                      approver=auto_approver(True), max_expanded_calls=None)
    sched = Scheduler(prep.plan, mock_reg, ids=prep.ids, input=input, state=state, options=opts,
                      bus=EventBus(), flow=prep.flow, store=store)
    result = await sched.run()
    order = list(prep.flow.topo_order()[0])
    start = [0.0] * len(order)
    end = [0.0] * len(order)
    sequential = 0.0
    maps = []
    for i in order:
        rec = result.calls[i]
        lat = ex.latency.get(rec.id, [])
        dur = sum(lat)
        spec = prep.plan.calls[i].map
        if spec is not None:  # the items' calls, as the map expanded them
            maps.append(expansion(rec.id, result.calls, lambda c: sum(ex.latency.get(c, ())), spec.concurrency))
            dur = maps[-1]["predicted"]
            sequential += sum(sum(ex.latency.get(c["id"], ())) for it in maps[-1]["items"] for c in it["calls"]) - dur
        pol = sched.policy(i)
        if pol is not None and rec.attempts > 1:
            dur += sum(retry_delay(pol, k) for k in range(1, rec.attempts))
        s = max((end[j] for j in sched.waited_on[i]), default=0.0)
        start[i], end[i] = s, s + dur
        sequential += dur
    ran = [i for i in order if result.calls[i].status not in ("skipped", "cancelled")]
    # Calls that start at the same predicted time and sit at the same depth of the graph
    # would run side by side (depth separates them when latencies are all zero).
    depth = [0] * len(order)
    for i in order:
        depth[i] = 1 + max((depth[j] for j in sched.waited_on[i]), default=-1)
    groups: dict[tuple[float, int], list[str]] = {}
    for i in ran:
        groups.setdefault((round(start[i], 9), depth[i]), []).append(prep.ids[i])
    branches = []
    for i, call in enumerate(prep.plan.calls):
        if call.output is not None and call.output.is_branching:
            rec = result.calls[i]
            alts = [p.text() for p in call.output.paths]
            branch = {"id": rec.id, "taken": rec.branch, "not_taken": [a for a in alts if a != rec.branch]}
            if rec.branch is None:
                branch["status"] = rec.status
            branches.append(branch)
    return DryRunReport(
        status=result.status,
        order=[prep.ids[i] for i in ran],
        parallel_groups=[groups[k] for k in sorted(groups)],
        schedule=[{"id": prep.ids[i], "start": round(start[i], 6), "end": round(end[i], 6),
                   "status": result.calls[i].status} for i in order],
        branches=branches,
        skipped=[{"id": r.id, "reason": r.reason} for r in result.calls if r.status == "skipped"],
        approvals=plan_risky(prep.plan, prep.ids, prep.flow, prep.registry.get, approval_risk, given_input),
        makespan=max(end, default=0.0),
        sequential_time=sequential,
        result=result,
        arguments=ex.arguments,
        unknown_samples=samples.unknown,
        warnings=mock_key_warnings(mocks, prep.ids, called),
        maps=maps,
    )


def _called(plan: Plan) -> dict[str, None]:
    """The tools the plan calls, in order of first call."""
    return dict.fromkeys(called_tools(plan.calls))  # map bodies' tools too


def dry_run(plan: Any, tools: Any = None, **kw: Any) -> DryRunReport:
    """Synchronous :func:`adry_run`: ``dry_run(plan, tools=None, mocks=None, input=None, state=None)``."""
    return asyncio.run(adry_run(plan, tools, **kw))


def _approval_text(entry: dict) -> str:
    """``c5 (gmail.send, medium)``; a map body's call says it runs per item."""
    text = f"{entry['id']} ({entry['tool']}, {entry['risk']}"
    if entry.get("map"):
        n = entry.get("items")
        text += f", each item of map {entry['map']}" + (f": {n:,} item(s)" if n is not None else
                                                         ": asked again when the map starts")
    return text + ")"
