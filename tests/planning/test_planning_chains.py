"""tool.create_chain: a chain created, checked (as a plan of our language) and used in a later
plan of the same agent; risk = the highest of its tools; refused chains; saved chains reload."""

from __future__ import annotations

import json

import pytest

from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.model import Risk
from sophon_dsl.planning.chains import ChainBook, chain_plan_text, enable_chains
from sophon_dsl.runtime.errors import RunError
from sophon_dsl.tools import ToolRegistry, as_registry, tool

SAVED: list = []


@tool(name="web.search", risk="low", output_schema={"type": "object", "properties": {"top_url": {"type": "string"}}})
async def search(query: str) -> dict:
    return {"top_url": f"https://x/{query}"}


@tool(name="browser.navigate", risk="low", output_schema={"type": "object", "properties": {"text": {"type": "string"}}})
async def navigate(url: str) -> dict:
    return {"text": f"page at {url}"}


@tool(name="memory.write", risk="medium")
async def remember(content: str) -> str:
    SAVED.append(content)
    return f"saved {len(content)} chars"


SEED_STEPS = [
    {"toolName": "web.search", "arguments": {"query": "{{input.topic}}"}},
    {"toolName": "browser.navigate", "arguments": {"url": "{{previous_result.top_url}}"}},
    {"toolName": "memory.write", "arguments": {"content": "Notes: {{previous_result.text}} (†)"}},
]


def registry():
    return ToolRegistry(list(as_registry([search, navigate, remember], stdlib=False).values()))


def test_the_seed_chain_as_a_plan_of_our_language():
    text, inputs = chain_plan_text(SEED_STEPS, registry())
    assert text == ('$state.s1 = web.search(query=$input.topic)\n'
                    '$state.s2 = browser.navigate(url=$state.s1.top_url)\n'
                    '$state.s3 = memory.write(content="Notes: †{state.s2.text} (††)")\n'
                    'return $state.s3\n')
    assert inputs == {"topic": {"type": "string"}}


def test_created_chain_is_checked_registered_with_max_risk_and_runs():
    holder = type("Holder", (), {})()
    holder.registry = registry()
    book = ChainBook(holder)
    spec = book.create("research_and_save", SEED_STEPS, "Search, scrape, and save to memory")
    assert spec.risk is Risk.MEDIUM and spec.origin == "chain"
    assert spec.input_schema == {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}
    assert holder.registry["research_and_save"] is spec
    import asyncio

    SAVED.clear()
    assert asyncio.run(spec.func(topic="llm")) == "saved 32 chars"
    assert SAVED == ["Notes: page at https://x/llm (†)"]


@pytest.mark.parametrize("steps, message", [
    ([{"toolName": "web.serch", "arguments": {"query": "x"}}], "unknown tool 'web.serch'"),
    ([{"toolName": "web.search", "arguments": {"query": "{{previous_result.a}}"}}], "no previous step"),
    ([{"toolName": "web.search", "arguments": {"q": "x"}}], "E20"),                # the checker's own code
    ([{"toolName": "web.search", "arguments": {"query": 5}}], "E204"),            # a literal of the wrong type
    ([], "at least one step"),
])
def test_invalid_chains_are_refused_before_registration(steps, message):
    holder = type("Holder", (), {})()
    holder.registry = registry()
    with pytest.raises(RunError, match=message) as info:
        ChainBook(holder).create("bad_chain", steps)
    assert info.value.error == "Chain.Invalid"
    assert holder.registry.get("bad_chain") is None


def test_a_chain_name_may_not_shadow_a_tool():
    holder = type("Holder", (), {})()
    holder.registry = registry()
    with pytest.raises(RunError, match="already exists"):
        ChainBook(holder).create("web.search", SEED_STEPS)


def test_the_model_creates_a_chain_and_uses_it_in_a_later_turn_and_it_persists(tmp_path):
    create = ('tool.create_chain(name="research_and_save", description="Search, scrape, save", steps='
              + json.dumps(SEED_STEPS, ensure_ascii=False).replace("†", "††") + ")\n")   # a DSL string escapes it
    use = '$state.r = research_and_save(topic="agents")\nreturn $state.r\n'
    provider = ScriptedProvider(keyed=[KeyedReply("Request: ", [create, use])])
    agent = Agent(provider, tools=registry(), approve="yes")
    enable_chains(agent, path=tmp_path / "chains.json")
    SAVED.clear()
    result = agent.run("research agents and save notes")
    assert result.ok and result.output == "saved 35 chars", result.turns[-1].errors
    assert SAVED == ["Notes: page at https://x/agents (†)"]
    second_prompt = provider.calls[1]["messages"][0].content
    assert "research_and_save(topic: string)" in second_prompt and "risk medium" in second_prompt
    saved = json.loads((tmp_path / "chains.json").read_text())
    assert [c["name"] for c in saved] == ["research_and_save"]
    again = Agent(ScriptedProvider(["return 1"]), tools=registry())
    enable_chains(again, path=tmp_path / "chains.json")
    assert again.registry["research_and_save"].risk is Risk.MEDIUM


def test_chains_are_kept_in_the_durable_store(tmp_path):
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    holder = type("Holder", (), {})()
    holder.registry = registry()
    book = enable_chains(holder, store=store)
    book.create("research_and_save", SEED_STEPS, "Search, scrape, and save to memory")
    book.store.close()
    later = type("Holder", (), {})()
    later.registry = registry()
    again = enable_chains(later, store=store)       # a later run of the agent, another process
    try:
        assert later.registry["research_and_save"].risk is Risk.MEDIUM
        assert list(again.definitions) == ["research_and_save"]
    finally:
        again.store.close()
