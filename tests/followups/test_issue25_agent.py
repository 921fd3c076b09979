"""Issue 25 item 15: `agent` has a wall-clock limit (--max-time, max_time=) and sends
max_tokens on its turns (4096 by default, configurable)."""

from __future__ import annotations

import json

import yaml

from sophon_dsl.cli import main
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.providers.scripted import ScriptedProvider
from sophon_dsl import tool

TOOLS = '''
import asyncio
from sophon_dsl import tool

@tool
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"

@tool
def quick(x: int) -> int:
    return x
'''


def _files(tmp_path, replies):
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "replies.yaml").write_text(yaml.safe_dump(replies), encoding="utf-8")
    return ["--tools", str(tmp_path / "tools.py"), "--no-stdlib", "--no-store",
            "--provider", f"scripted:{tmp_path / 'replies.yaml'}", "--approve", "yes"]


def test_agent_max_time_stops_a_run_that_would_go_on(tmp_path, capsys):
    argv = _files(tmp_path, ['$state.r = slow(seconds=600)\n', 'return "never"\n'])
    assert main(["agent", "wait", *argv, "--max-time", "0.5", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "failed" and out["error"].startswith("Agent.Timeout")


def test_agent_sends_max_tokens_on_every_turn(tmp_path, capsys, monkeypatch):
    seen = []
    import sophon_dsl.cli.agent as agent_cli

    real = agent_cli.ready_provider

    def keep(*a, **kw):
        provider = real(*a, **kw)
        seen.append(provider)
        return provider

    monkeypatch.setattr(agent_cli, "ready_provider", keep)
    argv = _files(tmp_path, ['$state.r = quick(x=1)\n', 'return $state.r\n'])
    assert main(["agent", "go", *argv, "--json"]) == 0
    assert [c["max_tokens"] for c in seen[0].calls] == [4096, 4096]
    capsys.readouterr()
    assert main(["agent", "go", *argv, "--max-tokens", "900", "--json"]) == 0
    assert {c["max_tokens"] for c in seen[1].calls} == {900}


@tool
def quick(x: int) -> int:
    return x


def test_the_python_api_sends_max_tokens_and_takes_max_time():
    provider = ScriptedProvider(['return 1\n'])
    result = Agent(provider, tools=[quick], stdlib=False).run("go")
    assert result.status == "succeeded" and provider.calls[0]["max_tokens"] == 4096
    provider = ScriptedProvider(['return 1\n'])
    Agent(provider, tools=[quick], stdlib=False, max_tokens=123, max_time=60).run("go")
    assert provider.calls[0]["max_tokens"] == 123
