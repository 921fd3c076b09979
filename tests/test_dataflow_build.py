"""A whole plan's data flow (``DataFlow.build``, the checker's and every checked run's
setup, with its inline fast paths for the common write and read) against the rule it
implements written out naively, and against the same calls grown one by one
(``DataFlow.add_call``, the general path): reads in source order with their writers,
dependencies, control edges, read-only writes, fallbacks and the writer index."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sophon_dsl.dataflow import DataFlow
from sophon_dsl.model import (Call, Expression, ListValue, Literal, ObjectValue, OutputTarget, Param, Reference,
                              Template)
from sophon_dsl.values import references

NAME = st.sampled_from(["a", "b", "n1", "n2"])
SEGMENT = st.one_of(NAME, st.sampled_from([0, 1]))
PATH = st.lists(SEGMENT, max_size=3).map(tuple)
ONE_NAME = NAME.map(lambda s: (s,))
KIND = st.sampled_from(["state", "state", "data", "input", "state@x"])
REF = st.builds(lambda kind, path: Reference(kind, path), KIND, st.one_of(ONE_NAME, ONE_NAME, PATH))
LIT = st.builds(Literal, st.one_of(st.integers(0, 3), st.sampled_from(["x", "$state.a"])))
EXPR = st.builds(lambda op, rs: Expression(op, tuple(rs)), st.sampled_from(["||", "&&"]),
                 st.lists(REF, min_size=2, max_size=3))
TEMPLATE = st.builds(lambda r: Template(("hi ", r, "!")), REF)
VALUE = st.recursive(
    st.one_of(LIT, REF, REF, EXPR, TEMPLATE),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: ListValue(tuple(xs))),
        st.lists(st.tuples(NAME, inner), max_size=3).map(lambda es: ObjectValue(tuple(es)))),
    max_leaves=6)
OUTPUT = st.one_of(
    st.none(),
    st.builds(lambda r: OutputTarget((r,)), REF),
    st.builds(lambda rs, op: OutputTarget(tuple(rs), op), st.lists(REF, min_size=2, max_size=3),
              st.sampled_from(["||", "&&"])))


@st.composite
def plans(draw):
    n = draw(st.integers(0, 8))
    calls = []
    for _ in range(n):
        params = tuple(Param(f"p{k}", v) for k, v in enumerate(draw(st.lists(VALUE, max_size=3))))
        after = tuple(draw(st.lists(st.sampled_from([f"c{j + 1}" for j in range(n)] + ["nope"]), max_size=2)))
        calls.append(Call("t", params, draw(OUTPUT), after=after))
    return calls


def naive_writers(calls, kind, path, reader):
    key = (kind, *path)
    out = set()
    for j, call in enumerate(calls):
        if call.output is None or j == reader:
            continue
        for r in call.output.paths:
            if r.kind == "input" or r.kind.split("@")[0] == "input":
                continue
            w = (r.kind, *r.path)
            if w[:len(key)] == key or key[:len(w)] == w:
                out.add(j)
    return tuple(sorted(out))


@settings(max_examples=400, deadline=None)
@given(plans())
def test_a_built_flow_follows_the_rule_and_agrees_with_a_grown_one(calls):
    ids = [f"c{i + 1}" for i in range(len(calls))]
    built = DataFlow.build(calls)
    grown = DataFlow()
    for call, cid in zip(calls, ids):
        grown.add_call(call, cid)
    backward = True
    for i, call in enumerate(calls):
        refs = [r for p in call.params for r in references(p.value)]
        reads = built.reads(i)
        assert [r.ref for r in reads] == refs and all(a.ref is b for a, b in zip(reads, refs))
        want = [naive_writers(calls, r.kind, r.path, i) for r in refs]
        assert [r.writers for r in reads] == want
        assert [r.writers for r in grown.reads(i)] == want
        control = {int(name[1:]) - 1 for name in call.after if name != "nope"}
        assert built.control[i] == frozenset(control)
        deps = tuple(sorted({j for w in want for j in w} | control))
        assert built.deps[i] == deps
        if not call.after:  # (a grown flow wires an @after of a call still to come when it comes)
            assert tuple(grown.deps[i]) == deps
        backward = backward and (not deps or deps[-1] < i)
        assert (i in built.fallbacks) == (i in grown.fallbacks)
    assert built.backward == backward
    assert dict(built.writers.exact.items()) == dict(grown.writers.exact.items())
    assert {k: built.writers.below[k] for k in built.writers.below} == \
        {k: grown.writers.below[k] for k in grown.writers.below}
    assert sorted(built.readonly_writes) == sorted(grown.readonly_writes)
    assert built.writers.branching == grown.writers.branching
    assert built.writers.has_index == grown.writers.has_index
    assert sorted(map(repr, built.writers.multi)) == sorted(map(repr, grown.writers.multi))
    assert built.unknown_after == [(i, name) for i, call in enumerate(calls) for name in call.after
                                   if name == "nope"]


def test_one_writer_reads_share_one_tuple_and_a_self_read_has_no_writer():
    calls = [Call("t", (), OutputTarget((Reference("state", ("n0",)),))),
             Call("t", (Param("x", ObjectValue((("a", Reference("state", ("n0",))),
                                                ("b", Reference("state", ("n1",)))))),),
                  OutputTarget((Reference("state", ("n1",)),))),
             Call("t", (Param("x", ListValue((Reference("state", ("n0",)), Reference("state", ("n0",))))),),
                  OutputTarget((Reference("state", ("n2",)),)))]
    flow = DataFlow.build(calls)
    (_, w1), (_, self_read) = flow.reads(1)
    (_, w2), (_, w3) = flow.reads(2)
    assert w1 == (0,) and w1 is w2 is w3
    assert self_read == ()
    assert flow.deps == [(), (0,), (0,)]
