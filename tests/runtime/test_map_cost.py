"""What the fourth map-cost pass (issue 12) relies on, checked on real components.

* ``state.json_copies`` makes the two copies a store write keeps (the message's and the
  view's) in one walk: both equal to the value and to what ``json_copy`` makes, neither
  sharing a container with the value or with the other; a later write into the view
  leaves the logged message as it was.
* Maps of one body shape share the compiled source of their item maker, never its
  values: two maps of the same shape over different lists, in one plan and in two runs,
  give each item its own body's values.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal

from sophon_dsl.loader import loads
from sophon_dsl.model import OutputMethod
from sophon_dsl.runtime import arun
from sophon_dsl.runtime.state import StateLog, json_copies, json_copy
from sophon_dsl.tools import tool


def _containers(value, out=None):
    out = [] if out is None else out
    if isinstance(value, (dict, list)):
        out.append(value)
        for v in value.values() if isinstance(value, dict) else value:
            _containers(v, out)
    return out


VALUES = [
    1, "s", None, 2.5, True,
    [],
    {},
    [{"r0": 1}, {"r0": 2}],
    {"a": [1, {"b": [2, 3]}], "c": {"d": None}},
    [[1, [2]], {"x": [{"y": "z"}]}, "t"],
]


def test_json_copies_are_two_independent_deep_copies():
    for value in VALUES:
        a, b = json_copies(value)
        assert a == value and b == value and a == json_copy(value)
        mine = {id(c) for c in _containers(value)}
        ca, cb = {id(c) for c in _containers(a)}, {id(c) for c in _containers(b)}
        assert not (mine & ca) and not (mine & cb) and not (ca & cb), value


def test_json_copies_of_a_shared_inner_container_copy_each_occurrence():
    inner = {"k": [1]}
    a, b = json_copies([inner, inner])
    assert a == [inner, inner] and a[0] is not a[1] and b[0] is not b[1]


def test_json_copies_of_a_non_json_value_copies_it_as_json_copy_does():
    value = [{"d": Decimal("1.5")}, (1, 2)]
    a, b = json_copies(value)
    assert a == value == b and a[0] is not b[0] and a[0] is not value[0]


def test_a_write_into_the_view_leaves_the_logged_message_unchanged():
    log = StateLog()
    result = [{"r0": 1}, {"r0": 2}]
    log.write("state", ("out",), result)
    log.write("state", ("out", 1, "r0"), 9, OutputMethod.SET)
    assert log.get("state", ("out",)) == [{"r0": 1}, {"r0": 9}]
    assert log.messages[0].value == [{"r0": 1}, {"r0": 2}]
    assert result == [{"r0": 1}, {"r0": 2}]


@tool
async def tag(x: object = None, t: str = "") -> str:
    return f"{t}:{x}"


PLAN = """
$state.a = map($input.xs) { $local.r = tag(x=$item, t="first") }
$state.b = map($input.ys) { $local.r = tag(x=$item, t="second") }
"""


def test_maps_of_one_shape_keep_their_own_values():
    plan = loads(PLAN)
    data = {"xs": [1, 2], "ys": [3]}
    for _ in range(2):  # the second run takes the compiled maker from the first
        res = asyncio.run(arun(plan, tools=[tag], input=data))
        assert res.status == "succeeded", res.error
        assert res.state["state"] == {"a": [{"r": "first:1"}, {"r": "first:2"}], "b": [{"r": "second:3"}]}


def test_an_item_call_has_no_dict_and_replace_gives_a_plain_call():
    import dataclasses

    from sophon_dsl.maps import ItemTemplate, body_ids
    from sophon_dsl.model import Call

    spec = loads("$state.out = map($input.xs) { $local.a = tag(x=$item) }").calls[0].map
    made = ItemTemplate(spec, body_ids(spec)).make("c1[0]")[0][0]
    assert type(made) is not Call and not hasattr(made, "__dict__")
    edited = dataclasses.replace(made, tool="other")
    assert type(edited) is Call and edited.tool == "other" and edited.params == made.params
    assert made.tool == "tag"


def test_the_whole_of_a_kind_is_read_shared_and_a_missing_kind_is_missing():
    from sophon_dsl.runtime.state import MISSING

    log = StateLog()
    log.write("local@c1[0]", ("r0",), 1)
    assert log.get("local@c1[0]") == {"r0": 1} and log.get("local@c1[0]") is log.get("local@c1[0]", ())
    assert log.get("local@c1[1]") is MISSING and log.get("local@c1[1]", ("r0",)) is MISSING


BATCH_BODIES = [
    "$state.out = map($input.xs) { $local.a = tag(x=$item) }",
    "$state.out = map($input.xs, as=x) { $local.a = tag(x=$x.n, t=\"k\"); $local.b = tag(x=$local.a) }",
    "$state.out = map($input.xs, as=x) { $local.a = tag(x=$x); return {\"v\": $local.a, \"x\": $x.n} }",
    "$state.out = map($input.xs) { first: $local.a || $local.e = tag(x=$item); tag(x=$state.s) }",
]


def test_many_items_made_at_once_equal_the_items_made_one_by_one():
    from sophon_dsl.maps import ItemTemplate, body_ids

    for text in BATCH_BODIES:
        spec = loads(text).calls[0].map
        template = ItemTemplate(spec, body_ids(spec))
        if not template.plain:
            continue
        hidden: set = set()
        results: list = [None] * 6
        calls, ids = template.batch_maker()("c7", range(2, 5), "input", spec.item, ("xs",), hidden.add, results)
        one = template.maker(True)
        want_calls, want_ids, want_results = [], [], [None] * 6
        for k in range(2, 5):
            made, made_ids, result = one(f"c7[{k}]", (spec.item, "input", ("xs", k)))
            want_calls += made
            want_ids += made_ids
            want_results[k] = f"local@c7[{k}]" if spec.result is None else result
        assert calls == want_calls and [type(c) for c in calls] == [type(c) for c in want_calls], text
        assert ids == want_ids and results == want_results, text
        assert hidden == {f"local@c7[{k}]" for k in range(2, 5)}


FIELD_PLANS = [
    # every item has the field: all batched
    "$state.out = map($input.rows, as=row) { $local.a = tag(x=$row.text); $local.b = tag(x=$local.a, t=\"b\") }",
    # items 3 and 4 lack it: they are expanded alone (and fail), the others batched around them
    "$state.out = map($input.rows, as=row, tolerate='100%') { $local.a = tag(x=$row.text) }",
    # two fields, one nested, a return value, a concurrency limit
    "$state.out = map($input.rows, as=row, concurrency=3, tolerate=2) "
    "{ $local.a = tag(x=$row.meta.n, t=$row.text); return {\"r\": $local.a} }",
]


def _field_run(text, monkeypatch, batched):
    from sophon_dsl.runtime.maps import MapDriver

    batches = []
    if batched:
        real = MapDriver._expand_batch
        monkeypatch.setattr(MapDriver, "_expand_batch", lambda self, run, m: batches.append(m) or real(self, run, m))
    else:
        monkeypatch.setattr(MapDriver, "_batchable", lambda self, run: False)
    rows = [{"text": f"t{k}", "meta": {"n": k}} for k in range(9)]
    rows[3] = {"meta": {"n": 3}}
    rows[4] = {"text": "t4"}
    res = asyncio.run(arun(loads(text), tools=[tag], input={"rows": rows if "tolerate" in text else
                                                            [r for r in rows if "text" in r and "meta" in r]}))
    events = [(e.type, e.step_index, e.total_steps, e.status, e.call_id, e.data) for e in res.events]
    return batches, (res.status, res.output, res.state, [(r.id, r.status, r.output, r.error and r.error.error)
                                                         for r in res.calls], events)


def test_items_reading_a_field_are_batched_when_they_have_it_and_run_as_one_by_one(monkeypatch):
    for text in FIELD_PLANS:
        batches, together = _field_run(text, monkeypatch, True)
        assert batches, text  # some items were made together
        monkeypatch.undo()
        assert _field_run(text, monkeypatch, False)[1] == together, text
        monkeypatch.undo()
