"""Lazy mode keeps a latent call's branching output path; the model picks the branch when the
call runs (issue 10 item 13, seed 004 "Lazy Execution")."""

from __future__ import annotations

import json


import sophon_dsl
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.latent import LLMLatentExecutor
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.tools import tool

WEATHER = {"description": "Is it sunny in the city today?",
           "input": {"type": "object", "properties": {"city": {"type": "string"}}},
           "output": {"type": "object", "properties": {"forecast": {"type": "string"}}, "required": ["forecast"]}}
PLAN = ("mode = lazy\n"
        f"tool isItSunny = {json.dumps(WEATHER)}\n"
        '†state.sunny || †state.rainy = isItSunny(city="Paris")\n'
        "park(when=†state.sunny)\n"
        "movie(when=†state.rainy)\n")


def _tools(seen: list):
    @tool
    def park(when: dict) -> None:
        seen.append(("park", when))

    @tool
    def movie(when: dict) -> None:
        seen.append(("movie", when))

    return [park, movie]


def _latent(reply: str) -> ScriptedProvider:
    return ScriptedProvider(keyed=[KeyedReply(r"Tool: isItSunny", reply)])


def test_the_latent_executor_routes_the_branch_the_model_picks():
    seen: list = []
    provider = _latent('{"branch": "†state.rainy", "result": {"forecast": "rain"}}')
    result = sophon_dsl.run(PLAN, tools=_tools(seen), executor=LLMLatentExecutor(provider))
    assert result.status == "succeeded", result.to_json()
    assert result.state["state"] == {"rainy": {"forecast": "rain"}}
    assert seen == [("movie", {"forecast": "rain"})]
    assert {c.id: c.status for c in result.calls} == {"c1": "succeeded", "c2": "skipped", "c3": "succeeded"}
    # the model was offered the alternatives, as a structured-output enum
    asked = provider.calls[0]
    assert "†state.sunny || †state.rainy" in asked["messages"][-1].content
    assert asked["json_schema"]["properties"]["branch"]["enum"] == ["†state.sunny", "†state.rainy"]


def test_a_branch_that_is_no_alternative_fails_the_call():
    provider = _latent('{"branch": "†state.cloudy", "result": {"forecast": "grey"}}')
    result = sophon_dsl.run(PLAN, tools=_tools([]), executor=LLMLatentExecutor(provider))
    assert result.calls[0].status == "failed"
    # the catch alternative receives the error, as for any failing branching call
    assert result.state["state"]["rainy"]["error"] == "Tool.OutputInvalid"


def test_lazy_agent_defers_the_choice_to_execution():
    seen: list = []
    reply = ('$state.sunny || $state.rainy = isItSunny(city="Paris")\n'
             "park(when=$state.sunny)\nmovie(when=$state.rainy)\nreturn $state.sunny || $state.rainy\n")
    provider = ScriptedProvider(keyed=[
        KeyedReply(r"Tool: isItSunny", '{"branch": "†state.rainy", "result": {"forecast": "rain"}}'),
        KeyedReply(r"[\s\S]", reply),
    ])
    spec = sophon_dsl.tools.ToolSpec("isItSunny", WEATHER["description"], WEATHER["input"], WEATHER["output"])
    agent = Agent(provider=provider, tools=[spec, *_tools(seen)], mode="lazy", max_turns=1, approve="yes")
    result = agent.run("What should I do in Paris today?")
    assert result.status == "succeeded", result.to_json()
    assert result.output == {"forecast": "rain"}
    assert result.state["state"] == {"rainy": {"forecast": "rain"}}
    assert seen == [("movie", {"forecast": "rain"})]
