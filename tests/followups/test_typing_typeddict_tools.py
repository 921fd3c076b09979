"""A @tool typed with `typing.TypedDict` works on Python 3.11 too (pydantic itself wants
typing_extensions.TypedDict before 3.12): the schema, the prompt and the agent's run."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.providers import ScriptedProvider
from sophon_dsl.tools import tool


class Office(TypedDict):
    city: str


class Company(TypedDict):
    """A company record."""
    name: str
    founded: int
    offices: list[Office]
    ticker: NotRequired[str | None]


@tool
def lookup(name: str, near: Office | None = None) -> Company:
    """Look a company up."""
    return {"name": name, "founded": 1999, "offices": [near or {"city": "Paris"}]}


def test_schemas_from_typing_typeddicts():
    out = lookup.output_schema
    assert out["required"] == ["name", "founded", "offices"] and "ticker" in out["properties"]
    assert out.get("description") == "A company record."
    office = lookup.input_schema["properties"]["near"]
    assert "Office" in str(office) or "city" in str(office)


def test_agent_runs_a_tool_returning_a_typing_typeddict():
    seen = []
    provider = ScriptedProvider(['$state.c = lookup(name="Acme", near={city: "Lyon"})\nreturn $state.c\n'])
    agent = Agent(provider, tools=[lookup], stdlib=False,
                  on_event=lambda e: seen.append(e.data) if e.type == "agent_turn_start" else None)
    result = agent.run("find Acme")
    assert result.status == "succeeded", result.error
    assert result.output == {"name": "Acme", "founded": 1999, "offices": [{"city": "Lyon"}]}
    assert "lookup(name: string" in seen[0][0].content and "founded: integer" in seen[0][0].content
