"""Parameters whose name starts with `_` (`_from`, `_class`: real API names) reach the model.

In the JSON form such a parameter is spelled with one more underscore (`"__from"`), in the
DSL quoted (`"_from"=...`): spec/language.md, "JSON form".  The structured-output schema,
the JSON prompt's call schemas, the DSL tool signature and a delegate's declared tools must
all keep it instead of dropping it as if it were a meta-property.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from test_delegate import RoutingProvider, is_delegate

from sophon_dsl import check, loads, run
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.constrained import solution_from_strict, solution_schema
from sophon_dsl.llm.prompt import build_messages, tool_signature, tools_json
from sophon_dsl.model import ToolDecl
from sophon_dsl.tools import tool


@tool(name="mail.search")
def mail_search(_from: str, folder: str = "inbox", _cc: str | None = None) -> list[str]:
    return [f"{folder}:{_from}:{_cc}"]


def test_structured_output_schema_keeps_underscore_parameters():
    jsonschema = pytest.importorskip("jsonschema")
    schema = solution_schema([mail_search])
    branch = schema["properties"]["calls"]["items"]["anyOf"][0]  # the tool's; the other is a map's
    assert {"__from", "__cc", "folder"} <= set(branch["properties"])
    assert "_from" not in branch["properties"] and "__from" in branch["required"]
    reply = {"calls": [{"_tool": "mail.search", "__from": "ann@x.org", "folder": None, "__cc": None,
                        "_outputPath": "†state.hits", "_outputMethod": None, "_after": None, "_id": None}],
             "output": None}
    jsonschema.validate(reply, schema)
    back = solution_from_strict(reply, [mail_search])
    assert back["calls"] == [{"_tool": "mail.search", "__from": "ann@x.org", "_outputPath": "†state.hits"}]
    plan = loads(json.dumps(back), "json")
    assert check(plan, [mail_search]) == []
    assert run(plan, tools=[mail_search]).state["state"]["hits"] == ["inbox:ann@x.org:None"]


def test_strict_null_of_a_required_underscore_parameter_is_kept():
    @tool(input_schema={"type": "object", "properties": {"_v": {"type": ["string", "null"]}}, "required": ["_v"]})
    def nullable(_v: str | None) -> str:
        return str(_v)

    back = solution_from_strict({"calls": [{"_tool": "nullable", "__v": None, "_id": None}], "output": None},
                                [nullable])
    assert back["calls"] == [{"_tool": "nullable", "__v": None}]


def test_prompts_spell_underscore_parameters_as_the_forms_read_them():
    assert tool_signature(mail_search).startswith('mail.search("_from": string, folder?: string, "_cc"?: ')
    [entry] = tools_json([mail_search])
    assert {"__from", "__cc", "folder"} <= set(entry["properties"]) and "_from" not in entry["properties"]
    assert entry["required"] == ["_tool", "__from"]
    [system, _] = build_messages("go", tools=[mail_search], form="json")
    assert '"__from":' in system.content


def test_a_delegates_declared_tool_keeps_its_underscore_parameters(tmp_path):
    declared = {"mail.find": {"type": "object", "description": "Find mail", "properties": {
        "_tool": {"const": "mail.find"}, "__from": {"type": "string"}, "folder": {"type": "string"},
        "_output": {"type": "array", "items": {"type": "string"}}}, "required": ["_tool", "__from"]}}
    (tmp_path / "mailer.json").write_text(json.dumps(
        {"context": [{"type": "system", "message": "You find mail."}, {"type": "tool", "tool": declared}]}))
    seen: list[str] = []

    def route(system: str, user: str) -> str:
        if is_delegate(user):
            seen.append(system.split("\nTools:\n", 1)[1])
            if "Plan (your previous turn)" not in user:
                return '$state.hits = mail.find("_from"="ann@x.org", folder="inbox") -> ["m1"]\n'
            return "return $state.hits\n"
        return '@delegate("mailer") $state.found = find_mail(who="ann")\nreturn $state.found\n'

    outer = ToolDecl("find_mail", "", {"type": "object", "properties": {"who": {"type": "string"}}},
                     {"type": "array"})
    result = Agent(RoutingProvider(route), tools=[outer], delegate_dir=tmp_path).run("find ann's mail")
    assert result.ok, [t.errors for t in result.turns]
    assert result.output == ["m1"]
    assert 'mail.find("_from": string, folder?: string)' in seen[0]
