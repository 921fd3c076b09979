"""Prescribed output paths (issue 10 item 18, Acts 008): a ``const`` on ``_outputPath`` in a
tool's input schema is where its calls write; another path is E210."""

from __future__ import annotations

import json

import pytest

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.providers.scripted import ScriptedProvider
from sophon_dsl.tools import tool

SUMMARY_INPUT = {
    "type": "object",
    "properties": {"text": {"type": "string"},
                   "_outputPath": {"type": "string", "const": "†data.user.summary"}},
    "required": ["text", "_outputPath"],
    "additionalProperties": False,
}
DECL = {"summarize": {"description": "Summarise a text", "input": SUMMARY_INPUT, "output": {"type": "string"}},
        "show": {"input": {"type": "object", "properties": {"x": {"type": "string"}}}}}


def _summarize_tool():
    @tool(name="summarize", input_schema=SUMMARY_INPUT, output_schema={"type": "string"})
    def summarize(text: str) -> str:
        return text.upper()

    return summarize


def _codes(diags) -> list[str]:
    return sorted(d.code for d in diags if d.is_error)


def test_a_call_without_an_output_path_writes_the_prescribed_one():
    seen = []

    @tool
    def show(x: str) -> None:
        seen.append(x)

    result = sophon_dsl.run('summarize(text="hi")\nshow(x=†data.user.summary)\n',
                            tools=[_summarize_tool(), show])
    assert result.status == "succeeded", result.to_json()
    assert result.state["data"] == {"user": {"summary": "HI"}}
    assert seen == ["HI"]  # the reader was wired to the prescribed path


@pytest.mark.parametrize("form, text", [
    ("dsl", '†state.other = summarize(text="hi")\n'),
    ("json", '[{"_tool": "summarize", "text": "hi", "_outputPath": "†state.other"}]'),
    ("yaml", "- _tool: summarize\n  text: hi\n  _outputPath: †state.other\n"),
])
def test_a_conflicting_output_path_is_e210_in_every_form(tmp_path, capsys, form, text):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": k, **v} for k, v in DECL.items()]), encoding="utf-8")
    plan = tmp_path / f"p.{ {'dsl': 'plan', 'json': 'json', 'yaml': 'yaml'}[form] }"
    plan.write_text(text, encoding="utf-8")
    assert main(["check", str(plan), "--tools", str(tools), "--no-stdlib", "--json"]) == 1
    diags = json.loads(capsys.readouterr().out)
    assert [d["code"] for d in diags if d["severity"] == "error"] == ["E210"], diags
    assert "†data.user.summary" in diags[0]["message"]


@pytest.mark.parametrize("form, text", [
    ("dsl", 'summarize(text="hi")\n†data.user.summary = summarize(text="again")\n'),
    ("json", '[{"_tool": "summarize", "text": "hi"}]'),
    ("yaml", "- _tool: summarize\n  text: hi\n  _outputPath: †data.user.summary\n"),
])
def test_no_output_path_or_the_prescribed_one_is_clean_and_outputpath_is_no_parameter(tmp_path, capsys, form,
                                                                                           text):
    # `_outputPath` is required by the schema: still no E202 (it is not a parameter)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": k, **v} for k, v in DECL.items()]), encoding="utf-8")
    plan = tmp_path / f"p.{ {'dsl': 'plan', 'json': 'json', 'yaml': 'yaml'}[form] }"
    plan.write_text(text, encoding="utf-8")
    assert main(["check", str(plan), "--tools", str(tools), "--no-stdlib", "--json"]) == 0, capsys.readouterr()


def test_outputpath_is_not_listed_as_a_parameter_in_e203():
    plan = sophon_dsl.loads('summarize(txt="hi")\n')
    diags = sophon_dsl.check(plan, tools=[_summarize_tool()])
    assert _codes(diags) == ["E202", "E203"]  # text missing, txt unknown; never _outputPath
    assert all("_outputPath" not in d.message for d in diags), [d.message for d in diags]


def test_plan_declaration_prescribing_a_branching_path():
    decl = {"input": {"type": "object", "properties": {
        "amount": {"type": "number"},
        "_outputPath": {"type": "string", "const": "†state.receipt || †state.error"}}}}
    text = f"tool pay = {json.dumps(decl)}\npay(amount=3) -> {{\"id\": 1}}\n"
    result = sophon_dsl.run(text, tools=[])
    assert result.status == "succeeded"
    assert result.state["state"] == {"receipt": {"id": 1}}
    bad = sophon_dsl.loads(text.replace("pay(", "†state.receipt = pay("))
    assert _codes(sophon_dsl.check(bad, tools=[])) == ["E210"]


def test_a_prescription_that_is_not_a_path_is_e211():
    decl = {"input": {"type": "object", "properties": {"_outputPath": {"const": "data.summary"}}}}
    plan = sophon_dsl.loads(f"tool s = {json.dumps(decl)}\ns() -> 1\n")
    assert _codes(sophon_dsl.check(plan, tools=[])) == ["E211"]


def test_required_outputpath_does_not_fail_the_run_time_input_check():
    @tool
    def source() -> str:
        return "text"

    result = sophon_dsl.run('†state.t = source()\nsummarize(text=†state.t)\n',
                            tools=[_summarize_tool(), source])
    assert result.status == "succeeded", result.to_json()
    assert result.state["data"] == {"user": {"summary": "TEXT"}}


def test_streamed_agent_calls_get_the_prescribed_path():
    provider = ScriptedProvider(['summarize(text="hi")\nreturn $data.user.summary\n'])
    agent = Agent(provider=provider, tools=[_summarize_tool()], max_turns=1)
    result = agent.run("summarise hi")
    assert result.status == "succeeded", result.to_json()
    assert result.output == "HI"


def test_streamed_agent_conflicting_path_is_refused_with_e210():
    provider = ScriptedProvider(['$state.x = summarize(text="hi")\nreturn 1\n', "return 2\n"])
    agent = Agent(provider=provider, tools=[_summarize_tool()], max_turns=2)
    result = agent.run("summarise hi")
    first = result.to_json()["turns"][0]
    assert [e["error"]["code"] for e in first["errors"]] == ["E210"]
    assert first["calls"][0]["status"] == "failed"


def test_the_prompt_shows_the_prescribed_path_not_a_parameter():
    from sophon_dsl.llm.prompt import tool_signature

    line = tool_signature(_summarize_tool())
    assert line.startswith("summarize(text: string) -> string"), line
    assert "writes †data.user.summary" in line
