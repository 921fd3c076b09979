"""An agent whose replies use what the prompt teaches: a map and JMESPath (issue 12).

Through the project's scripted provider: the reply of the first turn maps over a list with a
JMESPath filter, the second turn sees that plan in the compact layout and returns the map's
result; the same run with a JSON reply (`_map`)."""

from __future__ import annotations

import json

import pytest
import yaml

from sophon_dsl.llm.agent import Agent
from sophon_dsl.tools import tool

providers = pytest.importorskip("sophon_dsl.llm.providers")

_TEXTS = [{"lang": "en", "text": "hello"}, {"lang": "fr", "text": "salut"}, {"lang": "en", "text": "bye"}]


def make_tools(seen: list) -> list:
    @tool(output_schema={"type": "array", "items": {"type": "object", "properties": {
        "lang": {"type": "string"}, "text": {"type": "string"}}, "required": ["lang", "text"]}})
    def inbox() -> list:
        return _TEXTS

    @tool
    def translate(text: str, lang: str = "fr") -> str:
        seen.append(text)
        return f"{lang}:{text}"

    return [inbox, translate]


def run_script(tmp_path, replies: list[str]):
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"reply": r, "chunk_size": 7} for r in replies]))
    seen: list = []
    result = Agent(providers.ScriptedProvider(str(script)), tools=make_tools(seen)).run("translate the english mail")
    return result, seen


def test_dsl_reply_with_a_map_over_a_jmespath_filter(tmp_path):
    first = ('$state.mail = inbox()\n'
             '$state.fr || $state.bad = map($state.mail[?lang == `"en"`], as=m, concurrency=2) {\n'
             '    $local.t = translate(text=$m.text)\n'
             '    return $local.t\n'
             '}\n')
    result, seen = run_script(tmp_path, [first, "return $state.fr\n"])
    assert result.ok, (result.error, [t.errors for t in result.turns])
    assert result.output == ["fr:hello", "fr:bye"] and sorted(seen) == ["bye", "hello"]
    assert result.turns[0].errors == []
    context = result.turns[1].messages[-1].content
    assert ('$state.fr || $state.bad = map($state.mail[?lang == `"en"`],as=m,concurrency=2) '
            '{$local.t = translate($m.text);return $local.t}') in context


def test_json_reply_with_a_map(tmp_path):
    first = json.dumps({"calls": [
        {"_tool": "inbox", "_outputPath": "†state.mail"},
        {"_map": {"over": "†state.mail[?lang == `\"en\"`]", "as": "m",
                  "do": [{"_tool": "translate", "text": "†m.text", "_outputPath": "†local.t"}],
                  "return": "†local.t"}, "_outputPath": "†state.fr"}], "output": None}, ensure_ascii=False)
    second = json.dumps({"calls": [], "output": "†state.fr"}, ensure_ascii=False)
    result, _ = run_script(tmp_path, [first, second])
    assert result.ok, (result.error, [t.errors for t in result.turns])
    assert result.output == ["fr:hello", "fr:bye"]
