"""Model hints with any provider (issue 26 item 4): every provider says what its model can do
(declared in its spec, else the defaults for known model names), and a hinted call that no
configured model qualifies for fails with Routing.NoQualifiedModel instead of running anyway."""

from __future__ import annotations

import json

import pytest

from sophon_dsl import loads, run
from sophon_dsl.cli import main
from sophon_dsl.llm.capabilities import model_capabilities, parse_declared, split_specs
from sophon_dsl.llm.latent import LLMLatentExecutor
from sophon_dsl.llm.provider import ProviderError
from sophon_dsl.llm.providers import AnthropicProvider, FailoverProvider, OpenAIProvider, get_provider
from sophon_dsl.llm.providers.scripted import ScriptedProvider
from sophon_dsl.model import ToolDecl
from sophon_dsl.planning.budget import Budget, BudgetedProvider
from sophon_dsl.planning.routing import load_routes, route_for
from sophon_dsl.runtime.errors import RunError

SUMMARY = ToolDecl("summarize", "Summarise", {"type": "object", "properties": {"text": {"type": "string"}}},
                   {"type": "string"})
HINTED = '@model(requiresReasoning=true) $state.b = summarize(text="y")\n'


def script(tmp_path, name, replies, **extra):
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps({"turns": replies, **extra} if extra else replies))
    return path


def test_known_model_names_have_default_capabilities():
    assert "reasoning" in model_capabilities("o3-mini")
    assert "reasoning" in model_capabilities("claude-sonnet-4-5")
    assert "reasoning" in model_capabilities("openrouter/anthropic/claude-opus-4-1")
    assert "reasoning" not in model_capabilities("gpt-4o-mini") and "fast" in model_capabilities("gpt-4o-mini")
    assert "reasoning" in model_capabilities("o1-mini") and "vision" not in model_capabilities("o1-mini")
    assert model_capabilities("my-local-model") == frozenset() == model_capabilities(None)


def test_sdk_providers_answer_for_the_model_a_request_goes_to():
    assert "reasoning" not in OpenAIProvider("gpt-4o").capabilities_for(None)
    assert "reasoning" in OpenAIProvider("gpt-4o").capabilities_for("o3")          # --model / the hint's model
    assert "reasoning" in AnthropicProvider("claude-opus-4-1").capabilities_for(None)
    declared = get_provider("openai:qwen3-32b[reasoning, code_generation]")
    assert isinstance(declared, OpenAIProvider) and declared.model == "qwen3-32b"
    assert declared.capabilities_for(None) == {"reasoning", "code_generation"}
    assert get_provider("openai:o3[]").capabilities_for(None) == frozenset()       # [] declares none


def test_spec_syntax():
    assert parse_declared("openai:m[reasoning,longContext]") == ("openai:m", frozenset({"reasoning", "long_context"}))
    assert parse_declared("openai:m") == ("openai:m", None)
    assert split_specs("openai:a[reasoning,vision], anthropic") == ["openai:a[reasoning,vision]", "anthropic"]
    with pytest.raises(ProviderError, match="not a capability name"):
        get_provider("openai:m[reason-ing]")
    with pytest.raises(ProviderError, match="per model, in the file"):
        get_provider("config:x.yaml[reasoning]")


def test_a_plain_provider_that_does_not_declare_the_capability_fails_the_call_before_asking_it(tmp_path):
    provider = ScriptedProvider(["should not be asked"])
    result = run(loads(HINTED), [SUMMARY], executor=LLMLatentExecutor(provider))
    err = result.calls[0].error.to_json()
    assert result.status == "failed" and err["error"] == "Routing.NoQualifiedModel"
    assert "lacks reasoning" in err["cause"] and "openai:MODEL[reasoning]" in err["cause"]
    assert provider.calls == []


def test_a_declared_capability_lets_the_call_run(tmp_path):
    in_spec = get_provider(f"scripted:{script(tmp_path, 'a', ['thought'])}[reasoning]")
    in_file = get_provider(f"scripted:{script(tmp_path, 'b', ['thought'], capabilities=['reasoning'])}")
    for provider in (in_spec, in_file):
        result = run(loads(HINTED), [SUMMARY], executor=LLMLatentExecutor(provider))
        assert result.status == "succeeded", result.calls
        assert result.state["state"] == {"b": "thought"}


def test_failover_keeps_only_the_qualified_providers_for_a_hinted_call(tmp_path):
    fast = script(tmp_path, "fast", ["from fast"])
    thinker = script(tmp_path, "thinker", ["from thinker"])
    provider = get_provider(f"scripted:{fast}[fast],scripted:{thinker}[reasoning]")
    assert isinstance(provider, FailoverProvider)
    plan = loads('$state.a = summarize(text="x")\n' + HINTED)
    result = run(plan, [SUMMARY], executor=LLMLatentExecutor(provider))
    assert result.state["state"] == {"a": "from fast", "b": "from thinker"}
    only_fast = get_provider(f"scripted:{fast}[fast],scripted:{fast}[]")
    with pytest.raises(RunError, match="no provider of .* has reasoning"):
        route_for(only_fast, {"requiresReasoning": True}, None)


def test_the_budget_wrapper_routes_what_it_wraps(tmp_path):
    (tmp_path / "t.yaml").write_text(json.dumps(["deep"]))
    (tmp_path / "f.yaml").write_text(json.dumps(["quick"]))
    config = tmp_path / "models.yaml"
    config.write_text(json.dumps({"default": "f", "models": {
        "f": {"provider": "scripted:f.yaml", "capabilities": ["fast"]},
        "t": {"provider": "scripted:t.yaml[reasoning]"}}}))    # no capabilities key: the spec's
    router = load_routes(config, build=get_provider)
    budget = Budget([])
    wrapped = BudgetedProvider(router, budget)
    chosen, _ = route_for(wrapped, {"requiresReasoning": True}, None)
    assert isinstance(chosen, BudgetedProvider) and chosen.budget is budget
    assert chosen.inner is router.provider("t")
    result = run(loads(HINTED), [SUMMARY], executor=LLMLatentExecutor(wrapped))
    assert result.state["state"] == {"b": "deep"}


def test_cli_run_fails_a_hinted_call_on_an_undeclared_provider_and_runs_it_on_a_declared_one(tmp_path, capsys):
    plan = tmp_path / "plan.sophon"
    plan.write_text('tool summarize = {"description": "Summarise", "input": {"type": "object", "properties": '
                    '{"text": {"type": "string"}}}, "output": {"type": "string"}, "latent": true}\n' + HINTED)
    replies = script(tmp_path, "r", ["thought"])
    base = ["run", str(plan), "--no-stdlib", "--json", "--no-store"]
    assert main([*base, "--provider", f"scripted:{replies}"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["calls"][0]["error"]["error"] == "Routing.NoQualifiedModel"
    assert main([*base, "--provider", f"scripted:{replies}[reasoning]"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["state"] == {"b": "thought"}
    assert main([*base, "--provider", f"scripted:{replies}[bad-name]"]) == 2
    assert "not a capability name" in capsys.readouterr().err


def test_a_delegate_call_with_a_hint_routes_its_sub_agent_or_fails(tmp_path):
    from sophon_dsl.llm.agent import Agent

    summarize = ToolDecl("summarize", "Summarise", {"type": "object", "properties": {"text": {"type": "string"}}},
                         {"type": "string"})
    parent_reply = ('@delegate("anonymous") @model(requiresReasoning=true) $state.s = summarize(text="x")\n'
                    'return $state.s\n')
    keyed = {"keyed": [{"match": "You are the delegate", "reply": 'return "deep"'},
                       {"match": "Request: ", "reply": parent_reply}]}
    plain = tmp_path / "keyed.yaml"
    plain.write_text(json.dumps(keyed))
    refused = Agent(get_provider(f"scripted:{plain}"), tools=[summarize], stdlib=False, max_turns=1).run("go")
    err = refused.turns[0].calls[0]["error"]
    assert err["error"] == "Routing.NoQualifiedModel" and "lacks reasoning" in err["cause"]
    routed = Agent(get_provider(f"scripted:{plain}[reasoning]"), tools=[summarize], stdlib=False).run("go")
    assert routed.ok and routed.output == "deep"
