"""JSON and YAML readers: positions, JSON paths, comments, refusals, never a traceback."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sophon_dsl.syntax.documents import document_to_plan
from sophon_dsl.syntax.json_source import parse_json
from sophon_dsl.syntax.located import LineIndex, child_path
from sophon_dsl.syntax.yaml_source import parse_yaml


def inside(text: str, span) -> bool:
    lines = text.split("\n")
    for line, col in ((span.line, span.column), (span.end_line, span.end_column)):
        if not (1 <= line <= len(lines)):
            return False
        if not (1 <= col <= len(lines[line - 1]) + 1):
            return False
    return (span.line, span.column) <= (span.end_line, span.end_column)


# ---------------------------------------------------------------- JSON


def test_json_values_and_spans():
    text = '{\n  "a": [1, 2.5, "x", null, true],\n  "b c": {"d": false}\n}'
    node, diags = parse_json(text)
    assert diags == []
    assert node.to_data() == {"a": [1, 2.5, "x", None, True], "b c": {"d": False}}
    a = node.get("a")
    assert (a.span.line, a.span.column, a.span.end_line, a.span.end_column) == (2, 8, 2, 33)
    x = a.value[2]
    assert x.path == "$.a[2]" and x.quoted and (x.span.column, x.span.end_column) == (17, 20)
    assert node.get("b c").get("d").path == '$["b c"].d'
    ks = node.key_span("b c")
    assert (ks.line, ks.column) == (3, 3)
    assert node.span.end_line == 4 and node.span.end_column == 2


def test_json_comments():
    text = ('// Agent.Request(config, schema, context)\n'
            '{ /* block\n comment */ "a": 1, // trailing\n "b": "// not a comment" }\n')
    node, diags = parse_json(text)
    assert diags == []
    assert node.to_data() == {"a": 1, "b": "// not a comment"}


@pytest.mark.parametrize("text,line,col,fragment", [
    ('{"a": 1,}', 1, 9, "property name"),
    ('[1, 2,]', 1, 7, "trailing commas"),
    ('{"a" 1}', 1, 6, "expected ':'"),
    ('{\n  "a": tru\n}', 2, 8, "expected a value"),
    ('[1 2]', 1, 4, "expected ',' or ']'"),
    ('{"a": 1', 1, 8, "expected ',' or '}'"),
    ('"abc', 1, 1, "unterminated string"),
    ("", 1, 1, "empty document"),
    ('{"a": True}', 1, 7, "did you mean true"),
    ("/* open", 1, 1, "unterminated /*"),
    ('[1] [2]', 1, 5, "expected end of input"),
    ('["\\q"]', 1, 3, "invalid escape"),
    ("{'a': 1}", 1, 2, "double quotes"),
    ('[01]', 1, 3, "malformed number"),
])
def test_json_syntax_errors(text, line, col, fragment):
    node, diags = parse_json(text)
    assert node is None
    assert len(diags) == 1
    d = diags[0]
    assert d.code == "E002"
    assert (d.line, d.column) == (line, col), str(d)
    assert fragment in d.message
    assert inside(text, d.span)


def test_json_duplicate_keys_e108():
    node, diags = parse_json('{"a": 1,\n "a": 2, "b": {"c": 1, "c": 3}}')
    assert node.to_data() == {"a": 1, "b": {"c": 1}}
    assert [(d.code, d.line, d.column, d.path) for d in diags] == [
        ("E108", 2, 2, "$.a"), ("E108", 2, 24, "$.b.c")]


def test_json_depth_bound():
    node, diags = parse_json("[" * 5000 + "]" * 5000)
    assert node is None and diags[0].code == "E002" and "nesting" in diags[0].message
    node, diags = parse_json("[" * 150 + "]" * 150)
    assert diags == []


def test_json_unicode_and_escapes():
    node, diags = parse_json('["†state.x", "\\u2020", "\\ud83d\\ude00", "é"]')
    assert diags == []
    assert node.to_data() == ["†state.x", "†", "😀", "é"]


def test_child_path_and_line_index():
    assert child_path("$", 3) == "$[3]"
    assert child_path("$[1]", "_outputPath") == "$[1]._outputPath"
    assert child_path("$", "a-b") == '$["a-b"]'
    li = LineIndex("ab\ncd\n")
    assert li.position(0) == (1, 1) and li.position(3) == (2, 1) and li.position(6) == (3, 1)


# ---------------------------------------------------------------- YAML


def test_yaml_values_and_spans():
    text = "- _tool: f\n  x: 1\n  y: '†state.a'\n- _tool: g\n  d: 2025-09-10\n  1: on\n"
    node, diags = parse_yaml(text)
    assert diags == []
    assert node.to_data() == [{"_tool": "f", "x": 1, "y": "†state.a"},
                              {"_tool": "g", "d": "2025-09-10", "1": True}]
    y = node.value[0].get("y")
    assert y.path == "$[0].y" and y.quoted and (y.span.line, y.span.column) == (3, 6)
    g = node.value[1].get("_tool")
    assert (g.span.line, g.span.column, g.span.end_column) == (4, 10, 11)
    assert node.value[1].key_span("d").line == 5


def test_yaml_syntax_error_position():
    text = "a: [1, 2\nb: 3\n"
    node, diags = parse_yaml(text)
    assert node is None and diags[0].code == "E003"
    assert inside(text, diags[0].span)
    assert "expected" in diags[0].message


def test_yaml_duplicate_key():
    node, diags = parse_yaml("a: 1\nb: 2\na: 3\n")
    assert node.to_data() == {"a": 1, "b": 2}
    assert [(d.code, d.line, d.path) for d in diags] == [("E108", 3, "$.a")]


@pytest.mark.parametrize("text", [
    "!!python/object/apply:os.system ['echo hi']",
    "a: !!python/name:os.system ''",
    "a: !custom 1",
    "a: !!binary aGVsbG8=",
    "a: !!set {x, y}",
    "a: !!omap [x: 1]",
    "<<: {a: 1}\nb: 2",
    "? [a, b]\n: 1",
])
def test_yaml_refused_features(text):
    node, diags = parse_yaml(text)
    assert node is None
    assert [d.code for d in diags][-1] == "E004"
    assert inside(text, diags[-1].span)


def test_yaml_billion_laughs_fails_fast():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghij":
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    text = "\n".join(lines)
    t0 = time.perf_counter()
    node, diags = parse_yaml(text)
    assert time.perf_counter() - t0 < 20  # (not a timing claim: without the guard it never ends)
    assert node is None and diags[0].code == "E004" and "expands" in diags[0].message


def test_yaml_small_aliases_are_fine():
    node, diags = parse_yaml("base: &b {x: 1}\nuse: *b\n")
    assert diags == [] and node.to_data() == {"base": {"x": 1}, "use": {"x": 1}}


def test_yaml_recursive_alias_and_depth():
    node, diags = parse_yaml("&a [*a]")
    assert node is None and diags[0].code == "E004"
    node, diags = parse_yaml("[" * 3000 + "]" * 3000)
    assert node is None and diags[0].code == "E004" and "nesting" in diags[0].message
    node, diags = parse_yaml("[" * 100 + "]" * 100)
    assert diags == []


@pytest.mark.parametrize("text,code", [
    ("", "E003"), ("a: 1\n---\nb: 2\n", "E003"), ("a: \x01", "E003"), ("a: 'x", "E003"),
    ("\t- x", "E003"),
])
def test_yaml_errors_are_diagnostics(text, code):
    node, diags = parse_yaml(text)
    assert node is None and diags[0].code == code
    assert inside(text, diags[0].span)


# ---------------------------------------------------------------- property


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list('{}[]:,"\\/*\n\r\t -_abtrufnl0123456789.eE†$&!|#\'?<>x')),
               max_size=80))
def test_readers_never_raise_and_positions_inside(text):
    for reader in (parse_json, parse_yaml):
        node, diags = reader(text)
        diags = diags + document_to_plan(node, source=text)[1]
        for d in diags:
            assert d.span is not None and inside(text, d.span), (reader.__name__, text, d)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60))
def test_readers_never_raise_on_arbitrary_unicode(text):
    for reader in (parse_json, parse_yaml):
        node, diags = reader(text)
        for d in diags:
            assert inside(text, d.span)
