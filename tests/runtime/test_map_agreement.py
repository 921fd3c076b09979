"""The scheduler and the reference interpreter agree on plans with maps (issue 12).

Hypothesis generates plans of a few calls and maps: lists from the input or literal,
bodies of chained calls through the item's ``†local`` (some catching their failure
with ``||``), an explicit result or none, nested maps, concurrency limits and
tolerated failures (count or percentage).  Each item decides its own calls' fate
(an item value in the failing set fails the call that reads it), so the outcome is
deterministic; both interpreters must give the same status, final state and status
of every call both ran (a failing map stops starting items, and which ones were
already in flight may differ).
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings, strategies as st

from sophon_dsl.maps import make_map_call
from sophon_dsl.model import Call, ListValue, Literal, MapSpec, OutputTarget, Param, Plan, Reference
from sophon_dsl.runtime import arun
from sophon_dsl.runtime.reference import areference_run
from sophon_dsl.tools import tool


@tool(name="work")
async def work(v: object = None, fail: list = ()) -> dict:
    await asyncio.sleep(0)
    if v in fail:
        raise RuntimeError("boom")  # one message for every item: the map's error is the same
    return {"v": v}


def _local(name: str) -> Reference:
    return Reference("local", (name,))


@st.composite
def bodies(draw, item: str, depth: int):
    n = draw(st.integers(1, 3))
    fail = draw(st.lists(st.integers(0, 5), max_size=2, unique=True))
    calls = []
    for b in range(n):
        src = Reference(item) if b == 0 else draw(st.sampled_from([Reference(item), _local(f"r{b - 1}")]))
        catch = draw(st.booleans())
        paths = (_local(f"r{b}"), _local(f"e{b}")) if catch else (_local(f"r{b}"),)
        calls.append(Call("work", (Param("v", src), Param("fail", ListValue(tuple(Literal(x) for x in fail)))),
                          OutputTarget(paths, "||" if catch else None)))
    if depth > 0 and draw(st.booleans()):
        inner = MapSpec(Reference("input", ("inner",)), (Call("work", (Param("v", Reference("x")),),
                                                              OutputTarget((_local("w"),))),),
                        item="x", result=draw(st.sampled_from([None, _local("w")])))
        calls.append(make_map_call(inner, output=OutputTarget((_local("nested"),))))
    return tuple(calls)


@st.composite
def plans(draw):
    calls = []
    for m in range(draw(st.integers(1, 2))):
        over = draw(st.sampled_from([Reference("input", ("items",)),
                                     ListValue(tuple(Literal(x) for x in range(4)))]))
        body = draw(bodies("item", 1))
        locals_ = [p for c in body if c.output is not None for p in c.output.paths[:1]]
        result = draw(st.sampled_from([None, *locals_[-1:]]))
        tolerate = draw(st.sampled_from([None, 0, 1, 3]))
        spec = MapSpec(over, body, result=result, concurrency=draw(st.sampled_from([None, 1, 2])),
                       tolerate=tolerate,
                       tolerate_percent=None if tolerate is not None else draw(st.sampled_from([None, 50.0])))
        catch = draw(st.booleans())
        paths = (Reference("state", (f"m{m}",)), Reference("state", (f"err{m}",))) if catch else \
            (Reference("state", (f"m{m}",)),)
        calls.append(make_map_call(spec, output=OutputTarget(paths, "||" if catch else None)))
    if draw(st.booleans()):
        calls.append(Call("work", (Param("v", Reference("state", ("m0",))),),
                          OutputTarget((Reference("state", ("after",)),))))
    return Plan(tuple(calls))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(), st.lists(st.integers(0, 5), max_size=5), st.lists(st.integers(0, 5), max_size=3))
def test_the_scheduler_agrees_with_the_reference_interpreter(plan, items, inner):
    data = {"items": items, "inner": inner}

    async def both():
        return (await arun(plan, tools=[work], input=data),
                await areference_run(plan, tools=[work], input=data))

    ours, ref = asyncio.run(both())
    assert ours.status == ref.status
    assert ours.state == ref.state
    mine = {r.id: (r.status, r.error.error if r.error else None) for r in ours.calls}
    theirs = {r.id: (r.status, r.error.error if r.error else None) for r in ref.calls}
    for cid in mine.keys() & theirs.keys():
        assert mine[cid] == theirs[cid], cid
    top = {c for c in theirs if "[" not in c}
    assert top <= mine.keys()
