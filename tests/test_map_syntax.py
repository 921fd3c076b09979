"""map in the three forms (issue 12): reading, printing, fmt round trips, E501."""

from __future__ import annotations

import pytest

from sophon_dsl.loader import dumps, loads, parse
from sophon_dsl.model import ListValue, Reference

DSL = """\
input = {type: "object", properties: {texts: {type: "array", items: {type: "string"}}}}

m1: $state.fr || $state.failed = map(
    $input.texts,
    as=text,
    index=i,
    concurrency=4,
    tolerate="10%",
) {
    $local.fr = translate(text=$text, lang="fr")
    @after(translate)
    sum: summarize(text=$local.fr, n=$i)
    $local.rows = map($local.fr, as=row) {
        count(x=$row, of=$text)
    }
    return {fr: $local.fr, n: $i}
}
report(items=$state.fr)
"""


def test_dsl_reads_every_option():
    plan = loads(DSL)
    call = plan.calls[0]
    spec = call.map
    assert call.tool == "map" and call.id == "m1" and call.output.op == "||"
    assert spec.over == Reference("input", ("texts",))
    got = (spec.item, spec.index, spec.concurrency, spec.tolerate, spec.tolerate_percent)
    assert got == ("text", "i", 4, None, 10.0)
    assert [c.tool for c in spec.body] == ["translate", "summarize", "map"]
    assert spec.body[1].after == ("translate",) and spec.body[1].id == "sum"
    assert spec.body[2].map.item == "row"
    assert plan.calls[1].tool == "report"


def test_fmt_is_a_fixed_point_and_forms_agree():
    plan = loads(DSL)
    assert dumps(plan, "dsl") == DSL
    assert loads(dumps(plan, "json"), "json") == plan
    assert loads(dumps(plan, "yaml"), "yaml") == plan


def test_json_spelling():
    text = dumps(loads(DSL), "json")
    assert '"_map": {' in text and '"do": [' in text and '"tolerate": "10%"' in text and '"_tool": "map"' not in text


def test_over_a_literal_list_and_a_one_line_body():
    plan = loads('$state.out = map(over=[1, 2], tolerate=1) { $local.x = f(v=$item); return $local.x }')
    spec = plan.calls[0].map
    assert isinstance(spec.over, ListValue) and spec.tolerate == 1 and len(spec.body) == 1
    assert dumps(plan, "dsl") == ('$state.out = map(over=[1, 2], tolerate=1) {\n    $local.x = f(v=$item)\n'
                                  '    return $local.x\n}\n')


def test_an_empty_body_and_a_map_without_output():
    plan = loads("map($input.xs) {\n}\n")
    assert plan.calls[0].map.body == () and plan.calls[0].output is None
    assert loads(dumps(plan, "dsl")) == plan


def test_a_return_inside_a_body_is_not_the_plan_output():
    plan = loads("map($input.xs) {\n    f(x=$item)\n    return $item\n}\nreturn 1\n")
    assert plan.calls[0].map.result == Reference("item") and plan.output.value == 1


@pytest.mark.parametrize("form, text, needle", [
    ("dsl", "map($input.xs, parallel=2) { f(x=1) }", "unknown map option 'parallel'"),
    ("dsl", "map($input.xs, concurrency=0) { f(x=1) }", "concurrency"),
    ("dsl", 'map($input.xs, tolerate="many") { f(x=1) }', "tolerate"),
    ("dsl", "map($input.xs, as=input) { f(x=1) }", "'as' cannot be 'input'"),
    ("dsl", "map($input.xs, as=a, index=a) { f(x=1) }", "different names"),
    ("dsl", "map(as=t) { f(x=1) }", "needs the list"),
    ("dsl", "f(x=1) { g(y=2) }", "only map takes a body"),
    ("json", '[{"_tool": "f", "_map": {"over": [], "do": []}}]', "either"),
    ("json", '[{"_map": {"over": [], "do": []}, "x": 1}]', "no parameters"),
    ("json", '[{"_map": []}]', "must be an object"),
    ("json", '[{"_map": {"do": []}}]', "needs"),
    ("yaml", "- _map: {over: [], do: {}}", "must be an array"),
])
def test_malformed_maps_are_e501(form, text, needle):
    diags = parse(text, format=form).diagnostics
    assert any(d.code == "E501" and needle in d.message for d in diags), [str(d) for d in diags]
