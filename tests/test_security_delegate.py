"""Issue 17, Medium 8: a delegate file named by a plan (so by the model) stays inside the
configured delegate directory; the user's own `delegates={...}` entries are not confined."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, AsyncIterator, Sequence

import pytest

from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.delegate import load_request
from sophon_dsl.llm.provider import Message
from sophon_dsl.model import ToolDecl
from sophon_dsl.runtime import RunError

SECRET = {"context": [{"type": "system", "message": "HOST-SECRET-7731"}], "schema": {"type": "string"}}
ASK = ToolDecl("ask", "", {"type": "object", "properties": {"q": {"type": "string"}}}, {"type": "string"})


class Scripted:
    """The parent writes ``@delegate(<name>)``; a delegate answers; every prompt is kept."""

    name = "scripted"

    def __init__(self, delegate_name: str) -> None:
        self.delegate_name = delegate_name
        self.prompts: list[str] = []

    async def stream(self, messages: Sequence[Message], *, model: str | None = None, json_schema: dict | None = None,
                     temperature: float | None = None, max_tokens: int | None = None) -> AsyncIterator[str]:
        user = messages[-1].content
        self.prompts.append(user)
        if "(You are the delegate" in user:
            reply = 'return "answered"\n'
        else:
            reply = f'@delegate({json.dumps(self.delegate_name)}) $state.a = ask(q="x")\nreturn $state.a\n'
        await asyncio.sleep(0)
        yield reply


@pytest.fixture
def dirs(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text(json.dumps(SECRET), encoding="utf-8")
    inside = tmp_path / "delegates"
    inside.mkdir()
    (inside / "helper.json").write_text(json.dumps({"context": [{"type": "system", "message": "You help."}],
                                                    "schema": {"type": "string"}}), encoding="utf-8")
    os.symlink(outside / "secret.json", inside / "link.json")
    return inside, outside


def _run(name: str, inside: Any) -> tuple[Any, Scripted]:
    provider = Scripted(name)
    result = Agent(provider, tools=[ASK], delegate_dir=inside, max_turns=2).run("go")
    return result, provider


@pytest.mark.parametrize("escape", ["../outside/secret.json", "../outside/secret", "link.json", "ABSOLUTE"])
def test_a_plan_cannot_name_a_file_outside_the_delegate_directory(dirs, escape):
    inside, outside = dirs
    name = str(outside / "secret.json") if escape == "ABSOLUTE" else escape
    result, provider = _run(name, inside)
    assert not any("HOST-SECRET-7731" in p for p in provider.prompts)
    errors = json.dumps([t.to_json() if hasattr(t, "to_json") else str(t) for t in result.turns], default=str)
    assert "Delegate.OutsideDirectory" in errors or "Delegate.OutsideDirectory" in str(result.error)


def test_a_file_inside_the_delegate_directory_still_works(dirs):
    inside, _ = dirs
    result, provider = _run("helper", inside)
    assert result.ok and result.output == "answered"
    assert any("You help." in p for p in provider.prompts)


def test_load_request_confined_and_the_users_own_paths(dirs):
    inside, outside = dirs
    with pytest.raises(RunError) as info:
        load_request("../outside/secret", inside, confined=True)
    assert info.value.error == "Delegate.OutsideDirectory"
    # a path the user configured (delegates={...}) is theirs to choose
    assert load_request(outside / "secret.json", inside)["schema"] == {"type": "string"}


def test_an_unreadable_request_is_a_named_failure(dirs):
    inside, _ = dirs
    (inside / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(RunError) as info:
        load_request("broken", inside, confined=True)
    assert info.value.error == "Delegate.Failed"
