"""Issue 11 item 5: the prompt's compact DSL layout parses back to the same plan.

Token figures are in tests/test_token_ratio.py; here the layout is checked on any plan
(headers, decorators, comments, long calls the printer splits over lines)."""

from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, os.path.dirname(__file__))

from strategies import plans

from sophon_dsl.llm.prompt import build_messages, compact_dsl, compact_plan, render_plan
from sophon_dsl.loader import loads
from sophon_dsl.syntax.dsl_parser import parse_dsl
from sophon_dsl.syntax.dsl_printer import print_dsl


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(plans(comments=True))
def test_compact_layout_parses_to_the_same_plan(plan):
    text = compact_plan(plan)
    parsed, diags = parse_dsl(text)
    assert diags == [], (text, diags)
    assert parsed == plan, text
    assert compact_dsl(text) == text  # already compact


def test_compact_layout_keeps_strings_and_comments():
    source = ('# a note, with: punctuation\n'
              '$state.a = f(\n    text="a, b: c # not a comment",\n    nums=[1, 2, 3],\n'
              '    obj={k: "v, w", n: {m: 1}},\n)  # trailing, kept\n'
              'return {x: $state.a, y: [1, 2]}\n')
    plan = loads(source)
    text = compact_plan(plan)
    assert text == ('# a note, with: punctuation\n'
                    '$state.a = f(text="a, b: c # not a comment",nums=[1,2,3],obj={k:"v, w",n:{m:1}})'
                    '  # trailing, kept\n'
                    'return {x:$state.a,y:[1,2]}\n')
    assert parse_dsl(text)[0] == plan


def test_plans_fed_back_to_the_model_use_the_compact_layout():
    plan = loads('$state.m = statistics.mean(numbers=[12, 15, 18, 21])\n')
    shown = render_plan(plan, [{"id": "c1", "status": "succeeded"}])
    assert "statistics.mean(numbers=[12,15,18,21])" in shown
    assert print_dsl(plan).strip() not in shown
    [system, user] = build_messages("go", tools=[], plan=plan)
    assert "numbers=[12,15,18,21]" in user.content
    assert 'web.search(query="llm agents",limit=3)' in system.content
