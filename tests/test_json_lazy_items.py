"""Long JSON arrays (a plan's calls) are decoded and measured item by item (issue 9,
memory per call): what the measurer refuses deep inside one is still a diagnostic."""

from __future__ import annotations

import json
import sys

import pytest

import sophon_dsl
from sophon_dsl.diagnostics import Span


@pytest.mark.parametrize("odd", ["9" * 4100, "1e999", "[" * 250 + "]" * 250])
def test_an_odd_value_deep_in_a_long_call_array_is_a_diagnostic(odd):
    calls = [{"_tool": "work", "x": i} for i in range(40)]
    calls[35]["x"] = "ODD"
    text = json.dumps(calls, indent=1).replace('"ODD"', odd)
    old_limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(sophon_dsl.DiagnosticError) as err:
            sophon_dsl.loads(text, "json")
    finally:
        sys.set_int_max_str_digits(old_limit)
    first = err.value.diagnostics[0]
    assert first.code == "E002" and first.span.line == text[:text.index(odd[:3])].count("\n") + 1


def test_a_long_call_array_reads_the_same_twice():
    calls = [{"_tool": "work", "x": i} for i in range(40)]
    plan = sophon_dsl.loads(json.dumps(calls, indent=2), "json")
    assert [c.params[0].value.value for c in plan.calls] == list(range(40))
    assert plan.calls[7].span == Span(30, 3, 33, 4)
