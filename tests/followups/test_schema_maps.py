"""`sophon-dsl schema` (strict structured outputs) accepts map calls, as the JSON prompt teaches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sophon_dsl.cli import main
from sophon_dsl.llm.constrained import solution_from_strict, solution_schema, strict_problems
from sophon_dsl.toolsource import load_tool_sources

ROOT = Path(__file__).resolve().parents[2]
TOOLS = str(ROOT / "examples" / "map_tools.py")


def _schema(capsys) -> dict:
    assert main(["schema", "--tools", TOOLS, "--no-stdlib"]) == 0
    return json.loads(capsys.readouterr().out)


def _pad(call: dict, schema: dict) -> dict:
    """A call as a strict-mode reply writes it: every property of its branch present (null if unset)."""
    branches = schema["properties"]["calls"]["items"]["anyOf"]
    if "_map" in call:
        branch = next(b for b in branches if "_map" in b["properties"])
        options = {k: call["_map"].get(k) for k in branch["properties"]["_map"]["properties"]}
        options["do"] = [_pad(c, schema) for c in call["_map"]["do"]]
        call = {**call, "_map": options}
    else:
        branch = next(b for b in branches if b["properties"].get("_tool", {}).get("enum") == [call["_tool"]])
    return {k: call.get(k) for k in branch["properties"]}


SOLUTION = {"calls": [
    {"_tool": "search", "query": "†input.topic", "_outputPath": "†state.hits"},
    {"_map": {"over": "†state.hits", "as": "hit", "concurrency": 2, "tolerate": "50%",
              "do": [{"_tool": "fetch", "url": "†hit.url", "_outputPath": "†local.page || †local.error"},
                     {"_map": {"over": ["fr", "de"], "as": "lang",
                               "do": [{"_tool": "translate", "text": "†hit.title", "lang": "†lang",
                                       "_outputPath": "†local.t"}],
                               "return": "†local.t"},
                      "_outputPath": "†local.translations"}],
              "return": "†local.translations"},
     "_id": "pages", "_outputPath": "†state.pages || †state.failed"},
    {"_tool": "summarize", "texts": "†state.pages", "_outputPath": "†state.summary"},
], "output": "†state.summary"}


def test_strict_schema_accepts_map_calls_nested(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    schema = _schema(capsys)
    assert strict_problems(schema) == []
    jsonschema.Draft202012Validator.check_schema(schema)
    reply = {"calls": [_pad(c, schema) for c in SOLUTION["calls"]], "output": SOLUTION["output"]}
    jsonschema.validate(reply, schema)
    tools, _ = load_tool_sources([TOOLS])
    assert solution_from_strict(reply, tools) == SOLUTION


def test_the_solution_is_a_valid_plan(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}}},
                                **SOLUTION}), encoding="utf-8")
    assert main(["check", str(plan), "--tools", TOOLS]) == 0, capsys.readouterr()


def test_strict_schema_still_refuses_bad_maps(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    schema = _schema(capsys)
    good = {"calls": [_pad(c, schema) for c in SOLUTION["calls"]], "output": None}
    bad_body = json.loads(json.dumps(good))
    bad_body["calls"][1]["_map"]["do"][0]["_tool"] = "noSuchTool"
    no_over = json.loads(json.dumps(good))
    del no_over["calls"][1]["_map"]["over"]
    both = json.loads(json.dumps(good))
    both["calls"][1]["_tool"] = "search"
    for bad in (bad_body, no_over, both):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_map_branch_can_be_left_out():
    tools, _ = load_tool_sources([TOOLS])
    schema = solution_schema(tools, maps=False)
    assert not any("_map" in b["properties"] for b in schema["properties"]["calls"]["items"]["anyOf"])
