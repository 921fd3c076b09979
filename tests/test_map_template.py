"""A map item's calls made from its body analysed once (issue 12, map cost).

* ``DataFlow.add_group`` with the body's wiring (``runtime.maps.body_wiring``), as it is
  or prepared (``GroupWiring``, and ``DataFlow.group_joiner`` for many items) wires an
  item's calls exactly as adding them one by one through the general analysis does
  (``DataFlow.add_call``): the same reads, writers, dependencies, dependents, ``@after``
  edges, fallback readers and inline-output reads.
* An item's call (``maps.ItemTemplate``) equals the one the full rewrite
  (``maps._rewrite``) makes, and behaves as a :class:`Call` (equality, hashing,
  ``replace``, copying, pickling).
"""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from sophon_dsl.dataflow import DataFlow, GroupWiring
from sophon_dsl.loader import loads
from sophon_dsl.maps import ItemTemplate, _rewrite, body_ids, item_kind, scope_names
from sophon_dsl.model import Call
from sophon_dsl.runtime.maps import body_wiring

BODIES = [
    "$state.out = map($input.xs) { $local.a = f(v=$item) }",
    "$state.out = map($input.xs) { $local.a = f(v=$item); $local.b = g(v=$local.a, w=[$local.a, 1]) }",
    # reads a later call, a prefix and an extension of what others write
    "$state.out = map($input.xs) { $local.b = g(v=$local.a.x); $local.a = f(v=$item); h(w=$local) }",
    # a fallback, an object, a template, an outer read, the index
    '$state.out = map($input.xs, index=i) {\n  $local.a || $local.e = f(v=$item)\n'
    '  g(v=$local.a || $local.e, o={"k": $state.s}, t="n $i: $item", n=$i)\n}',
    # @after naming a body call and a plan call, an inline output reading the item
    "s0: $state.s = f(v=1)\n$state.out = map($input.xs) {\n  first: $local.a = f(v=$item)\n"
    "  @after(first, s0) g(v=1) -> {\"r\": $local.a}\n}",
    # a nested map reading the outer item and local data
    "$state.out = map($input.rows, as=row) {\n  $local.n = f(v=$row)\n"
    "  $local.cells = map($row, as=cell) { $local.x = g(v=$cell, r=$row, n=$state.s) }\n}",
]


def _grown(plan, wiring: str) -> DataFlow:
    calls = list(plan.calls)
    ids = [c.id or f"c{k + 1}" for k, c in enumerate(calls)]
    flow = DataFlow.build(calls, ids)
    for j, call in enumerate(calls):
        if call.map is None:
            continue
        names = body_ids(call.map)
        template, known = ItemTemplate(call.map, names), body_wiring(call.map, names)
        group = GroupWiring(call.map.body, known)
        join = flow.group_joiner(group)
        for k in range(3):
            items, item_ids, _ = template.make(item_kind(ids[j], k))
            if k == 1:
                flow.dependents()  # kept up to date from here on
            if wiring == "known":  # the general route, reads wired one by one
                flow.add_group(items, item_ids, known)
            elif wiring == "group":  # plain bodies: wired from the body's plan
                flow.add_group(items, item_ids, group)
            elif wiring == "joiner":  # the same, what is looked up per group looked up once
                assert join(items, item_ids) == len(flow.calls) - len(items)
            else:
                for c, cid in zip(items, item_ids):
                    flow.add_call(c, cid)
    return flow


@pytest.mark.parametrize("wiring", ["known", "group", "joiner"])
@pytest.mark.parametrize("text", BODIES)
def test_an_items_calls_are_wired_as_the_general_analysis_wires_them(text, wiring):
    plan = loads(text)
    fast, slow = _grown(plan, wiring), _grown(plan, "add_call")
    assert fast.ids == slow.ids
    assert [r.text() for r in fast.read_refs] == [r.text() for r in slow.read_refs]
    assert fast.read_writers == slow.read_writers
    assert fast.read_offs == slow.read_offs
    assert fast.deps == slow.deps
    assert fast.control == slow.control
    assert fast.fallbacks == slow.fallbacks
    assert {i: [(r.ref.text(), r.writers) for r in rs] for i, rs in fast.inline_reads.items()} == \
        {i: [(r.ref.text(), r.writers) for r in rs] for i, rs in slow.inline_reads.items()}
    assert [fast.run_deps(i) for i in range(len(fast))] == [slow.run_deps(i) for i in range(len(slow))]
    assert [sorted(d) for d in fast.dependents()] == [sorted(d) for d in slow.dependents()]
    assert fast.backward == slow.backward and dict(fast.index) == dict(slow.index)


def test_plain_bodies_take_the_plain_wiring():
    plain = loads(BODIES[2]).calls[0].map
    assert GroupWiring(plain.body, body_wiring(plain, body_ids(plain))).plain is not None
    templated = loads(BODIES[3]).calls[0].map  # a template and an object: walked per item
    assert GroupWiring(templated.body, body_wiring(templated, body_ids(templated))).plain is None


@pytest.mark.parametrize("text", BODIES)
def test_an_items_calls_equal_the_full_rewrite(text):
    for call in loads(text).calls:
        if call.map is None:
            continue
        names = body_ids(call.map)
        kind = item_kind("c9", 4)
        made, ids, _ = ItemTemplate(call.map, names).make(kind)
        prefixed = {b: kind + "." + b for b in names}
        scope = dict.fromkeys(scope_names(call.map), "")
        assert made == [_rewrite(c, scope, kind, prefixed) for c in call.map.body]
        assert ids == [prefixed[b] for b in names]


RESULT_BODIES = BODIES + [
    # outputs to two paths, an outer parameter kept as it is, a result reading the item
    "$state.out = map($input.xs) {\n  $local.a && $local.b = f(v=$item.x, w=$state.s, n=3)\n"
    "  return {\"a\": $local.a, \"x\": $item}\n}",
]


@pytest.mark.parametrize("text", RESULT_BODIES)
@pytest.mark.parametrize("source", [None, ("item", "input", ("xs", 4))])
def test_the_generated_maker_equals_the_full_rewrite(text, source):
    # ItemTemplate.make's generated function (plain bodies), item read where it is or copied
    from sophon_dsl.maps import _subst, _value

    for call in loads(text).calls:
        if call.map is None:
            continue
        spec, names = call.map, body_ids(call.map)
        src = None if source is None else (spec.item, *source[1:])
        kind = item_kind("c9", 4)
        template = ItemTemplate(spec, names)
        for _ in range(2):  # the second item reuses the generated function
            made, ids, result = template.make(kind, src)
            prefixed = {b: kind + "." + b for b in names}
            scope = dict.fromkeys(scope_names(spec), "")
            assert made == [_rewrite(c, scope, kind, prefixed, src) for c in spec.body]
            assert [[p.value for p in c.params] for c in made] == \
                [[p.value for p in _rewrite(c, scope, kind, prefixed, src).params] for c in spec.body]
            assert ids == [prefixed[b] for b in names]
            assert result == _value(spec.result, _subst(scope, kind, src))


def test_an_item_call_behaves_as_a_call():
    spec = loads("$state.out = map($input.xs) { @risk(low) $local.a = f(v=$item, n=2) }").calls[0].map
    made = ItemTemplate(spec, body_ids(spec)).make("c1[3]")[0][0]
    plain = Call(made.tool, made.params, made.output, risk=made.risk, span=made.span, tool_span=made.tool_span)
    assert isinstance(made, Call) and made.tool == "f" and made.risk is not None
    assert made == plain and plain == made and hash(made) == hash(plain)
    assert dataclasses.fields(made) == dataclasses.fields(Call)
    edited = dataclasses.replace(made, tool="g")
    assert edited.tool == "g" and edited.params == made.params and made.tool == "f"
    assert copy.deepcopy(made) == made and pickle.loads(pickle.dumps(made)) == made
    assert type(pickle.loads(pickle.dumps(made))) is Call
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.tool = "h"  # type: ignore[misc]


def test_an_item_of_a_stored_list_is_read_where_it_is_not_copied():
    from sophon_dsl import tool
    from sophon_dsl.runtime import run

    @tool(name="f")
    async def f(v: object = None) -> object:
        return v

    stored = run(loads("$state.out = map($input.xs, as=x) { $local.a = f(v=$x.n); return $local.a }"),
                 tools=[f], input={"xs": [{"n": 1}, {"n": 2}]})
    assert stored.status == "succeeded" and stored.state["state"]["out"] == [1, 2]
    assert not [m for m in stored.log if m["kind"].startswith("x@")]  # no copy of an item
    literal = run(loads("$state.out = map(over=[{\"n\": 1}], as=x) { $local.a = f(v=$x.n); return $local.a }"),
                  tools=[f])
    assert literal.state["state"]["out"] == [1]
    assert [m["value"] for m in literal.log if m["kind"] == "x@c1[0]"] == [{"n": 1}]  # nowhere else to read it


BATCHED = [
    # whole items, local data written by another body call, an outer read with a value
    "$state.s = g(v=1)\n$state.out = map($input.xs) {\n  $local.b = f(v=$local.a, w=$state.s)\n"
    "  $local.a = f(v=$item, n=2)\n}",
    # a body call failing at run time (caught by the tolerance), a `return`
    "$state.out = map($input.xs, tolerate='50%') { $local.a = boom(v=$item); return $local.a }",
    # a nested plan of two maps, the second over the first's result, with a concurrency limit
    "$state.a = map($input.xs, concurrency=3) { $local.r = f(v=$item) }\n"
    "$state.b = map($state.a) { $local.r = f(v=$item) }",
]


def _run_record(text, monkeypatch, batched):
    import asyncio

    from sophon_dsl import tool
    from sophon_dsl.runtime import arun
    from sophon_dsl.runtime.maps import MapDriver

    @tool(name="f")
    async def f(v: object = None, w: object = None, n: int = 0) -> object:
        return [v, w, n]

    @tool(name="g")
    async def g(v: object = None) -> object:
        return v

    @tool(name="boom")
    async def boom(v: object = None) -> object:
        if v % 3 == 0:
            raise ValueError(f"item {v}")
        return v

    seen = []
    if not batched:
        monkeypatch.setattr(MapDriver, "_batchable", lambda self, run: False)
    else:
        real = MapDriver._batchable
        monkeypatch.setattr(MapDriver, "_batchable", lambda self, run: seen.append(real(self, run)) or seen[-1])
    res = asyncio.run(arun(loads(text), tools=[f, g, boom], input={"xs": list(range(7))}))
    events = [(e.type, e.step_index, e.total_steps, e.status, e.call_id, e.data) for e in res.events]
    return seen, (res.status, res.output, res.state, [(r.id, r.status, r.output, r.error and r.error.error)
                                                       for r in res.calls], events)


@pytest.mark.parametrize("text", BATCHED)
def test_items_expanded_together_make_the_run_one_by_one_makes(text, monkeypatch):
    # MapDriver._expand_batch: the same calls at the same positions, started in the same order
    seen, together = _run_record(text, monkeypatch, True)
    assert seen and all(seen)
    monkeypatch.undo()
    assert _run_record(text, monkeypatch, False)[1] == together


@pytest.mark.parametrize("body", [
    # (a field an item may lack: batched per item that has it, tests/runtime/test_map_cost.py)
    "$local.a = f(v=$input.missing)",   # an outer read without a value
    "$local.a = f(v=$i)",               # the index, stored per item
])
def test_items_that_may_end_at_once_are_expanded_one_by_one(body, monkeypatch):
    # (the input schema makes `missing` optional: without one the run is refused, E310)
    head = 'input = {"type": "object", "properties": {"xs": {}, "missing": {}}}\n'
    seen, _ = _run_record(head + "$state.out = map($input.xs, index=i, tolerate='100%') { " + body + " }",
                          monkeypatch, True)
    assert seen == [False]


@pytest.mark.parametrize("source", [None, ("item", "input", ("xs", 4))])
def test_the_generated_makers_nodes_are_the_model_classes(source):
    # the maker stores a node's slots on a twin of its class, then makes it that class
    import pickle

    from sophon_dsl.model import OutputTarget, Param, Reference

    spec = loads("$state.out = map($input.xs) { $local.a = f(v=$item, w=$state.s, n=2) }").calls[0].map
    call = ItemTemplate(spec, body_ids(spec)).maker(source is not None)(item_kind("c9", 4), source)[0][0]
    param, target = call.params[0], call.output
    assert type(param) is Param and type(param.value) is Reference and type(target) is OutputTarget
    assert type(target.paths[0]) is Reference and target.paths[0] == Reference("local@c9[4]", ("a",))
    expected = Reference("input", ("xs", 4)) if source else Reference("item@c9[4]")
    assert param.value == expected and hash(param.value) == hash(expected)
    assert pickle.loads(pickle.dumps(call)) == call
    with pytest.raises(dataclasses.FrozenInstanceError):
        param.value.kind = "x"  # type: ignore[misc]
