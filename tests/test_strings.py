"""Strings that mean what a reader expects (issue 12): W101 on reference look-alikes, the
whole-string rule kept, fmt translating exactly between the forms."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from sophon_dsl import dumps, loads, run
from sophon_dsl.cli import main
from sophon_dsl.model import Literal, Reference, Template
from sophon_dsl.tools import ToolSpec


def test_check_warns_on_a_dollar_reference_in_text(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text('tool greet = {"input": {"type": "object"}}\ngreet(text="Hello $input.name")\n',
                    encoding="utf-8")
    assert main(["check", str(plan), "--json"]) == 0  # a warning, not an error
    out = json.loads(capsys.readouterr().out)
    w101 = [d for d in out if d["code"] == "W101"]
    assert len(w101) == 1 and "write †input.name" in w101[0]["message"]
    assert (w101[0]["line"], w101[0]["column"]) == (2, 12)


def test_json_text_gets_the_same_warning(tmp_path, capsys):
    plan = tmp_path / "p.json"
    plan.write_text('{"tools": {"greet": {"input": {"type": "object"}}},'
                    ' "calls": [{"_tool": "greet", "text": "Hi {{input.name}}"}]}', encoding="utf-8")
    assert main(["check", str(plan), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["code"] for d in out] == ["W101"]
    assert "write †{input.name}" in out[0]["message"]


def test_text_stays_text_at_run_time():
    got = {}

    def greet(text):
        got["text"] = text

    result = run(loads('greet(text="Hello $input.name")'), [ToolSpec("greet", "", None, None, func=greet)],
                 input={"name": "Ann"})
    assert result.status == "succeeded"
    assert got["text"] == "Hello $input.name"


def test_fmt_prints_a_quoted_whole_reference_bare():
    plan = loads('summarize(text="†state.translations")')
    assert isinstance(plan.calls[0].params[0].value, Reference)
    assert dumps(plan) == "summarize(text=$state.translations)\n"


STRINGS = ['Hello $input.name', 'Hello ${input.name}!', '{{ input.a }} and {input.b}', 'a ††dagger',
           'Hello †input.name', '†{state.file}.txt', 'cost $5', '†state.a', '†state.a || †state.b']


def test_fmt_translates_every_string_exactly_between_the_forms():
    params = ", ".join(f"p{i}={json.dumps(s, ensure_ascii=False)}" for i, s in enumerate(STRINGS))
    plan = loads(f"greet({params})")
    for form in ("json", "yaml"):
        text = dumps(plan, form)
        again = loads(text, form)
        assert again == plan, form
        assert dumps(again) == dumps(plan)  # back to the same DSL
    values = [p.value for p in plan.calls[0].params]
    assert [type(v).__name__ for v in values] == ["Literal", "Literal", "Literal", "Literal", "Template",
                                                   "Template", "Literal", "Reference", "Expression"]
    assert isinstance(values[0], Literal) and values[0].value == "Hello $input.name"
    assert isinstance(values[4], Template)


@given(st.text(alphabet="ab $.{}†_input", max_size=20))
def test_any_text_reads_back_the_same_in_every_form(text):
    try:
        plan = loads(f"greet(t={json.dumps(text, ensure_ascii=False)})")
    except Exception:  # noqa: BLE001 - any refusal is fine here
        return  # a lone dagger is E105, by design
    for form in ("dsl", "json", "yaml"):
        assert loads(dumps(plan, form), form) == plan
