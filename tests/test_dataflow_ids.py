"""A checked plan's call ids are made when read (dataflow.CallIds / IdIndex): they are
each call's label, else ``c<N>``, exactly as ``Plan.call_ids`` and a dict of first
positions say, whatever the labels (``c<N>`` of another position, duplicates), and as
the flow grows call by call or by groups."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from sophon_dsl import loads
from sophon_dsl.compiler import compile_plan
from sophon_dsl.dataflow import CallIds, DataFlow
from sophon_dsl.model import Call, Plan

LABEL = st.one_of(st.none(), st.sampled_from(["a", "b", "c1", "c2", "c3", "c5", "c9", "c01", "c0"]))
EXTRA = st.sampled_from(["x", "c2", "c7", "m[0].a", "c4"])


def first_positions(ids):
    out: dict[str, int] = {}
    for i, cid in enumerate(ids):
        out.setdefault(cid, i)
    return out


def check(flow_ids, index, want):
    assert list(flow_ids) == want and len(flow_ids) == len(want)
    assert [flow_ids[i] for i in range(len(want))] == want
    assert flow_ids == want and flow_ids == tuple(want)
    first = first_positions(want)
    assert dict(index) == first and len(index) == len(first) and list(index) == list(first)
    for name in [*first, "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c9", "zz"]:
        assert index.get(name) == first.get(name)
        assert (name in index) == (name in first)


@settings(max_examples=300, deadline=None)
@given(st.lists(LABEL, max_size=9), st.lists(st.one_of(st.none(), EXTRA), max_size=4))
def test_ids_and_index_as_a_list_and_a_dict(labels, extra):
    calls = [Call("t", id=label) for label in labels]
    plan = Plan(tuple(calls))
    flow = DataFlow.build(plan.calls)
    want = plan.call_ids()
    check(flow.ids, flow.index, want)
    # grown: one call at a time, with the caller's id (its own, or another)
    for cid in extra:
        call = Call("t")
        own = f"c{len(want) + 1}"
        flow.add_call(call, own if cid is None else cid)
        want.append(own if cid is None else cid)
        check(flow.ids, flow.index, want)
    assert pickle.loads(pickle.dumps(flow.ids)) == want
    listed = flow.listed_ids()
    assert type(listed) is list and listed == want and flow.index == first_positions(want)


def test_grown_from_nothing_and_by_groups():
    flow = DataFlow.build(())
    assert type(flow.ids) is CallIds and len(flow.index) == 0
    flow.add_call(Call("t"), "c1")
    flow.add_group([Call("t"), Call("t", id="c2")], ["c1[0].a", "c2"], [None, None])
    assert list(flow.ids) == ["c1", "c1[0].a", "c2"]
    assert dict(flow.index) == {"c1": 0, "c1[0].a": 1, "c2": 2}


def test_compiled_plan_ids_and_the_duplicate_id_check():
    plan = loads("c2: t(x=1)\nt(x=2)\nt(x=3)\n", "dsl")
    compiled = compile_plan(plan, tools=None)
    assert compiled.ids == ("c2", "c2", "c3") and list(compiled.ids) == ["c2", "c2", "c3"]
    assert compiled.index == {"c2": 0, "c3": 2}
    assert [d.code for d in compiled.diagnostics if d.code == "E303"] == ["E303"]
