"""The concurrent scheduler and the reference interpreter agree on every value shape.

``test_reference_agreement.py`` gives every call its own output path.  This file
generates plans in which calls *share* paths, so that the scheduler's fast paths
(``_simple_args``, the first-pass skip, inline single-name reads, the per-tool
caches) see the shapes they special-case, and the slow paths see the rest:

* parameters: literals, references, lists mixing literals and references, lists
  and objects holding references at depth, templates, ``||`` and ``&&``
  expressions whose operands are written, missing or broken by a failed writer;
* references to nested paths and to prefixes of written paths (one call writes
  ``†state.user``, another ``†state.user.name``, a third reads ``†state.user``),
  list indexes into pushed lists, initial ``input`` / ``state`` data;
* forward references (plan order is a random permutation of a topological order);
* ``@after``; branching outputs ``a || b || err`` with tools that pick a branch
  (by index, by path, out of range) or raise; fan-out ``a && b``; every output
  method, with values of the type it needs and of wrong types; latent calls with
  an inline ``_output`` holding references; retries with error filters; async and
  sync tools; ``@timeout`` and ``max_concurrency`` (the non-direct invocation route);
* random latencies per attempt, so the concurrent order varies.

Only plans whose outcome the spec makes deterministic are generated: every pair
of calls whose writes do not commute is ordered by the graph (a ``@after`` edge is
added when the data flow does not order them; a ``||`` operand other than the
first orders nothing, since the reader may start before its writer ends), and the
tools canonicalise dict key order of what they echo (templates render compact JSON,
in which key order shows).  On those plans both interpreters must agree on the plan
status, every call's status, attempts, error name, caught flag, written paths and
branch, the final state and what each call wrote to the log.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from sophon_dsl.model import (
    Call, Expression, ListValue, Literal, ObjectValue, OutputMethod, OutputTarget, Param, Plan, Reference,
    RetryPolicy, Template, ToolDecl,
)
from sophon_dsl.runtime import Branch, RunError, arun
from sophon_dsl.runtime.errors import PlanInvalid
from sophon_dsl.runtime.reference import areference_run
from sophon_dsl.tools import tool

M = OutputMethod

# Writable paths (string segments only: an index segment next to a name segment under one
# parent would make the container type depend on timing, which the spec does not order).
W_POOL = [
    ("state", "user"), ("state", "user", "name"), ("state", "user", "tags"), ("state", "list"),
    ("state", "a"), ("state", "b"), ("state", "err"), ("data", "x"), ("data", "x", "y"), ("memo", "m"),
]
# Extra read-only paths: deeper than written, list indexes into paths nothing writes below,
# initial data, input, and paths nobody provides.
R_EXTRA = [
    ("state", "user", "name", "first"), ("state", "list", 0), ("state", "list", 1), ("state", "a", 0),
    ("memo", "m", 0), ("state", "seed"), ("state", "init", "k"), ("state", "init"), ("input", "x"),
    ("input", "obj", "k"), ("input", "obj"), ("state", "nothing"), ("data", "x", "y", "z"), ("data",),
    ("input",),
]
INITIAL_STATES = [
    {"seed": 1},
    {"seed": 2, "init": {"k": {"deep": [1, 2]}}, "user": {"name": "ann", "tags": ["t"]}},
    {"list": ["zero"], "a": "text", "err": None},
]
INPUT = {"x": "hello", "obj": {"k": [1, "two"], "z": None}}


def _ref(key: tuple) -> Reference:
    return Reference(key[0], tuple(key[1:]))


def _related(a: tuple, b: tuple) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def canon(v: Any) -> Any:
    """Dict keys sorted, recursively: what a tool echoes does not depend on write order."""
    if isinstance(v, dict):
        return {k: canon(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [canon(x) for x in v]
    return v


@dataclass
class _Point:
    x: int
    label: str


class _Opaque:
    """Not JSON: Tool.OutputInvalid."""


def _value(shape: str, key: str, index: int, a: Any, b: Any) -> Any:
    if shape == "dict":
        return {key: canon([a, b])}
    if shape == "list":
        return [key, canon(a)]
    if shape == "str":
        return key
    if shape == "num":
        return index
    if shape == "null":
        return None
    if shape == "tuple":
        return (key, index)
    if shape == "set":
        return {key}
    if shape == "dataclass":
        return _Point(index, key)
    if shape == "object":
        return _Opaque()
    return canon(a)  # "echo": a whole value passed through


def make_tools(behaviours: dict, latencies: dict) -> list:
    """``step`` (async) and ``stepsync`` (sync); each call passes its own key.  A behaviour
    is a list of outcomes, one per attempt (the last repeats):
    ("ok", shape) | ("fail", error name) | ("branch", target, shape).  A failing attempt
    first changes its list / object arguments in place (the retry must not see that)."""
    counters: dict[str, int] = {}

    def outcome(key: str, a: Any, b: Any) -> Any:
        n = counters[key] = counters.get(key, 0) + 1
        outs = behaviours[key]
        o = outs[min(n, len(outs)) - 1]
        index = int(key[1:])
        if o[0] == "fail":
            for arg in (a, b):  # a failing attempt spoils its (own copy of the) arguments
                if isinstance(arg, list):
                    arg.append("spoilt")
                elif isinstance(arg, dict):
                    arg["spoilt"] = n
            if o[1] == "Tool.Failed":
                raise RuntimeError(f"{key} failed at attempt {n}")
            raise RunError(o[1], f"{key} raised at attempt {n}")
        if o[0] == "branch":
            return Branch(o[1], _value(o[2], key, index, a, b))
        return _value(o[1], key, index, a, b)

    def delay(key: str) -> float:
        lat = latencies[key]
        return lat[min(counters.get(key, 0), len(lat) - 1)]

    async def step(key: str, a: Any = None, b: Any = None) -> Any:
        await asyncio.sleep(delay(key))
        return outcome(key, a, b)

    def stepsync(key: str, a: Any = None, b: Any = None) -> Any:
        time.sleep(delay(key))
        return outcome(key, a, b)

    # the same function with an output schema: results are validated (Tool.OutputInvalid)
    return [tool(step, name="step"), tool(stepsync, name="stepsync"),
            tool(step, name="steptyped", output_schema={"type": ["object", "array"]})]


THINK = ToolDecl("think", "a latent tool (inline outputs only)", latent=True)


class _Gen:
    """Per-plan generation state (topological order = generation order)."""

    def __init__(self, draw):
        self.draw = draw
        self.read_keys: list[set] = []      # per call: keys it reads
        self.out_keys: list[list] = []      # per call: keys it may write
        self.templates: set = set()         # keys read inside templates

    def readable(self, t: int) -> tuple[list, list, list]:
        """(paths earlier calls may write; likely paths: what earlier calls may write, their prefixes and
        extensions, initial data; every path that may be read)."""
        written = {k for ks in self.out_keys for k in ks}
        memo = any(w[0] == "memo" for w in written)
        every = [k for k in W_POOL + R_EXTRA if k[0] != "memo" or memo]
        every += sorted(k for k in written if k not in every)
        likely = [k for k in every if any(_related(k, w) for w in written)]
        likely += [("state", "seed"), ("state", "init", "k"), ("input", "x"), ("input", "obj", "k"),
                   ("state", "list", 0)]
        return sorted(written), likely, every

    def writable(self, t: int) -> list[tuple]:
        read = set().union(*self.read_keys) if self.read_keys else set()
        pool = W_POOL + [("state", f"o{t}"), ("data", f"o{t}")]
        return [k for k in pool if not any(_related(k, r) for r in read)]


def _value_expr(g: _Gen, t: int, reads: set) -> Any:
    draw = g.draw
    exact, likely, every = g.readable(t)

    def ref() -> Reference:
        which = draw(st.integers(0, 5))
        k = draw(st.sampled_from(exact if exact and which < 3 else likely if which < 5 else every))
        reads.add(k)
        return _ref(k)

    def lit() -> Literal:
        return Literal(draw(st.sampled_from([0, 1.5, "s", True, None, "x y"])))

    kind = draw(st.sampled_from(["lit", "ref", "ref", "mixlist", "deep", "object", "template", "or", "or",
                                 "and"]))
    if kind == "lit":
        return lit()
    if kind == "ref":
        return ref()
    if kind == "mixlist":  # literals and references only: the fast argument route
        return ListValue(tuple(draw(st.lists(st.sampled_from(["l", "r"]), min_size=0, max_size=3).map(
            lambda xs: [lit() if x == "l" else ref() for x in xs]))))
    if kind == "deep":  # a list holding an object / list: the general route
        return ListValue((ref(), ObjectValue((("k", ref()), ("n", lit())))))
    if kind == "object":
        return ObjectValue((("p", ref()), ("q", ListValue((lit(), ref())))))
    if kind == "template":
        r1 = ref()
        g.templates.add(r1.key)
        parts: list = ["<", r1, ">"]
        if draw(st.booleans()):
            r2 = ref()
            g.templates.add(r2.key)
            parts += [" and ", r2]
        return Template(tuple(parts))
    ops = tuple(ref() for _ in range(draw(st.integers(2, 3))))
    return Expression("||" if kind == "or" else "&&", ops)


def _outcome(draw, method: OutputMethod, alts: list[tuple]) -> tuple:
    fits = {M.MERGE: "dict", M.ASSIGN: "dict", M.CONCAT: "list"}.get(method)
    shape = draw(st.sampled_from(["dict", "dict", "list", "list", "str", "num", "null", "echo", "echo",
                                  "tuple", "set", "dataclass", "object"]))
    if fits and draw(st.integers(0, 3)):
        shape = fits  # mostly the type the method needs, sometimes a wrong one
    kind = draw(st.sampled_from(["ok", "ok", "ok", "ok", "ok", "fail", "branch", "branch"]))
    if kind == "ok":
        return ("ok", shape)
    if kind == "fail":
        return ("fail", draw(st.sampled_from(["Tool.Failed", "My.Error", "Other.Bad"])))
    targets: list = [0, 1, 2, 7, True]
    if alts:
        targets += ["†" + ".".join(map(str, alts[-1])), "$" + ".".join(map(str, alts[0])),
                    ".".join(map(str, alts[-1]))]
    targets.append("†state.not_an_alternative")
    return ("branch", draw(st.sampled_from(targets)), shape)


@st.composite
def plans(draw):
    n = draw(st.integers(1, 7))
    g = _Gen(draw)
    specs = []  # per call (topological order): dict of its parts
    behaviours: dict = {}
    latencies: dict = {}
    for t in range(n):
        key = f"k{t}"
        latent = draw(st.integers(0, 7)) == 0
        shape = draw(st.sampled_from(["none", "single", "single", "single", "branch", "branch", "fanout"]))
        method = draw(st.sampled_from([M.SET, M.SET, M.MERGE, M.ASSIGN, M.PUSH, M.CONCAT]))
        free = g.writable(t)
        target = None
        keys: list[tuple] = []
        if shape != "none":
            want = {"single": 1, "branch": draw(st.integers(2, 3)), "fanout": 2}[shape]
            for _ in range(want):
                choices = [k for k in free if not any(_related(k, o) for o in keys)]
                if not choices:
                    break
                keys.append(draw(st.sampled_from(choices)))
            if keys:
                op = None if len(keys) == 1 else ("||" if shape == "branch" else "&&")
                target = OutputTarget(tuple(_ref(k) for k in keys), op, method)
        reads: set = set()
        params = [Param("key", Literal(key))]
        inline = None
        if latent:
            inline = ObjectValue(((key, _value_expr(g, t, reads)), (f"{key}_n", Literal(t))))
            if draw(st.booleans()):
                inline = ListValue((Literal(key), _value_expr(g, t, reads)))
            # an inline output stores what it reads as it is (no tool canonicalises its key
            # order), so what it reads counts as rendered, like a template's parts
            g.templates.update(r.key for r in _all_refs(inline))
        for name in draw(st.sampled_from([[], ["a"], ["a", "b"], ["b"]])):
            params.append(Param(name, _value_expr(g, t, reads)))
        after = []
        if t and draw(st.integers(0, 4)) == 0:
            after.append(draw(st.integers(0, t - 1)))
        g.read_keys.append(reads)
        g.out_keys.append(keys)
        outs = [_outcome(draw, method, keys)
                for _ in range(draw(st.integers(1, 3)))]
        behaviours[key] = outs
        latencies[key] = [draw(st.sampled_from([0, 0, 0.0003, 0.001, 0.002])) for _ in range(4)]
        retry = None
        if draw(st.booleans()):
            retry = RetryPolicy(max_attempts=draw(st.integers(1, 3)), interval=0,
                                errors=draw(st.sampled_from([(), (), ("My.*",), ("Tool.Failed",),
                                                             ("Tool.OutputInvalid", "Other.Bad"), ("*",)])))
        tool_name = "think" if latent else draw(st.sampled_from(["step", "step", "stepsync", "steptyped"]))
        specs.append(dict(key=key, tool=tool_name,
                          params=tuple(params) if not latent else (), target=target, inline=inline,
                          after=after, retry=retry, timeout=30 if draw(st.integers(0, 5)) == 0 else None,
                          explicit=draw(st.integers(0, 3)) == 0, latent=latent, outs=outs))
    _order_conflicts(g, specs)
    # plan order: a random permutation of the topological order (forward references)
    perm = draw(st.permutations(range(n)))
    pos = {t: p for p, t in enumerate(perm)}
    ids = {t: (specs[t]["key"].replace("k", "s") if specs[t]["explicit"] else f"c{pos[t] + 1}") for t in range(n)}
    calls = []
    for t in perm:
        s = specs[t]
        calls.append(Call(s["tool"], s["params"], s["target"], inline_output=s["inline"],
                          id=ids[t] if s["explicit"] else None, retry=s["retry"], timeout=s["timeout"],
                          after=tuple(ids[j] for j in s["after"])))
    tools = (THINK,) if any(s["latent"] for s in specs) else ()
    return Plan(tuple(calls), tools=tools), behaviours, latencies


def _commutes(si: dict, sj: dict, a: tuple, b: tuple, templates: set) -> bool:
    """May the writes of a (by i) and b (by j) happen in either order?  merge/assign of
    disjoint keys (the "dict" results and inline outputs are keyed by the call's key), unless a branch can
    deliver an error object there, or a template renders the slot (key order shows)."""
    mi, mj = si["target"].method, sj["target"].method
    if mi not in (M.MERGE, M.ASSIGN) or mj not in (M.MERGE, M.ASSIGN):
        return False
    if si["target"].op == "||" or sj["target"].op == "||":
        return False
    for s in (si, sj):  # results that may be objects with keys other than the call's own
        if any(o[-1] in ("echo", "dataclass") for o in s["outs"] if o[0] != "fail"):
            return False
    return not any(_related(a, r) or _related(b, r) for r in templates)


def _order_conflicts(g: _Gen, specs: list) -> None:
    """Add @after edges so that every pair of non-commuting writers is ordered by the graph.

    Only a call's *direct* waits order it (its @after calls and the writers of what it
    reads): a call that writes ran after each of them ended.  Waits do not order
    transitively: a call skipped because one of its inputs broke ends at once, before
    its other dependencies (spec, Skipping: "one of its inputs can never be written"), so
    a reader of it may run before those (found by hypothesis: s6 read a path of s4, which
    waited for s3, but s4 was skipped when s2 failed and s6 wrote before s3's catch)."""
    n = len(specs)
    writers_of = lambda k, t: [j for j in range(t) if any(_related(k, o) for o in g.out_keys[j])]
    for t in range(n):
        s = specs[t]
        b: set = set(s["after"])
        vals = [p.value for p in s["params"]] + ([s["inline"]] if s["inline"] is not None else [])
        for v in vals:
            for r in _ordering_refs(v):
                b.update(writers_of(r.key, t))
        for j in range(t):
            if j in b:
                continue
            clash = False
            for a in g.out_keys[j]:
                for o in g.out_keys[t]:
                    if a[0] != o[0]:
                        continue
                    if _related(a, o) and not _commutes(specs[j], s, a, o, g.templates):
                        clash = True
                    # a rendered path shows the key order of what both write inside it
                    if any(_related(a, r) and _related(o, r) for r in g.templates):
                        clash = True
            if clash:
                s["after"].append(j)
                b.add(j)


def _ordering_refs(v: Any):
    """The references whose writers a call surely waits for (not ``||`` operands past the first)."""
    if isinstance(v, Reference):
        yield v
    elif isinstance(v, Expression):
        yield from (v.operands[:1] if v.op == "||" else v.operands)
    elif isinstance(v, Template):
        yield from (p for p in v.parts if isinstance(p, Reference))
    elif isinstance(v, ListValue):
        for x in v.items:
            yield from _ordering_refs(x)
    elif isinstance(v, ObjectValue):
        for _, x in v.entries:
            yield from _ordering_refs(x)


def _all_refs(v: Any):
    if isinstance(v, Reference):
        yield v
    elif isinstance(v, Expression):
        yield from v.operands
    elif isinstance(v, Template):
        yield from (p for p in v.parts if isinstance(p, Reference))
    elif isinstance(v, ListValue):
        for x in v.items:
            yield from _all_refs(x)
    elif isinstance(v, ObjectValue):
        for _, x in v.entries:
            yield from _all_refs(x)


def _per_call_log(log: list) -> dict:
    out: dict = {}
    for m in log:
        if m.get("call") is not None:
            out.setdefault(m["call"], []).append((m["kind"], list(m["path"]), m["value"], m["method"]))
    return out


def _summary(res) -> list:
    return [(c.id, c.status, c.attempts, c.error.error if c.error else None, c.caught, list(c.written), c.branch)
            for c in res.calls]


async def _both(plan, behaviours, latencies, inp, state, concurrency, cascade="skip"):
    # a read that can never resolve (nothing writes it, the initial state lacks it) is
    # refused before anything runs, by both
    try:
        got = await arun(plan, make_tools(behaviours, latencies), input=inp, state=state, validate_input=False,
                         max_concurrency=concurrency, cascade=cascade)
    except PlanInvalid:
        got = REFUSED
    try:
        want = await areference_run(plan, make_tools(behaviours, latencies), input=inp, state=state,
                                    cascade=cascade)
    except PlanInvalid:
        want = REFUSED
    return got, want


REFUSED = "refused before anything ran"


def assert_agree(plan, behaviours, latencies, inp=None, state=None, concurrency=None, cascade="skip"):
    got, want = asyncio.run(_both(plan, behaviours, latencies, inp, state, concurrency, cascade))
    if got is REFUSED or want is REFUSED:
        assert got is want, (got, want)
        return got, want
    detail = ([(c.id, c.status, c.reason, c.error) for c in got.calls],
              [(c.id, c.status, c.reason, c.error) for c in want.calls])
    assert _summary(got) == _summary(want), detail
    assert got.status == want.status, detail
    assert got.state == want.state, detail
    assert _per_call_log(got.log) == _per_call_log(want.log), detail
    # times are recorded as numbers and formatted when read: ISO text, in order
    for c in got.calls:
        if c.started_at is not None:
            assert c.ended_at is not None and c.started_at <= c.ended_at, (c.started_at, c.ended_at)
        assert c.ended_at is None or (c.ended_at.endswith("Z") and "T" in c.ended_at)
    dates = [m["date"] for m in got.log]
    assert all(type(d) is str for d in dates) and dates == sorted(dates), dates
    return got, want


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(), st.booleans(), st.sampled_from(range(len(INITIAL_STATES))), st.sampled_from([None, None, 2]),
       st.sampled_from(["skip", "skip", "partial"]))
def test_scheduler_agrees_with_reference_on_shapes(case, with_input, state_index, concurrency, cascade):
    plan, behaviours, latencies = case
    assert_agree(plan, behaviours, latencies, INPUT if with_input else None,
                 INITIAL_STATES[state_index], concurrency, cascade)


# --------------------------------------------------------------------------- regressions

def _one(method: OutputMethod, outcomes: list, paths=(("state", "user"),), op=None, retry=None) -> tuple:
    target = OutputTarget(tuple(_ref(k) for k in paths), op, method)
    plan = Plan((Call("step", (Param("key", Literal("k0")),), target, retry=retry),))
    return plan, {"k0": outcomes}, {"k0": [0]}


def test_reference_rejects_wrong_typed_method_writes():
    """merge/assign of a non-object and concat of a non-list fail the writing call with
    Tool.OutputInvalid and write nothing (spec: output methods); the reference interpreter
    used to write them (a merge of a list replaced the value)."""
    for method, shape in ((M.MERGE, "list"), (M.ASSIGN, "str"), (M.CONCAT, "dict"), (M.CONCAT, "num")):
        got, want = assert_agree(*_one(method, [("ok", shape)]), state={"user": {"old": 1}})
        assert [c.error.error for c in want.calls] == ["Tool.OutputInvalid"]
        assert want.state == {"state": {"user": {"old": 1}}}
    # retried like any Tool.OutputInvalid; a catch gets the error object
    plan, b, lat = _one(M.MERGE, [("ok", "list"), ("ok", "dict")], retry=RetryPolicy(2, interval=0))
    got, want = assert_agree(plan, b, lat)
    assert want.calls[0].attempts == 2 and want.state == {"state": {"user": {"k0": [None, None]}}}
    got, want = assert_agree(*_one(M.ASSIGN, [("ok", "list")], paths=(("state", "a"), ("state", "err")), op="||"))
    assert want.calls[0].caught and want.state["state"]["err"]["error"] == "Tool.OutputInvalid"


def test_reference_branch_true_is_not_an_index():
    """Branch(True, v) names no alternative (an index is an int, not a bool: as the scheduler
    and dry-run's mock checks say); the reference interpreter used to take it as index 1."""
    got, want = assert_agree(*_one(M.SET, [("branch", True, "str")], paths=(("state", "a"), ("state", "err")),
                                   op="||"))
    assert want.calls[0].error.error == "Tool.OutputInvalid"
    assert want.calls[0].caught and want.calls[0].written == ["†state.err"]


def test_retry_gets_the_original_arguments():
    """A tool that changes a list / object argument in place and then fails must not hand
    the change to its retry: every attempt gets the same arguments (the scheduler used to
    pass the same objects again, on the direct, thread-pool and semaphore routes alike)."""
    for value in (ListValue((Literal(1), _ref(("state", "xs")))), _ref(("state", "obj")),
                  ObjectValue((("k", _ref(("state", "xs"))),))):
        for tool_name, concurrency in (("step", None), ("stepsync", None), ("step", 2)):
            plan = Plan((Call(tool_name, (Param("key", Literal("k0")), Param("a", value)),
                              OutputTarget((_ref(("state", "out")),)), retry=RetryPolicy(2, interval=0)),))
            got, want = assert_agree(plan, {"k0": [("fail", "Tool.Failed"), ("ok", "echo")]}, {"k0": [0]},
                                     state={"xs": [1, 2], "obj": {"z": 0}}, concurrency=concurrency)
            assert "spoilt" not in str(got.state["state"]["out"]), got.state


def test_wide_plan_with_queued_calls():
    """More ready calls than one burst (the scheduler queues them; literal-only calls build
    their arguments when their task is created): same outcome as the reference."""
    n, readers = 300, 12
    calls, behaviours = [], {}
    for t in range(n + readers):
        key = f"k{t}"
        if t >= n:  # reads calls of the burst (a list mixing a literal and references)
            a = ListValue((Literal(t), _ref(("state", f"w{t - n}")), _ref(("state", f"w{n - 1 - t + n}"))))
            params = (Param("key", Literal(key)), Param("a", a))
        else:
            params = (Param("key", Literal(key)), Param("a", Literal(t)))
        method = M.PUSH if t % 5 == 0 else M.SET
        calls.append(Call("step" if t % 7 else "stepsync", params,
                          OutputTarget((_ref(("state", f"w{t}")),), None, method)))
        behaviours[key] = [("fail", "My.Error")] if t % 11 == 0 else [("ok", "list")]
    plan = Plan(tuple(reversed(calls)))  # readers before their writers
    latencies = {f"k{t}": [0] for t in range(n + readers)}
    got, want = assert_agree(plan, behaviours, latencies, state={"seed": 1})
    assert {c.status for c in got.calls} == {"succeeded", "failed", "skipped"}


def test_reference_reads_an_unwritten_whole_kind_as_missing():
    """``†data`` when nothing wrote ``data`` has no value: Ref.Unresolved (the reference
    interpreter used to pass its internal 'nothing' marker to the tool)."""
    plan = Plan((Call("step", (Param("key", Literal("k0")), Param("a", _ref(("data",)))),
                      OutputTarget((_ref(("state", "out")),))),))
    got, want = assert_agree(plan, {"k0": [("ok", "echo")]}, {"k0": [0]}, state={"seed": 1})
    assert want.calls[0].error.error == "Ref.Unresolved"


def test_reference_normalises_results_like_the_scheduler():
    """Tuples, sets and dataclasses are stored as JSON (as pydantic serialises them); a result
    with no JSON form is Tool.OutputInvalid.  The reference interpreter used to fail the
    first three with Tool.Failed and the last with Tool.Failed instead of OutputInvalid."""
    for shape, status, stored in (("tuple", "succeeded", ["k0", 0]), ("set", "succeeded", ["k0"]),
                                  ("dataclass", "succeeded", {"x": 0, "label": "k0"}),
                                  ("object", "failed", None)):
        got, want = assert_agree(*_one(M.SET, [("ok", shape)], paths=(("state", "a"),)), state={"seed": 1})
        assert want.calls[0].status == status
        assert want.state["state"].get("a") == stored
        if status == "failed":
            assert want.calls[0].error.error == "Tool.OutputInvalid"
