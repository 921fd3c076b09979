"""Issue 10 item 8: a provider failure is reported as itself (class, status, message, retryable)
in the agent's result, its JSON and its text output, never as "the reply was empty"; a missing
API key is found before the first request (exit 2 from the CLI, ProviderError from the API).

Against the project's local OpenAI-compatible SSE server (tests/llm/sse_server.py), through the
official SDK: no mocks.
"""

from __future__ import annotations

import json
import socket

import pytest

from sophon_dsl import cli
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.provider import ProviderError

pytest.importorskip("openai")
sse = pytest.importorskip("sse_server")
providers = pytest.importorskip("sophon_dsl.llm.providers")

_KEYS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
         "ANTHROPIC_AUTH_TOKEN")


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch):
    for var in _KEYS:
        monkeypatch.delenv(var, raising=False)


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _codes(turn) -> list[str]:
    return [e["error"].get("code") for e in turn.errors]


def test_server_error_mid_stream_is_the_runs_provider_error():
    script = [sse.Reply('$state.a = web.search(query="x")\n$state.b = web.search(',
                        chunk_chars=8, fail_after=2, fail_with=sse.ServerError(500, "the GPU caught fire"))]
    with sse.ScriptedLLMServer(script) as srv:
        provider = providers.OpenAIProvider("gpt-test", base_url=srv.openai_base_url, api_key="sk-test")
        result = Agent(provider, tools=[], stdlib=False).run("x")
    assert result.status == "failed"
    err = result.provider_error
    assert err is not None and err["status"] == 500 and err["retryable"] is True
    assert "the GPU caught fire" in err["message"] and err["class"] == "ProviderError"
    assert "Reply.Empty" not in _codes(result.turns[0])
    assert "Provider.Error" in _codes(result.turns[0])
    data = result.to_json()
    assert data["provider_error"] == err and data["turns"][0]["provider_error"] == err
    assert "the GPU caught fire" in data["error"]


def test_refused_connection_is_reported_with_its_cause():
    provider = providers.OpenAIProvider("gpt-test", base_url=f"http://127.0.0.1:{_closed_port()}/v1",
                                        api_key="sk-test", timeout=5)
    result = Agent(provider, tools=[], stdlib=False).run("x")
    assert result.status == "failed"
    err = result.provider_error
    assert err["status"] is None and err["retryable"] is True
    assert err["cause"] == "APIConnectionError"
    assert _codes(result.turns[0]) == ["Provider.Error"]


def test_cli_json_and_text_say_the_provider_error(monkeypatch, capsys):
    with sse.ScriptedLLMServer([sse.ServerError(503, "maintenance window")] * 2) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.openai_base_url)
        code = cli.main(["agent", "hi", "--provider", "openai:gpt-test", "--no-stdlib", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code == 1
        assert out["provider_error"]["status"] == 503 and out["provider_error"]["retryable"] is True
        assert "maintenance window" in out["provider_error"]["message"]
        assert out["turns"][0]["errors"][0]["error"]["code"] == "Provider.Error"

        code = cli.main(["agent", "hi", "--provider", "openai:gpt-test", "--no-stdlib"])
        err = capsys.readouterr().err
        assert code == 1
        assert "Reply.Empty" not in err and "error[Provider.Error]" in err and "maintenance window" in err


@pytest.mark.parametrize("spec, variable", [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY"),
                                            ("openai,anthropic", "OPENAI_API_KEY")])
def test_cli_missing_api_key_is_a_usage_error(spec, variable, capsys):
    pytest.importorskip(spec.split(",")[-1])
    code = cli.main(["agent", "hi", "--provider", spec, "--no-stdlib", "--json"])
    captured = capsys.readouterr()
    assert code == 2
    assert variable in captured.err and captured.out == ""
    assert "Traceback" not in captured.err


def test_api_missing_key_raises_before_any_request():
    with sse.ScriptedLLMServer(['return 1\n']) as srv:
        latent = providers.OpenAIProvider("gpt-test", base_url=srv.openai_base_url, api_key="sk-test")
        agent = Agent(providers.OpenAIProvider("gpt-test"), tools=[], stdlib=False, latent_provider=latent)
        with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
            agent.run("x")
        with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
            Agent(latent, tools=[], stdlib=False, latent_provider=providers.OpenAIProvider("g")).run("x")
        assert srv.requests == []


def test_local_server_needs_no_key():
    """The exemption stays: a local base URL without a key is ready (a placeholder key is sent)."""
    with sse.ScriptedLLMServer(['return 1\n']) as srv:
        result = Agent(providers.OpenAIProvider("gpt-test", base_url=srv.openai_base_url),
                       tools=[], stdlib=False).run("x")
    assert result.ok and result.output == 1 and result.provider_error is None
    assert "provider_error" not in result.to_json() and "error" not in result.to_json()


@pytest.mark.parametrize("text", [
    '$state.a = look(q="x")\n$state.b = look(q="cut in the middle of a str',
    '[{"_tool": "look", "q": "x", "_outputPath": "†state.a"}, {"_tool": "look", "q": "cut in the mid',
])
def test_a_reply_cut_by_the_provider_keeps_its_whole_calls_and_reports_no_syntax_error(text):
    """The provider fails mid-statement: the statement it cut is not the model's syntax
    error (no E001/E002 beside Provider.Error); the calls that arrived whole ran."""
    from sophon_dsl import tool

    @tool
    async def look(q: str) -> str:
        return q.upper()

    chunks = 8
    script = [sse.Reply(text, chunk_chars=chunks, fail_after=len(text) // chunks,
                        fail_with=sse.ServerError(500, "the GPU caught fire"))]
    with sse.ScriptedLLMServer(script) as srv:
        provider = providers.OpenAIProvider("gpt-test", base_url=srv.openai_base_url, api_key="sk-test")
        result = Agent(provider, tools=[look], stdlib=False).run("x")
    turn = result.turns[0]
    assert result.status == "failed" and result.provider_error["status"] == 500
    assert _codes(turn) == ["Provider.Error"] and not turn.diagnostics
    assert [c["status"] for c in turn.calls] == ["succeeded"]
    assert turn.state_after["state"] == {"a": "X"}
