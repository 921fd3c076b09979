"""Property tests for the DSL parser and printer (hypothesis)."""

from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

from strategies import plans

from sophon_dsl.syntax.dsl_parser import parse_dsl
from sophon_dsl.syntax.dsl_printer import print_dsl

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _assert_inside(text: str, diags) -> None:
    lines = text.split("\n")
    for d in diags:
        assert d.span is not None, d
        s = d.span
        assert 1 <= s.line <= len(lines), (d, len(lines))
        assert 1 <= s.column <= len(lines[s.line - 1]) + 1, (d, lines[s.line - 1])
        assert 1 <= s.end_line <= len(lines), d
        assert (s.end_line, s.end_column) >= (s.line, s.column), d


@SETTINGS
@given(plans())
def test_print_parse_round_trip(plan):
    for dagger in ("$", "†"):
        text = print_dsl(plan, dagger)
        parsed, diags = parse_dsl(text)
        assert diags == [], (text, diags)
        assert parsed == plan, text


@settings(SETTINGS, max_examples=60)
@given(plans())
def test_formatting_is_idempotent(plan):
    text = print_dsl(plan)
    parsed, _ = parse_dsl(text)
    assert print_dsl(parsed) == text
    # DSL -> model -> DSL is the identity on formatted text, whatever dagger it was written with
    again, _ = parse_dsl(print_dsl(plan, "†"))
    assert print_dsl(again) == text


_ALPHABET = st.sampled_from(list("abz_09 \t\n;,.:=()[]{}@$†\"'\\#|&<+->") + ["tool ", "return ", "goal = ",
                                                                               "@risk(", "->", "$state.x"])


@settings(max_examples=150, deadline=None)
@given(st.lists(_ALPHABET, max_size=60).map("".join))
def test_arbitrary_text_never_raises(text):
    plan, diags = parse_dsl(text)
    assert plan.form == "dsl"
    _assert_inside(text, diags)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=80))
def test_arbitrary_unicode_never_raises(text):
    _, diags = parse_dsl(text)
    _assert_inside(text, diags)


@settings(SETTINGS, max_examples=75)
@given(plans(max_calls=3), st.data())
def test_mutated_plans_never_raise(plan, data):
    text = print_dsl(plan)
    for _ in range(data.draw(st.integers(1, 3))):
        if not text:
            break
        i = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        piece = data.draw(st.sampled_from(list("()[]{},;:=\"'\n @$†#|&")))
        if op == "delete":
            text = text[:i] + text[i + 1:]
        elif op == "insert":
            text = text[:i] + piece + text[i:]
        else:
            text = text[:i] + piece + text[i + 1:]
    _, diags = parse_dsl(text)
    _assert_inside(text, diags)
