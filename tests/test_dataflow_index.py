"""The data flow's writer index against the rule it implements, written out naively:
a read of ``(kind, *path)`` depends on every other call writing that key, a prefix of it
or an extension of it (spec/language.md, Edges).  The index stores writers compactly
(per kind, by the writer's path tuple, call indexes for first output paths); these
tests read it back through every public view."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from sophon_dsl.dataflow import DataFlow, WriterIndex

SEGMENT = st.sampled_from(["a", "b", "c", 0, 1])
PATH = st.lists(SEGMENT, max_size=3).map(tuple)
KIND = st.sampled_from(["state", "data", "mine"])
# per call: its written (kind, path)s (a call may write several: `||` / `&&`)
WRITES = st.lists(st.lists(st.tuples(KIND, PATH), max_size=3), max_size=8)
READS = st.lists(st.tuples(KIND, PATH, st.one_of(st.none(), st.integers(0, 9))), max_size=12)


def naive(writes):
    exact: dict[tuple, list] = {}
    below: dict[tuple, list] = {}
    for i, outs in enumerate(writes):
        for p, (kind, path) in enumerate(outs):
            key = (kind, *path)
            exact.setdefault(key, []).append((i, p))
            for k in range(1, len(key)):
                below.setdefault(key[:k], []).append((i, p))
    return exact, below


def build(writes) -> WriterIndex:
    index = WriterIndex()
    for i, outs in enumerate(writes):
        for p, (kind, path) in enumerate(outs):
            index.add(i, p, kind, path)
    return index


@settings(max_examples=300, deadline=None)
@given(WRITES, READS)
def test_resolve_and_views_agree_with_the_rule(writes, reads):
    index = build(writes)
    exact, below = naive(writes)
    assert dict(index.exact.items()) == {k: tuple(v) for k, v in exact.items()}
    assert set(index.exact) == set(exact) and len(index.exact) == len(exact)
    assert {k: index.below[k] for k in index.below} == below and len(index.below) == len(below)
    for key in exact:
        assert index.exact[key] == tuple(exact[key]) and key in index.exact
        assert index.at(key) == tuple(exact[key])
    for key in below:
        assert index.below.get(key) == below[key] and key in index.below
    assert index.overlapping() == any(key in below for key in exact)
    assert set(index.multi) == {k for k, v in exact.items() if len(v) > 1}
    assert len(index.multi) == len(set(index.multi))
    for kind, path, reader in reads:
        key = (kind, *path)
        want = {i for k, ws in exact.items() for i, _ in ws
                if k[:len(key)] == key or key[:len(k)] == k} - {reader}
        assert index.resolve(kind, path, reader) == tuple(sorted(want))
        assert index.exact.get(key, ()) == tuple(exact.get(key, ()))
        assert (key in index.below) == (key in below)


def test_many_writers_of_a_prefix_are_shared_between_readers():
    index = WriterIndex()
    for i in range(20):
        index.add(i, 0, "state", ("rows", f"k{i}"))
    every = index.resolve("state", ("rows",), None)
    assert every == tuple(range(20))
    assert index.resolve("state", ("rows",), 99) is every
    assert index.resolve("state", ("rows",), 3) == tuple(j for j in range(20) if j != 3)


def test_a_read_of_one_writer_shares_one_tuple():
    index = WriterIndex()
    index.add(4, 0, "state", ("n4",))
    assert index.resolve("state", ("n4",), 5) is index.resolve("state", ("n4",), 6) == (4,)
    assert index.resolve("state", ("n4",), 4) == ()
    assert index.exact[("state", "n4")] == ((4, 0),)


def test_a_grown_flow_answers_like_a_built_one_and_pickles():
    from sophon_dsl import loads

    plan = loads('†state.a = t(x=1)\n†state.b.c || †state.e = t(y=†state.a)\n'
                 '†state.b = t(z=†state.b.c)\nt(w=†state)\n', "dsl")
    built = DataFlow.build(plan.calls, plan.call_ids())
    grown = DataFlow()
    for call, cid in zip(plan.calls, plan.call_ids()):
        grown.add_call(call, cid)
    for flow in (built, grown, pickle.loads(pickle.dumps(built))):
        assert dict(flow.writers.exact) == {("state", "a"): ((0, 0),), ("state", "b", "c"): ((1, 0),),
                                            ("state", "e"): ((1, 1),), ("state", "b"): ((2, 0),)}
        assert [r.writers for r in flow.reads(3)] == [(0, 1, 2)]
        assert [r.writers for r in flow.reads(2)] == [(1,)]
