"""`Agent(reply_form="json")` / `sophon-dsl agent --reply-form json` send the JSON lesson
(SYSTEM_JSON) instead of the DSL one; the default is unchanged."""

from __future__ import annotations

import json

import pytest

from sophon_dsl.cli import main
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.providers import ScriptedProvider
from sophon_dsl.llm.providers.scripted import KeyedReply

TOOLS = "from sophon_dsl.tools import tool\n\n@tool\ndef shout(text: str) -> str:\n    return text.upper()\n"
JSON_REPLY = json.dumps({"calls": [{"_tool": "shout", "text": "hi", "_outputPath": "†state.s"}],
                         "output": "†state.s"})
# a JSON-mode model answers only when taught the JSON form; a DSL request finds no reply
SCRIPT = {"keyed": [{"match": "returning a solution object as JSON", "reply": JSON_REPLY}]}


def test_cli_reply_form_json_sends_the_json_lesson(tmp_path, capsys):
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS, encoding="utf-8")
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    argv = ["agent", "say hi", "--tools", str(tools), "--no-stdlib", "--provider", f"scripted:{script}", "--json"]
    assert main([*argv, "--reply-form", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == "HI"
    assert main(argv) != 0  # default: the DSL lesson, which this model does not answer
    capsys.readouterr()


def test_agent_reply_form_option():
    seen = []

    def tools():
        from sophon_dsl.tools import tool

        @tool
        def shout(text: str) -> str:
            return text.upper()
        return [shout]

    provider = ScriptedProvider(keyed=[KeyedReply("returning a solution object as JSON", JSON_REPLY)])
    agent = Agent(provider, tools=tools(), stdlib=False, reply_form="json",
                  on_event=lambda e: seen.append(e.data) if e.type == "agent_turn_start" else None)
    assert agent.run("say hi").output == "HI"
    assert seen[0][0].content.startswith("You are an agent that acts by returning a solution object as JSON")
    with pytest.raises(ValueError, match="reply_form"):
        Agent(provider, tools=tools(), stdlib=False, reply_form="yaml")
