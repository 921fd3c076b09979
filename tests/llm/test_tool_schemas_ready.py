"""A streamed turn derives its tools' JSON Schemas before the first call arrives.

A ``@tool`` function's schemas are derived lazily (pydantic is slow to import and to run:
100-500 ms the first time).  That must not happen in the dispatch path of a streamed
turn's first call: the turn prepares its registry once when it starts."""

from __future__ import annotations

import asyncio

import sophon_dsl.tools as tools_module
from sophon_dsl.llm.stream import StreamTurn
from sophon_dsl.tools import ToolRegistry, tool


def test_schemas_are_derived_when_the_turn_starts_not_when_the_call_arrives(monkeypatch):
    events: list[str] = []
    derive = tools_module.schemas_from_function

    def recording(fn):
        events.append(f"derive {fn.__name__}")
        return derive(fn)

    monkeypatch.setattr(tools_module, "schemas_from_function", recording)

    @tool
    def search(query: str, limit: int = 3) -> list[str]:
        return [query] * limit

    @tool
    def unused(x: int) -> int:
        return x

    registry = ToolRegistry([search, unused])
    assert events == []  # still lazy: building a registry derives nothing

    async def turn() -> str:
        t = StreamTurn(registry)
        events.append("turn started")
        t.feed('$state.hits = search(query="a", limit=2)\n')
        events.append("call fed")
        return (await t.finish()).status

    assert asyncio.run(turn()) == "succeeded"
    assert events == ["derive search", "derive unused", "turn started", "call fed"]
    assert asyncio.run(turn()) == "succeeded"  # once per registry (and per tool)
    assert events[4:] == ["turn started", "call fed"]


def test_a_tool_whose_hints_have_no_schema_does_not_stop_the_turn_from_starting():
    class Opaque:
        pass

    @tool
    def odd(x: Opaque) -> int:
        return 1

    @tool
    def fine(x: int) -> int:
        return x

    async def turn() -> str:
        t = StreamTurn(ToolRegistry([odd, fine]))
        t.feed("$state.y = fine(x=2)\n")
        return (await t.finish()).status

    assert asyncio.run(turn()) == "succeeded"
