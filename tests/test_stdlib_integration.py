"""The standard tool library is available to every plan without flags (issue 4)."""

from __future__ import annotations

import json

import sophon_dsl
from sophon_dsl import tool
from sophon_dsl.cli import main
from sophon_dsl.tools import ToolRegistry

PLAN = '†state.words = text.split(text="a b c", separator=" ")\n'


def test_python_check_knows_stdlib_by_default_and_can_switch_it_off():
    plan = sophon_dsl.loads(PLAN)
    assert [d.code for d in sophon_dsl.check(plan)] == []
    assert [d.code for d in sophon_dsl.check(plan, stdlib=False)] == ["E201"]
    assert [d.code for d in sophon_dsl.check(plan, tools=ToolRegistry())] == ["E201"]
    assert [d.code for d in sophon_dsl.check(plan, stdlib=["math"])] == ["E201"]
    assert [d.code for d in sophon_dsl.check(plan, stdlib=["text"])] == []


def test_user_tool_replaces_standard_tool_with_a_note():
    @tool(name="text.split")
    def my_split(text: str) -> list[str]:
        return text.split()

    plan = sophon_dsl.loads('†state.words = text.split(text="a b c")\n')
    diags = sophon_dsl.check(plan, tools=[my_split])
    assert [(d.code, d.severity.value) for d in diags] == [("N201", "note")]
    assert sophon_dsl.run(plan, tools=[my_split]).state["state"]["words"] == ["a", "b", "c"]


def test_python_run_uses_stdlib_tools():
    result = sophon_dsl.run(sophon_dsl.loads(PLAN + '†state.n = math.eval(expression="2 * 21")\n'))
    assert result.status == "succeeded"
    assert result.state["state"]["words"] == ["a", "b", "c"]
    assert result.state["state"]["n"] == 42


def test_cli_check_and_run_without_flags(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text(PLAN, encoding="utf-8")
    assert main(["check", str(plan)]) == 0
    assert main(["check", str(plan), "--no-stdlib"]) == 1
    assert main(["check", str(plan), "--stdlib", "math"]) == 1
    assert main(["check", str(plan), "--stdlib", "text,math"]) == 0
    capsys.readouterr()
    assert main(["run", str(plan), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["state"]["words"] == ["a", "b", "c"]


def test_cli_stdlib_usage_errors(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text(PLAN, encoding="utf-8")
    assert main(["check", str(plan), "--stdlib", "nosuchgroup"]) == 2
    assert main(["check", str(plan), "--sandbox", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "nosuchgroup" in err and "--sandbox" in err


def test_cli_sandbox_confines_files(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    plan = tmp_path / "p.plan"
    plan.write_text('†state.text = files.read(path="notes.txt")\n'
                    '†state.escape = files.read(path="../etc/passwd")\n', encoding="utf-8")
    assert main(["run", str(plan), "--sandbox", str(tmp_path), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    calls = {c["id"]: c for c in result["calls"]}
    assert calls["c1"]["status"] == "succeeded"
    assert calls["c2"]["status"] == "failed"
    assert calls["c2"]["error"]["error"].startswith("Files.")


class _OneReply:
    """A provider answering every request with the same DSL reply."""

    name = "one-reply"

    def __init__(self, reply: str):
        self.reply = reply

    async def stream(self, messages, **kw):
        yield self.reply


def test_python_agent_has_the_standard_library():
    reply = '$state.n = math.eval(expression="6 * 7")\nreturn {"n": $state.n}\n'
    result = sophon_dsl.Agent(provider=_OneReply(reply)).run("compute")
    assert result.status == "succeeded" and result.output == {"n": 42}
    without = sophon_dsl.Agent(provider=_OneReply(reply), stdlib=False, max_turns=1).run("compute")
    assert without.status != "succeeded"
