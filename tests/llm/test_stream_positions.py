"""A streamed statement is parsed alone but placed at its line: same model, spans and
diagnostics as parsing it where it stands in the reply."""

from __future__ import annotations

from dataclasses import fields, is_dataclass

import pytest

from sophon_dsl.diagnostics import Span

from sophon_dsl.syntax.dsl_parser import parse_dsl

STATEMENTS = [
    '$state.a = web.search(query="x")',
    '@risk(high) @retry(3)\n$state.b || $state.err = pay(amount=$input.amount,\n    note="for †state.a")',
    'c9: notify(rows=[$state.a, {"k": $state.b}], flag=true)',
    'return {"status": $state.a}',
    '$state.x = f(a=1',                  # a syntax error: diagnostics at the right line
    '$state.y = g(a=1)  # a comment',    # comment trivia
]


def spans(obj) -> list:
    """Every span inside a model node, depth first."""
    if isinstance(obj, Span):
        return [obj]
    if isinstance(obj, tuple):
        return [s for x in obj for s in spans(x)]
    if is_dataclass(obj) and not isinstance(obj, type):
        return [s for f in fields(obj) for s in spans(getattr(obj, f.name))]
    return []


@pytest.mark.parametrize("text", STATEMENTS)
@pytest.mark.parametrize("line", [1, 2, 57])
def test_first_line_matches_parsing_where_it_stands(text, line):
    moved, moved_diags = parse_dsl("   " + text, first_line=line)
    padded, padded_diags = parse_dsl("\n" * (line - 1) + "   " + text)
    assert moved.calls == padded.calls
    assert [c.span for c in moved.calls] == [c.span for c in padded.calls]
    assert [[p.span for p in c.params] for c in moved.calls] == [[p.span for p in c.params] for c in padded.calls]
    assert moved.output == padded.output
    assert spans(moved.calls) == spans(padded.calls) and spans(moved.output) == spans(padded.output)
    assert [(d.code, d.span) for d in moved_diags] == [(d.code, d.span) for d in padded_diags]


def test_a_later_parse_is_not_moved():
    parse_dsl("$state.a = f()", first_line=40)
    plan, _ = parse_dsl("$state.a = f()")
    assert plan.calls[0].span.line == 1
