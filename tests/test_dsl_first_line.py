"""A statement parsed at its place in a longer text (``parse_dsl(text, first_line=N)``, what a
streamed reply does for each statement) gives what parsing it below N-1 lines gives, at the
cost of the statement alone (issue 24 fuzzing: a reply of many broken or commented lines
cost the square of its length)."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from sophon_dsl.diagnostics import Span
from sophon_dsl.syntax.dsl_parser import parse_dsl

FRAGMENTS = ["$state.o", " = ", "f(", "a=1", ", ", ")", "# note\n", "\n", "@retry(3) ", "@risk(high) ", '"x', '"',
             "[1, 2", "]", "{", "}", "map($input.xs, as=x) { $local.a = g(v=$x) }", "†state.a || †state.b", "->",
             "return ", "$input.q", "(", ",", "goal = ", "tool t = {", "1e999", "\u202e", "s1: ", "@after(s9) "]


def spans(obj, out, seen):
    """Every Span inside ``obj`` (a model tree), in order."""
    if isinstance(obj, Span):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            spans(x, out, seen)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type) and id(obj) not in seen:
        seen.add(id(obj))
        for f in dataclasses.fields(obj):
            spans(getattr(obj, f.name, None), out, seen)
    return out


def comments(plan):
    return (plan.comments, plan.trailing_comments, [(c.comments, c.trailing_comment) for c in plan.calls])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=12), st.integers(2, 60), st.integers(1, 4))
def test_a_statement_parsed_in_place_matches_it_parsed_below_blank_lines(parts, line, column):
    text = " " * (column - 1) + "".join(parts)
    padded, padded_diags = parse_dsl("\n" * (line - 1) + text)
    moved, moved_diags = parse_dsl(text, first_line=line)
    assert moved_diags == padded_diags
    assert moved.calls == padded.calls
    assert spans(moved.calls, [], set()) == spans(padded.calls, [], set())
    assert comments(moved) == comments(padded)
    assert moved.output == padded.output


def test_many_broken_statements_cost_each_statement_alone():
    # 4,000 broken statements, each at its line: the old way parsed 8 million blank lines
    for line in range(1, 4001):
        _plan, diags = parse_dsl("$state.o", first_line=line)
        assert diags and diags[0].span.line == line
