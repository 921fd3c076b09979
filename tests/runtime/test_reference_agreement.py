"""The concurrent scheduler and the sequential reference interpreter agree.

Hypothesis generates random DAG plans (plain references, ``||`` fallbacks,
``&&`` gates, templates, ``@after``, branching and fan-out output paths,
fire-and-forget calls) with random tiny latencies, failures, retries, branch
picks and invalid outputs.  Every path has a single writer, so the outcome is
deterministic; both interpreters must produce the same final state and the
same status for every call.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings, strategies as st

from sophon_dsl.model import (
    Call, Expression, ListValue, Literal, ObjectValue, OutputMethod, OutputTarget, Param, Plan, Reference,
    RetryPolicy, Template,
)
from sophon_dsl.runtime import Branch, arun
from sophon_dsl.runtime.errors import PlanInvalid
from sophon_dsl.runtime.reference import areference_run
from sophon_dsl.tools import tool

OUT_SCHEMA = {"type": "object", "required": ["v"]}


def make_tool(behaviours: dict, latencies: dict):
    """One tool; each call passes its own key. Behaviour: (kind, n) with kind in
    ok | fail | flaky (fails n times then ok) | branch (picks alternative n) | invalid."""
    counters: dict[str, int] = {}

    async def step(key: str, inp: object = None) -> dict:
        counters[key] = counters.get(key, 0) + 1
        await asyncio.sleep(latencies.get((key, counters[key]), 0))
        kind, n = behaviours[key]
        if kind == "fail":
            raise RuntimeError(f"{key} failed")
        if kind == "flaky" and counters[key] <= n:
            raise RuntimeError(f"{key} flaky")
        if kind == "invalid":
            return "not an object"  # type: ignore[return-value]
        value = {"v": [key, inp]}
        if kind == "branch":
            return Branch(n, value)  # type: ignore[return-value]
        return value

    return tool(step, name="step", output_schema=OUT_SCHEMA)


@st.composite
def plans(draw):
    n = draw(st.integers(1, 8))
    calls = []
    behaviours = {}
    latencies = {}
    outs: list[list[Reference]] = []   # paths each call may write
    for i in range(n):
        key = f"k{i}"
        # output target
        shape = draw(st.sampled_from(["single", "single", "branch", "fanout", "none"]))
        if shape == "single":
            paths = (Reference("state", (f"p{i}",)),)
            target = OutputTarget(paths, None, draw(st.sampled_from([OutputMethod.SET, OutputMethod.PUSH])))
        elif shape == "branch":
            paths = (Reference("state", (f"p{i}", "ok")), Reference("state", (f"e{i}",)))
            target = OutputTarget(paths, "||")
        elif shape == "fanout":
            paths = (Reference("state", (f"p{i}",)), Reference("data", (f"q{i}",)))
            target = OutputTarget(paths, "&&")
        else:
            paths, target = (), None
        # inputs: refs to earlier outputs
        candidates = [r for rs in outs for r in rs] + [Reference("state", ("nothing",)), Reference("input", ("x",))]
        kind = draw(st.sampled_from(["none", "ref", "or", "and", "template", "list"]))
        pick = lambda: draw(st.sampled_from(candidates))
        if kind == "none":
            value = Literal(i)
        elif kind == "ref":
            value = pick()
        elif kind == "or":
            value = Expression("||", tuple(pick() for _ in range(draw(st.integers(2, 3)))))
        elif kind == "and":
            value = Expression("&&", tuple(pick() for _ in range(2)))
        elif kind == "template":
            value = Template(("got ", pick(), "!"))
        else:
            value = ListValue((pick(), ObjectValue((("a", Literal(1)),))))
        after = ()
        if i > 0 and draw(st.integers(0, 5)) == 0:
            after = (f"c{draw(st.integers(1, i))}",)
        b = draw(st.sampled_from(["ok", "ok", "ok", "fail", "flaky", "branch", "invalid"]))
        nn = draw(st.integers(0, 2))
        if b == "branch":
            nn = draw(st.integers(0, 1)) if shape == "branch" else 0
        behaviours[key] = (b, nn)
        retry = RetryPolicy(max_attempts=draw(st.integers(1, 3)), interval=0) if draw(st.booleans()) else None
        for a in range(1, 5):
            latencies[(key, a)] = draw(st.sampled_from([0, 0, 0.0005, 0.001, 0.002]))
        calls.append(Call("step", (Param("key", Literal(key)), Param("inp", value)), target, retry=retry,
                          after=after))
        outs.append(list(paths))
    return Plan(tuple(calls)), behaviours, latencies


def _names_only(v):
    """Error objects compare by name; causes are implementation wording."""
    if isinstance(v, dict):
        if set(v) == {"error", "cause"}:
            return {"error": v["error"]}
        return {k: _names_only(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_names_only(x) for x in v]
    return v


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(), st.booleans(), st.sampled_from(["skip", "partial"]))
def test_scheduler_agrees_with_reference(case, with_input, cascade):
    plan, behaviours, latencies = case
    inp = {"x": "hello"} if with_input else None

    async def both():
        # a read that can never resolve (nothing writes it, the initial state lacks it) is
        # refused before anything runs, by both
        try:
            a = await arun(plan, [make_tool(behaviours, latencies)], input=inp, state={"seed": 1},
                           validate_input=False, cascade=cascade)
        except PlanInvalid:
            a = None
        try:
            b = await areference_run(plan, [make_tool(behaviours, latencies)], input=inp, state={"seed": 1},
                                     cascade=cascade)
        except PlanInvalid:
            b = None
        return a, b

    got, want = asyncio.run(both())
    if got is None or want is None:
        assert got is want, (got, want)
        return
    assert [c.status for c in got.calls] == [c.status for c in want.calls], (
        [(c.id, c.status, c.reason, c.error) for c in got.calls],
        [(c.id, c.status, c.reason, c.error) for c in want.calls])
    assert _names_only(got.state) == _names_only(want.state)
    assert got.status == want.status
    for g, w in zip(got.calls, want.calls):
        assert g.attempts == w.attempts
        assert (g.error.error if g.error else None) == (w.error.error if w.error else None)
