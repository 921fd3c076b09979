"""Delegates (Act 014) and scopes (Act 015): isolated sub-requests whose result is the call's output."""

from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator, Callable, Sequence

import pytest

from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.delegate import load_request, scoped_context
from sophon_dsl.llm.provider import Message
from sophon_dsl.model import ToolDecl
from sophon_dsl.runtime import RunError
from sophon_dsl.tools import tool


class RoutingProvider:
    """Answers each request with ``route(system, user)``; records every request."""

    name = "routing"

    def __init__(self, route: Callable[[str, str], str]):
        self.route = route
        self.requests: list[tuple[str, str]] = []

    async def stream(self, messages: Sequence[Message], *, model: str | None = None, json_schema: dict | None = None,
                     temperature: float | None = None, max_tokens: int | None = None) -> AsyncIterator[str]:
        system, user = messages[0].content, messages[-1].content
        self.requests.append((system, user))
        reply = self.route(system, user)
        for k in range(0, len(reply), 7):
            yield reply[k:k + 7]
            await asyncio.sleep(0)


SUMMARIZE = ToolDecl("summarize", "Summarise an article",
                     {"type": "object", "properties": {"article": {"type": "string"}}},
                     {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]})


def is_delegate(user: str) -> bool:
    return "(You are the delegate" in user


def test_anonymous_delegate_runs_an_isolated_sub_request():
    def route(system: str, user: str) -> str:
        if is_delegate(user):
            assert "SECRET" not in user                       # nothing from the parent without scopes
            assert '"article":"Cats sleep a lot."' in user     # the call's arguments are its input
            return 'return {"summary": "cats sleep"}\n'
        if "Plan (your previous turn)" not in user:
            return ('@delegate("anonymous") $state.s = summarize(article=$input.text)\n'
                    'return $state.s.summary\n')
        raise AssertionError("one parent turn is enough")

    provider = RoutingProvider(route)
    agent = Agent(provider, tools=[SUMMARIZE])
    result = agent.run("Summarise", input={"text": "Cats sleep a lot."}, state={"secret": "SECRET"})
    assert result.ok, [t.errors for t in result.turns]
    assert result.output == "cats sleep"
    assert result.state["state"]["s"] == {"summary": "cats sleep"}
    assert sum(is_delegate(u) for _, u in provider.requests) == 1


def test_scopes_pass_only_the_named_parts_of_the_parent_context():
    def route(system: str, user: str) -> str:
        if is_delegate(user):
            assert '"article":"A long article"' in user          # scoped state
            assert "Ann" not in user                             # input not scoped
            return 'return {"summary": "short"}\n'
        return '@delegate("anonymous") @scopes(state) $state.s = summarize()\nreturn $state.s.summary\n'

    provider = RoutingProvider(route)
    result = Agent(provider, tools=[SUMMARIZE]).run("x", input={"user": "Ann"}, state={"article": "A long article"})
    assert result.ok and result.output == "short"


def test_saved_request_file_gives_the_delegate_its_own_context_and_tools(tmp_path):
    events: list = []

    @tool
    async def word_count(text: str) -> int:
        events.append("word_count")
        return len(text.split())

    @tool(name="web.search")
    async def search(query: str) -> list:
        events.append("search")
        return []

    saved = {"schema": {"type": "object", "properties": {"calls": {"type": "array"},
                                                         "output": {"type": "object"}}},
             "context": [{"type": "system", "message": "You are an expert summarizer."},
                         {"type": "tool", "tool": "Tool.word_count"}]}
    (tmp_path / "summarizer.json").write_text(json.dumps(saved))

    def route(system: str, user: str) -> str:
        if "You are an expert summarizer." in user:
            tools = system.split("\nTools:\n", 1)[1]
            assert "word_count(" in tools and "web.search(" not in tools   # only its own tools
            if "Plan (your previous turn)" not in user:
                return '$state.n = word_count(text=$input.input.article)\n'
            return 'return {"summary": "ok", "words": $state.n}\n'
        return '@delegate("summarizer") $state.s = summarize(article="one two three")\nreturn $state.s\n'

    tool_decl = ToolDecl("summarize", "", {"type": "object", "properties": {"article": {"type": "string"}}},
                         {"type": "object"})
    provider = RoutingProvider(route)
    agent = Agent(provider, tools=[tool_decl, word_count, search], delegate_dir=tmp_path)
    result = agent.run("summarise")
    assert result.ok, [t.errors for t in result.turns]
    assert result.output == {"summary": "ok", "words": 3}
    assert events == ["word_count"]


def test_yaml_request_and_named_delegates(tmp_path):
    (tmp_path / "t.yaml").write_text("context:\n  - {type: system, message: You translate.}\n"
                                     "schema: {type: string}\n")
    assert load_request(tmp_path / "t.yaml")["context"][0]["message"] == "You translate."
    assert load_request("t", tmp_path)["schema"] == {"type": "string"}
    with pytest.raises(RunError):
        load_request("missing", tmp_path)

    translate = ToolDecl("translate", "", {"type": "object", "properties": {"text": {"type": "string"}}},
                         {"type": "string"})

    def route(system: str, user: str) -> str:
        if "You translate." in user:
            return 'return "hallo"\n'
        return '@delegate("tr") $state.t = translate(text="hello")\nreturn $state.t\n'

    agent = Agent(RoutingProvider(route), tools=[translate], delegates={"tr": str(tmp_path / "t.yaml")})
    assert agent.run("x").output == "hallo"


def test_instanced_delegates_see_only_their_instance():
    translate = ToolDecl("translate", "", {"type": "object", "properties": {}}, {"type": "string"})

    def route(system: str, user: str) -> str:
        if is_delegate(user):
            if '"text":"Hello"' in user:
                assert "Bonjour" not in user
                return 'return "HELLO"\n'
            assert '"text":"Bonjour"' in user and "Hello" not in user
            return 'return "BONJOUR"\n'
        return ('@delegate("anonymous") @instance("①") @scopes(state) $state.out = translate()\n'
                '@delegate("anonymous") @instance("②") @scopes(state) $state.out = translate()\n'
                'return 1\n')

    result = Agent(RoutingProvider(route), tools=[translate]).run(
        "translate each", instances={"①": {"state": {"text": "Hello"}}, "②": {"state": {"text": "Bonjour"}}})
    assert result.ok, [t.errors for t in result.turns]
    assert result.state["state@①"] == {"text": "Hello", "out": "HELLO"}
    assert result.state["state@②"] == {"text": "Bonjour", "out": "BONJOUR"}


def test_delegate_failure_is_an_error_message_for_the_parent():
    def route(system: str, user: str) -> str:
        if is_delegate(user):
            return '$state.x = nothing_here()\n'                 # never returns: the sub-loop runs out of turns
        if "Delegate.Failed" in user:
            return 'return "gave up"\n'
        return '@delegate("anonymous") $state.s = summarize(article="x")\n'

    result = Agent(RoutingProvider(route), tools=[SUMMARIZE], max_turns=3).run("x")
    assert result.ok and result.output == "gave up"
    assert result.turns[0].errors[0]["error"]["error"] == "Delegate.Failed"


def test_delegates_nest_only_to_the_maximum_depth():
    def route(system: str, user: str) -> str:
        if "Delegate.Failed" in user and not is_delegate(user):
            return 'return "stopped"\n'
        return '@delegate("anonymous") $state.s = summarize(article="again")\nreturn $state.s\n'

    agent = Agent(RoutingProvider(route), tools=[SUMMARIZE], max_delegate_depth=1, max_turns=2)
    result = agent.run("recurse")
    assert result.output == "stopped"


def test_scoped_context_is_instance_aware():
    ctx = {"state": {"a": 1}, "state@X": {"a": 2}, "input": {"q": 1}, "data": {"d": 1}}
    assert scoped_context(["state", "input"], ctx) == {"state": {"a": 1}, "input": {"q": 1}}
    assert scoped_context(["state"], ctx, "X") == {"state": {"a": 2}}
    assert scoped_context(None, ctx) == {}


def test_a_delegated_call_of_an_activity_tool_runs_the_delegate_not_the_code():
    ran: list = []

    @tool
    async def research(topic: str) -> dict:
        ran.append(topic)
        return {"summary": "from code"}

    def route(system: str, user: str) -> str:
        if is_delegate(user):
            return 'return {"summary": "from delegate"}\n'
        return '@delegate("anonymous") $state.r = research(topic="x")\nreturn $state.r.summary\n'

    result = Agent(RoutingProvider(route), tools=[research]).run("x")
    assert result.ok and result.output == "from delegate" and ran == []
