"""A YAML plan's list of calls is kept as plain data and offsets and located when read
(issue 30 item 12: YAML's load + check peak at most twice JSON's).  The nodes read are the
ones the composing path builds (spans, JSON paths, key spans, quoting), so every position
in a diagnostic stays where it was."""

from __future__ import annotations

import tracemalloc

import pytest

import sophon_dsl
from sophon_dsl import ToolSpec, dumps, loads
from sophon_dsl.diagnostics import Span
from sophon_dsl.model import Plan
from sophon_dsl.syntax.located import LocatedNode
from sophon_dsl.syntax.yaml_source import parse_yaml

WORK = ToolSpec("work", func=lambda **kw: 1, input_schema={
    "type": "object", "properties": {"key": {"type": "integer"}, "inputs": {}, "deps": {}, "note": {}}})

CALLS = """\
- _tool: work
  key: 0
  inputs: []
  note: 'single "quoted"'
  _outputPath: †state.n0
- {_tool: work, key: 1, inputs: ["†state.n0", 2.5, null, true], _outputPath: "†state.n1"}
- _tool: work
  _id: third
  deps:
    a: †state.n0 || †state.n1
    t: "row †state.n1 done"
    nested: [{x: 1, y: [a, 'b']}, [], {}]
  note: |
    a block
    scalar
  _outputPath: †state.n2
"""


def shape(node: LocatedNode):
    """Everything a located node says: kind, value, span, JSON path, key spans, quoting."""
    if node.kind == "object":
        value = tuple((k, shape(v)) for k, v in node.value)
    elif node.kind == "array":
        value = tuple(shape(v) for v in node.value)
    else:
        value = node.value
    return node.kind, value, node.span, node.path, dict(node.key_spans), node.quoted


def composed(text: str) -> LocatedNode:
    """The same document read by the composing path: an anchor anywhere sends it there."""
    return parse_yaml(text + "  _id: &anchored last\n")[0]


@pytest.mark.parametrize("doc", ["list", "plan"])
def test_compact_calls_locate_as_the_composing_path(doc):
    if doc == "list":
        text = CALLS + "- _tool: work\n"
        plain, slow = parse_yaml(text)[0], composed(text)
        assert [shape(n) for n in plain.value][:-1] == [shape(n) for n in slow.value][:-1]
        assert len(plain.value) == len(slow.value) == 4
    else:
        text = "goal: g\ncalls:\n" + "".join("  " + line + "\n" for line in CALLS.splitlines())
        plain = parse_yaml(text + "output: 1\n")[0]
        slow = parse_yaml(text + "output: &anchored 1\n")[0]
        assert shape(plain.get("calls")) == shape(slow.get("calls"))
    # read twice, by index and from the end: the same nodes each time
    calls = plain.value if doc == "list" else plain.get("calls").value
    assert shape(calls[2]) == shape(calls[-2 if doc == "list" else -1]) == shape(list(calls)[2])


def test_positions_in_diagnostics_stay():
    # (the figures c6ba4f2 gives, before the calls were kept compact and their spans deferred)
    text = CALLS.replace('"†state.n0", 2.5', '"†state.n9", 2.5')
    text = text.replace('t: "row †state.n1', 't: "row †state.n8')
    diags = sophon_dsl.check(loads(text, "yaml", file="p.yaml"), tools=[WORK], stdlib=False)
    assert [(d.code, d.span, d.path) for d in diags] == [
        ("W303", Span(6, 34, 6, 45), "$[1].inputs[0]"), ("W303", Span(11, 8, 11, 28), "$[2].deps.t")]


def test_bad_calls_report_where_they_are():
    text = CALLS + "- _tool: work\n  key: 1\n  key: 2\n- &a {_tool: work}\n"
    result = sophon_dsl.loader.parse(text, "yaml", file="p.yaml")
    assert [(d.code, d.span.line, d.span.column) for d in result.diagnostics] == [("E108", 19, 3)]


def _peak(text: str, form: str) -> int:
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        plan = loads(text, form)
        assert not sophon_dsl.check(plan, tools=[WORK], stdlib=False)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_yaml_load_and_check_peak_within_twice_json():
    calls = [f'{{"_tool": "work", "key": {i}, "inputs": [{f"{chr(34)}†state.n{i - 1}{chr(34)}" if i else ""}],'
             f' "_outputPath": "†state.n{i}"}}' for i in range(3000)]
    plan = loads("[\n" + ",\n".join(calls) + "\n]\n", "json")
    texts = {form: dumps(plan, form) for form in ("json", "yaml")}
    for form in texts:  # imports and caches first
        sophon_dsl.check(loads(dumps(Plan(calls=plan.calls[:3]), form), form), tools=[WORK], stdlib=False)
    peaks = {form: _peak(text, form) for form, text in texts.items()}
    # the target is at 1k-100k calls (benchmarks/bench_parse.py --scaling --forms yaml,json)
    assert peaks["yaml"] <= 2 * peaks["json"], peaks
