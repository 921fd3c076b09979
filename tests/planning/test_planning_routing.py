"""Capability routing: a providers config file declares models and capabilities; a call's
model hint picks a qualifying model; none -> Routing.NoQualifiedModel."""

from __future__ import annotations

import asyncio
import json

import pytest

from sophon_dsl import loads, run
from sophon_dsl.cli import main
from sophon_dsl.llm.latent import LLMLatentExecutor
from sophon_dsl.llm.provider import Message, ProviderError, collect
from sophon_dsl.llm.providers import get_provider
from sophon_dsl.llm.providers.scripted import ScriptedProvider
from sophon_dsl.model import ToolDecl
from sophon_dsl.planning.routing import ModelRoute, RoutingProvider, required_capabilities, route_for
from sophon_dsl.runtime.errors import RunError

SUMMARY = ToolDecl("summarize", "Summarise", {"type": "object", "properties": {"text": {"type": "string"}}},
                   {"type": "string"})


def config(tmp_path, models, default=None):
    for name in models:
        (tmp_path / f"{name}.yaml").write_text(json.dumps([f"answer from {name}"]))
    data = {"models": {name: {"provider": f"scripted:{name}.yaml", "capabilities": caps}
                       for name, caps in models.items()}}
    if default:
        data["default"] = default
    path = tmp_path / "providers.yaml"
    path.write_text(json.dumps(data))
    return path


def test_hints_read_as_capabilities():
    assert required_capabilities({"requiresReasoning": True, "requiresCodeGeneration": True}) == (
        frozenset({"reasoning", "code_generation"}), None)
    assert required_capabilities({"requiresVision": False, "capabilities": ["longContext"]}) == (
        frozenset({"long_context"}), None)
    assert required_capabilities({"model": "thinker"}) == (frozenset(), "thinker")


def test_a_hint_picks_a_qualifying_model_and_plain_requests_go_to_the_default(tmp_path):
    provider = get_provider(f"config:{config(tmp_path, {'fast': ['fast'], 'thinker': ['reasoning', 'long_context']})}")
    assert isinstance(provider, RoutingProvider) and provider.default == "fast"
    plan = loads('$state.a = summarize(text="x")\n'
                 '@model(requiresReasoning=true) $state.b = summarize(text="y")\n')
    result = run(plan, [SUMMARY], executor=LLMLatentExecutor(provider))
    assert result.status == "succeeded", result.calls
    assert result.state["state"] == {"a": "answer from fast", "b": "answer from thinker"}
    assert asyncio.run(collect(provider, [Message("user", "hi")])) == "answer from fast"


def test_no_qualifying_model_fails_the_call_with_a_named_error(tmp_path):
    provider = get_provider(f"config:{config(tmp_path, {'fast': ['fast']})}")
    plan = loads('@model(requiresVision=true) $state.b = summarize(text="y")\n')
    result = run(plan, [SUMMARY], executor=LLMLatentExecutor(provider))
    err = result.calls[0].error.to_json()
    assert result.status == "failed" and err["error"] == "Routing.NoQualifiedModel"
    assert "no declared model has vision" in err["cause"] and "fast [fast]" in err["cause"]


def test_a_named_model_and_a_plain_provider_that_declares_capabilities():
    a, b = ScriptedProvider(["a"]), ScriptedProvider(["b"])
    router = RoutingProvider([ModelRoute("a", "x", frozenset({"fast"})), ModelRoute("b", "y", frozenset())],
                             providers={"a": a, "b": b})
    assert router.route({"model": "b"})[2] == "b"
    with pytest.raises(RunError, match="lacks fast"):
        router.route({"model": "b", "requiresFast": True})
    plain = ScriptedProvider(["p"])
    with pytest.raises(RunError, match="lacks reasoning"):   # declares nothing: no longer taken as it is
        route_for(plain, {"requiresReasoning": True}, "m")
    plain.capabilities = ["fast"]
    with pytest.raises(RunError, match="Routing.NoQualifiedModel|lacks reasoning"):
        route_for(plain, {"requiresReasoning": True}, "m")
    plain.capabilities = ["reasoning"]
    assert route_for(plain, {"requiresReasoning": True}, "m") == (plain, "m")


@pytest.mark.parametrize("text, message", [
    ("models: {}", "needs 'models'"),
    ("models: {a: {capabilities: []}}", "needs a 'provider'"),
    ("models: {a: {provider: 'openai,anthropic'}}", "one provider per model"),
    ("default: z\nmodels: {a: {provider: 'openai'}}", "default 'z' is not a declared model"),
    ("models: [", "not valid YAML"),
])
def test_bad_config_files_are_provider_errors_and_cli_usage_errors(tmp_path, capsys, text, message):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ProviderError, match=message):
        get_provider(f"config:{path}")
    assert main(["agent", "x", "--provider", f"config:{path}"]) == 2
    err = capsys.readouterr().err
    assert "--provider config:" in err and ("YAML" in err if "YAML" in message else message.split("'")[0] in err)


def test_fast_tier_requests_go_to_a_fast_model_when_one_is_declared(tmp_path):
    from sophon_dsl.llm.agent import Agent

    (tmp_path / "fast.yaml").write_text(json.dumps({"keyed": [{"match": "COMPLEX or SIMPLE", "reply": "SIMPLE"}]}))
    (tmp_path / "big.yaml").write_text(json.dumps(["return 7"]))
    path = tmp_path / "providers.yaml"
    path.write_text(json.dumps({"default": "big", "models": {
        "big": {"provider": "scripted:big.yaml", "capabilities": ["reasoning"]},
        "fast": {"provider": "scripted:fast.yaml", "capabilities": ["fast"]}}}))
    provider = get_provider(f"config:{path}")
    result = Agent(provider, tools=[], stdlib=False, planning="llm").run("look it up")
    assert result.ok and result.output == 7
    assert result.to_json()["planning"]["decided_by"] == "llm"
    assert len(provider.provider("fast").calls) == 1 and len(provider.provider("big").calls) == 1
