"""Reference strings: whole references, expressions, templates and escaping (sophon_dsl.refs)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sophon_dsl.model import Expression, Literal, Reference, Template, value_to_json
from sophon_dsl.refs import (
    ReferenceSyntaxError,
    json_to_value,
    parse_reference,
    parse_string_value,
    template_to_string,
)


def test_whole_reference_with_indexes():
    ref = parse_string_value("†state.items[0].name")
    assert ref == Reference("state", ("items", 0, "name"))
    assert ref.text() == "†state.items[0].name" and ref.text("$") == "$state.items[0].name"


def test_expressions_fallback_and_gate():
    assert parse_string_value("†input.a || †state.b") == Expression(
        "||", (Reference("input", ("a",)), Reference("state", ("b",))))
    assert parse_string_value("†a&&†b").op == "&&"


@pytest.mark.parametrize("text", ["†a || †b && †c", "†state.a || state.b", "†a || 3"])
def test_malformed_expressions_are_errors(text):
    with pytest.raises(ReferenceSyntaxError):
        parse_string_value(text)


def test_templates_and_braced_references():
    t = parse_string_value("Hello †input.name, see †{state.file}.txt")
    assert isinstance(t, Template)
    assert t.parts == ("Hello ", Reference("input", ("name",)), ", see ",
                       Reference("state", ("file",)), ".txt")
    assert template_to_string(t) == "Hello †input.name, see †{state.file}.txt"


def test_escaped_dagger_is_literal_text():
    assert parse_string_value("a †† b") == Literal("a † b")
    assert parse_string_value("††||") == Literal("†||")
    assert value_to_json(Literal("a † b")) == "a †† b"


@pytest.mark.parametrize("text", ["† lonely", "price: †5", "†"])
def test_lone_dagger_is_an_error(text):
    with pytest.raises(ReferenceSyntaxError, match="††"):
        parse_string_value(text)


def test_parse_reference_rejects_non_references():
    with pytest.raises(ReferenceSyntaxError):
        parse_reference("state.a")
    assert parse_reference("$state.a", dagger_aliases="†$") == Reference("state", ("a",))


def test_dollar_is_plain_text_in_strings():
    assert parse_string_value("costs $5 or $state.x") == Literal("costs $5 or $state.x")


def test_json_to_value_interprets_nested_strings():
    v = json_to_value({"a": ["†state.x", 1, {"b": "hi †input.n"}]})
    assert value_to_json(v) == {"a": ["†state.x", 1, {"b": "hi †input.n"}]}


_text = st.text(alphabet=st.sampled_from(list("ab .[]{}†$|&_0")), max_size=12)
_refs = st.builds(
    Reference,
    st.sampled_from(["state", "input", "data"]),
    st.lists(st.one_of(st.sampled_from(["a", "b_1", "x"]), st.integers(0, 9)), max_size=3).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_text, _refs), min_size=1, max_size=5))
def test_template_printing_round_trips(parts):
    merged: list = []
    for p in parts:  # adjacent text pieces merge when parsed back
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        elif not (isinstance(p, str) and p == ""):
            merged.append(p)
    if not any(isinstance(p, Reference) for p in merged):
        return
    t = Template(tuple(merged))
    try:
        back = parse_string_value(template_to_string(t))
    except ReferenceSyntaxError:
        return  # e.g. text "||" then a reference: reads as a malformed expression (documented)
    if isinstance(back, Expression):
        return  # references joined only by " || " / " && " text read as an expression (documented)
    if len(merged) == 1:
        assert back == merged[0]
    else:
        assert back == t


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_arbitrary_strings_parse_or_raise_reference_errors(text):
    try:
        parse_string_value(text)
    except ReferenceSyntaxError as exc:
        assert 0 <= exc.offset <= len(text)
