"""Providers driven through the real openai / anthropic SDK clients against a local SSE server
(127.0.0.1 only), plus the scripted provider, failover and provider specs."""

from __future__ import annotations

import asyncio
import json
import random
import sys

import pytest

from sophon_dsl.llm.provider import Message, Provider, ProviderError, collect
from sophon_dsl.llm.providers import (
    FailoverProvider,
    ScriptedProvider,
    StreamInterruptedError,
    backoff_delay,
    get_provider,
    is_retryable_status,
    to_provider_error,
)
from sse_server import Reply, ScriptedLLMServer, ServerError

USER = [Message("user", "hello")]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS",
                "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
                "ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS", "SOPHON_OPENAI_MODEL",
                "SOPHON_ANTHROPIC_MODEL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def need_openai():
    pytest.importorskip("openai")


@pytest.fixture
def need_anthropic():
    pytest.importorskip("anthropic")


def deltas(provider, messages=USER, **kw) -> list[str]:
    async def go():
        return [d async for d in provider.stream(messages, **kw)]
    return asyncio.run(go())


async def attempt(provider, messages=USER, **kw) -> tuple[list[str], ProviderError | None]:
    """The deltas streamed before the call ended, and the ProviderError it ended with (if any)."""
    got: list[str] = []
    try:
        async for d in provider.stream(messages, **kw):
            got.append(d)
    except ProviderError as err:
        return got, err
    return got, None


def attempts(provider, n: int, **kw) -> list[tuple[list[str], ProviderError | None]]:
    """``n`` calls in one event loop (so the SDK client is made once)."""
    async def go():
        return [await attempt(provider, **kw) for _ in range(n)]
    return asyncio.run(go())


def openai_at(srv, **kw):
    from sophon_dsl.llm.providers import OpenAIProvider
    return OpenAIProvider(kw.pop("model", "gpt-test"), base_url=srv.openai_base_url,
                          api_key="sk-test", **kw)


def anthropic_at(srv, **kw):
    from sophon_dsl.llm.providers import AnthropicProvider
    return AnthropicProvider(kw.pop("model", "claude-test"), base_url=srv.anthropic_base_url,
                             api_key="sk-ant-test", **kw)


class Sleeps:
    """An injectable sleep that records the delays instead of waiting."""

    def __init__(self):
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


# --------------------------------------------------------------------------- OpenAI


def test_openai_streams_text_in_pieces(need_openai):
    text = "The quick brown fox jumps over the lazy dog"
    with ScriptedLLMServer(replies=[text], chunk_chars=5) as srv:
        provider = openai_at(srv)
        assert isinstance(provider, Provider)
        got = deltas(provider, [Message("system", "be brief"), Message("user", "hi")])
    assert "".join(got) == text
    assert len(got) == 9 and all(len(d) <= 5 for d in got)
    (req,) = srv.requests
    assert req.api == "openai" and req.path == "/v1/chat/completions"
    assert req.json["stream"] is True and req.json["model"] == "gpt-test"
    assert req.json["messages"] == [{"role": "system", "content": "be brief"},
                                    {"role": "user", "content": "hi"}]
    assert req.headers["authorization"] == "Bearer sk-test"


def test_openai_json_schema_is_sent_as_strict_response_format(need_openai):
    schema = {"title": "Plan solution", "type": "object",
              "properties": {"output": {"type": "integer"}}, "required": ["output"],
              "additionalProperties": False}
    with ScriptedLLMServer(replies=['{"output": 42}']) as srv:
        out = asyncio.run(collect(openai_at(srv), USER, json_schema=schema, temperature=0.0,
                                  max_tokens=64, model="gpt-other"))
    assert json.loads(out) == {"output": 42}
    body = srv.requests[0].json
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "Plan_solution", "schema": schema, "strict": True}}
    assert body["temperature"] == 0.0 and body["model"] == "gpt-other"
    assert body["max_tokens"] == 64  # compatible servers get max_tokens


def test_openai_honours_env_base_url_and_key(need_openai, monkeypatch):
    with ScriptedLLMServer(replies=["from env"]) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        provider = get_provider("openai", model="local-model")
        assert "".join(deltas(provider)) == "from env"
    assert srv.requests[0].headers["authorization"] == "Bearer sk-from-env"
    assert srv.requests[0].json["model"] == "local-model"


def test_openai_local_server_needs_no_key(need_openai, monkeypatch):
    with ScriptedLLMServer(replies=["keyless"]) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.openai_base_url)
        assert "".join(deltas(get_provider("openai"))) == "keyless"


def test_openai_without_key_or_base_url_is_a_clear_error(need_openai):
    with pytest.raises(ProviderError, match="OPENAI_API_KEY") as info:
        deltas(get_provider("openai"))
    assert not info.value.retryable


def test_openai_http_errors_map_to_provider_errors(need_openai):
    with ScriptedLLMServer(replies=[ServerError(429, "slow down"), ServerError(400, "bad"),
                                    ServerError(503)]) as srv:
        results = attempts(openai_at(srv), 3)
    for (got, err), status, retryable in zip(results, (429, 400, 503), (True, False, True)):
        assert got == [] and (err.status, err.retryable) == (status, retryable)
        assert err.provider == "openai" and err.__cause__ is not None


def test_openai_mid_stream_error_and_truncation(need_openai):
    replies = [Reply("abcdefgh", chunk_chars=2, fail_after=2,
                     fail_with=ServerError(500, "boom")),
               Reply("abcdefgh", chunk_chars=2, fail_after=2, drop=True)]
    with ScriptedLLMServer(replies=replies) as srv:
        results = attempts(openai_at(srv), 2)
    for got, err in results:
        assert got == ["ab", "cd"] and err is not None and err.retryable
    assert results[0][1].status == 500


def test_consumer_may_stop_early(need_openai):
    with ScriptedLLMServer(replies=["x" * 200, "second"], chunk_chars=1) as srv:
        provider = openai_at(srv)

        async def go():
            agen = provider.stream(USER)
            first = await agen.__anext__()
            await agen.aclose()
            return first, await collect(provider, USER)

        assert asyncio.run(go()) == ("x", "second")


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_streams_text_in_pieces(need_anthropic):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    with ScriptedLLMServer(replies=["Bonjour tout le monde"], chunk_chars=4) as srv:
        msgs = [Message("system", "rules"), Message("user", "one"), Message("user", "two"),
                Message("assistant", "ok"), Message("user", "three")]
        got = deltas(anthropic_at(srv), msgs, json_schema=schema, temperature=0.5)
    assert "".join(got) == "Bonjour tout le monde" and len(got) == 6
    (req,) = srv.requests
    assert req.api == "anthropic" and req.path == "/v1/messages"
    body = req.json
    assert body["stream"] is True and body["model"] == "claude-test"
    assert body["system"] == "rules" and body["max_tokens"] == 4096
    assert body["messages"] == [{"role": "user", "content": "one\n\ntwo"},
                                {"role": "assistant", "content": "ok"},
                                {"role": "user", "content": "three"}]
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    from anthropic.resources.messages.messages import AsyncMessages
    import inspect
    if "temperature" in inspect.signature(AsyncMessages.create).parameters:
        assert body["temperature"] == 0.5
    else:  # recent SDKs dropped sampling parameters from the Messages API
        assert "temperature" not in body


def test_anthropic_errors(need_anthropic):
    replies = [ServerError(529, "Overloaded"), ServerError(401),
               Reply("abcdef", chunk_chars=2, fail_after=1),  # mid-stream overloaded_error
               Reply("abcdef", chunk_chars=2, fail_after=1, drop=True)]
    with ScriptedLLMServer(replies=replies) as srv:
        results = attempts(anthropic_at(srv), 4)
    expected = [([], 529, True), ([], 401, False), (["ab"], 529, True), (["ab"], None, True)]
    assert [(got, err.status, err.retryable) for got, err in results] == expected


def test_anthropic_env(need_anthropic, monkeypatch):
    with ScriptedLLMServer(replies=["via env"]) as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
        assert "".join(deltas(get_provider("anthropic:claude-x"))) == "via env"
    assert srv.requests[0].json["model"] == "claude-x"
    assert "sk-ant-env" in json.dumps(srv.requests[0].headers)


# --------------------------------------------------------------------------- failover


def within_jitter(delay: float, attempt: int) -> bool:
    raw = min(8.0, 0.25 * 2 ** attempt)
    return raw * 0.8 - 1e-9 <= delay <= min(8.0, raw * 1.2) + 1e-9


def test_failover_backs_off_then_moves_to_the_next_provider(need_openai):
    sleeps = Sleeps()
    with ScriptedLLMServer(errors={i: 429 for i in range(10)}) as bad, \
            ScriptedLLMServer(replies=["from the backup"]) as good:
        provider = FailoverProvider([openai_at(bad), openai_at(good)], max_retries=3,
                                    sleep=sleeps, random=random.Random(5).random)
        assert "".join(deltas(provider)) == "from the backup"
    assert len(bad.requests) == 4 and len(good.requests) == 1
    assert [r.status for r in bad.requests] == [429] * 4
    assert len(sleeps.delays) == 3
    assert all(within_jitter(d, n) for n, d in enumerate(sleeps.delays)), sleeps.delays
    assert [name for name, _, _ in provider.attempts] == ["openai"] * 5
    assert provider.attempts[-1][1] is None


def test_failover_jitter_bounds_at_the_extremes(need_openai):
    with ScriptedLLMServer(replies=[ServerError(529), ServerError(500), "ok"], cycle=True) as srv:
        server = openai_at(srv)

        async def go():
            for rnd, factor in ((lambda: 0.0, 0.8), (lambda: 0.999999, 1.2)):
                sleeps = Sleeps()
                provider = FailoverProvider([server], sleep=sleeps, random=rnd)
                assert await collect(provider, USER) == "ok"
                assert sleeps.delays == pytest.approx([0.25 * factor, 0.5 * factor], rel=1e-4)

        asyncio.run(go())
    assert len(srv.requests) == 6


def test_failover_across_vendors(need_openai, need_anthropic):
    sleeps = Sleeps()
    with ScriptedLLMServer(replies=[ServerError(529)] * 2) as claude, \
            ScriptedLLMServer(replies=["gpt answers"]) as gpt:
        provider = FailoverProvider([anthropic_at(claude), openai_at(gpt)], max_retries=1,
                                    sleep=sleeps)
        assert asyncio.run(collect(provider, USER)) == "gpt answers"
    assert len(claude.requests) == 2 and len(sleeps.delays) == 1
    assert within_jitter(sleeps.delays[0], 0)


def test_failover_non_retryable_error_surfaces_at_once(need_openai):
    sleeps = Sleeps()
    with ScriptedLLMServer(replies=[ServerError(400, "bad request")]) as bad, \
            ScriptedLLMServer(replies=["never"]) as good:
        provider = FailoverProvider([openai_at(bad), openai_at(good)], sleep=sleeps)
        with pytest.raises(ProviderError) as info:
            deltas(provider)
    assert info.value.status == 400 and not info.value.retryable
    assert sleeps.delays == [] and len(bad.requests) == 1 and good.requests == []


def test_failover_never_retries_after_text_was_streamed(need_openai):
    sleeps = Sleeps()
    with ScriptedLLMServer(replies=[Reply("partial answer", chunk_chars=4, fail_after=2)]) as bad, \
            ScriptedLLMServer(replies=["never"]) as good:
        provider = FailoverProvider([openai_at(bad), openai_at(good)], sleep=sleeps)
        got: list[str] = []

        async def go():
            async for d in provider.stream(USER):
                got.append(d)

        with pytest.raises(StreamInterruptedError) as info:
            asyncio.run(go())
    assert "".join(got) == "partial "
    assert info.value.streamed_chars == 8 and not info.value.retryable
    assert info.value.cause.retryable
    assert sleeps.delays == [] and len(bad.requests) == 1 and good.requests == []


def test_failover_exhausted_raises_retryable_error():
    sleeps = Sleeps()
    a = ScriptedProvider([{"error": {"status": 429}}], name="a")
    b = ScriptedProvider([{"error": {"status": 529, "message": "overloaded"}}], name="b")
    provider = FailoverProvider([a, b], max_retries=2, sleep=sleeps, random=lambda: 0.5)
    with pytest.raises(ProviderError, match="all providers failed") as info:
        deltas(provider)
    assert info.value.retryable and info.value.status == 529
    assert len(a.calls) == 3 and len(b.calls) == 3
    assert sleeps.delays == [0.25, 0.5, 0.25, 0.5]


def test_backoff_delay_cap_and_jitter():
    assert backoff_delay(0, rand=lambda: 0.5) == 0.25
    assert backoff_delay(3, rand=lambda: 0.5) == 2.0
    assert backoff_delay(5, rand=lambda: 0.5) == 8.0
    assert backoff_delay(12, rand=lambda: 0.999) <= 8.0
    assert backoff_delay(12, rand=lambda: 0.0) == pytest.approx(6.4)
    rng = random.Random(1)
    for attempt in range(8):
        for _ in range(50):
            assert within_jitter(backoff_delay(attempt, rand=rng.random), attempt)


def test_error_mapping_is_duck_typed():
    class APIConnectionError(Exception):
        pass

    class Status(Exception):
        def __init__(self, status, body=None):
            super().__init__("x")
            self.status_code, self.body = status, body

    assert to_provider_error(APIConnectionError("down"), "p").retryable
    assert to_provider_error(Status(529)).status == 529
    mid = to_provider_error(Status(200, {"type": "error", "error": {"type": "overloaded_error"}}))
    assert (mid.status, mid.retryable) == (529, True)
    assert not to_provider_error(ValueError("bug")).retryable
    assert [is_retryable_status(s) for s in (400, 401, 408, 429, 500, 529, None)] == \
        [False, False, True, True, True, True, False]


# --------------------------------------------------------------------------- scripted


SCRIPT = """\
- "first reply"
- reply: '{"calls": [], "output": 1}'
  chunk_size: 3
  tokens_per_second: 50
- error: {status: 429, message: rate limited}
- reply: "half"
  error: {status: 500}
"""


def test_scripted_provider_from_yaml(tmp_path):
    path = tmp_path / "turns.yaml"
    path.write_text(SCRIPT)
    sleeps = Sleeps()
    provider = ScriptedProvider(path, chunk_size=4, sleep=sleeps)
    assert isinstance(provider, Provider)
    assert deltas(provider) == ["firs", "t re", "ply"]
    assert sleeps.delays == []
    got = deltas(provider, json_schema={"type": "object"})
    assert "".join(got) == '{"calls": [], "output": 1}' and all(len(d) <= 3 for d in got)
    assert sleeps.delays == [pytest.approx(0.02)] * len(got)
    with pytest.raises(ProviderError) as info:
        deltas(provider)
    assert (info.value.status, info.value.retryable) == (429, True)
    seen: list[str] = []

    async def go():
        async for d in provider.stream(USER):
            seen.append(d)

    with pytest.raises(ProviderError) as info:
        asyncio.run(go())
    assert seen == ["half"] and info.value.status == 500
    assert deltas(provider) == ["firs", "t re", "ply"]  # cycles
    assert len(provider.calls) == 5 and provider.calls[1]["json_schema"] == {"type": "object"}


def test_scripted_provider_json_file_and_no_cycle(tmp_path):
    path = tmp_path / "turns.json"
    path.write_text(json.dumps({"turns": ["only", {"reply": {"output": 2}}]}))
    provider = ScriptedProvider(str(path), cycle=False)
    assert deltas(provider) == ["only"]
    assert json.loads("".join(deltas(provider))) == {"output": 2}
    with pytest.raises(ProviderError, match="all 2 turns used"):
        deltas(provider)


def test_scripted_provider_rejects_bad_scripts(tmp_path):
    with pytest.raises(ProviderError):
        ScriptedProvider([])
    with pytest.raises(ProviderError):
        ScriptedProvider([{"chunk_size": 3}])
    with pytest.raises(ProviderError, match="cannot read"):
        ScriptedProvider(tmp_path / "missing.yaml")


# --------------------------------------------------------------------------- specs


def test_get_provider_specs(tmp_path, need_openai, need_anthropic):
    path = tmp_path / "s.yaml"
    path.write_text('- "hi"\n')
    scripted = get_provider(f"scripted:{path}")
    assert isinstance(scripted, ScriptedProvider) and deltas(scripted) == ["hi"]
    assert get_provider("openai").model == "gpt-4.1-mini"
    assert get_provider("openai", model="m1").model == "m1"
    assert get_provider("openai:m2", model="m1").model == "m2"
    assert get_provider("anthropic", model="c1").model == "c1"
    both = get_provider(f"anthropic:claude-x, openai:gpt-y, scripted:{path}")
    assert isinstance(both, FailoverProvider)
    assert [p.name for p in both.providers] == ["anthropic", "openai", "scripted"]
    assert [getattr(p, "model", None) for p in both.providers][:2] == ["claude-x", "gpt-y"]
    for bad in ("", "gemini", "scripted:"):
        with pytest.raises(ProviderError):
            get_provider(bad)


def test_unknown_spec_names_every_registered_form():
    with pytest.raises(ProviderError) as info:
        get_provider("gemini")
    assert str(info.value) == ("unknown provider 'gemini'; expected 'openai[:MODEL]', 'anthropic[:MODEL]', "
                               "'scripted:FILE', 'config:FILE', or several of them separated by commas")
    assert not info.value.retryable


def test_a_registry_line_is_all_a_new_provider_needs(monkeypatch):
    from sophon_dsl.llm.providers.registry import PROVIDERS, ProviderFactory

    def echo(arg, model):
        return ScriptedProvider([f"{arg}/{model}"], name="echo")

    monkeypatch.setitem(PROVIDERS, "echo", ProviderFactory("echo:TEXT", echo))
    assert deltas(get_provider("echo:hi", model="m")) == ["hi/m"]
    pair = get_provider("Echo:a, echo:b")  # prefixes are case-insensitive, as before
    assert isinstance(pair, FailoverProvider) and [p.name for p in pair.providers] == ["echo", "echo"]
    with pytest.raises(ProviderError, match="'config:FILE', 'echo:TEXT', or several"):
        get_provider("gemini")


@pytest.mark.parametrize("package", ["openai", "anthropic"])
def test_missing_sdk_names_the_extra(monkeypatch, package):
    monkeypatch.setitem(sys.modules, package, None)  # makes `import package` fail
    with pytest.raises(ProviderError) as info:
        get_provider(package)
    assert f"pip install 'sophon-dsl[{package}]'" in str(info.value)
    assert not info.value.retryable


# --------------------------------------------------------------------------- the test server


def test_server_script_is_appendable_and_errors_are_chosen(need_openai):
    with ScriptedLLMServer(replies=["one"], errors={1: 500}) as srv:
        provider = openai_at(srv)

        async def go():
            assert await attempt(provider) == (["one"], None)
            _, err = await attempt(provider)  # request 1 is answered 500 without using a reply
            assert err.status == 500
            _, err = await attempt(provider)
            assert err.status == 400 and "no scripted reply left" in str(err)
            srv.replies.append("two")  # the script grows while the server runs
            srv.add_reply({"status": 529})
            assert await attempt(provider) == (["two"], None)
            _, err = await attempt(provider)
            assert err.status == 529
            assert len(provider._clients) == 1  # one SDK client per event loop, reused

        asyncio.run(go())
    assert [r.status for r in srv.requests] == [200, 500, 400, 200, 529]
    assert all(r.json["messages"] == [{"role": "user", "content": "hello"}] for r in srv.requests)


@pytest.mark.parametrize("name,content,expected", [
    ("bad.json", b'["ok", ', "bad.json:1:8: not valid JSON"),
    ("bad.yaml", b"- ok\n- [unclosed\n", "bad.yaml:3:1: not valid YAML"),
    ("bin.yaml", b"\xff\xfe\x00bad", "not UTF-8 text"),
    ("deep.json", b"[" * 100000 + b"]" * 100000, "nested too deeply"),
])
def test_scripted_files_that_do_not_load_are_provider_errors(tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ProviderError) as info:
        ScriptedProvider(str(path))
    assert expected in str(info.value)
