"""The scripted provider's keyed mode: a reply chosen by a pattern over the request, so
parallel requests get their own replies whatever order they arrive in."""

from __future__ import annotations

import asyncio
import json

import pytest

from sophon_dsl.llm.provider import Message, ProviderError, collect
from sophon_dsl.llm.providers import get_provider
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider, request_text


def _ask(provider, text, role="user"):
    return collect(provider, [Message("system", "sys"), Message(role, text)])


async def _gather(provider, texts):
    return await asyncio.gather(*(_ask(provider, t) for t in texts))


def test_parallel_requests_get_their_keyed_replies_in_any_order():
    provider = ScriptedProvider(keyed=[KeyedReply(r"weather", "sunny"), KeyedReply(r"stocks", "up 3%")])
    forward = asyncio.run(_gather(provider, ["the weather?", "the stocks?"]))
    backward = asyncio.run(_gather(provider, ["the stocks?", "the weather?"]))
    assert forward == ["sunny", "up 3%"]
    assert backward == ["up 3%", "sunny"]


def test_a_list_of_replies_is_taken_in_turn_and_the_last_repeats():
    key = KeyedReply(r"Request:", ["one", "two"])
    provider = ScriptedProvider(keyed=[key])
    got = [asyncio.run(_ask(provider, "Request: x")) for _ in range(3)]
    assert got == ["one", "two", "two"]
    assert key.used == 3


def test_unmatched_request_falls_back_to_the_ordered_turns_or_fails():
    mixed = ScriptedProvider(["ordered"], keyed=[KeyedReply("^never$", "no")])
    assert asyncio.run(_ask(mixed, "anything")) == "ordered"
    only_keys = ScriptedProvider(keyed=[KeyedReply("weather", "sunny")])
    with pytest.raises(ProviderError, match="no keyed reply matches") as info:
        asyncio.run(_ask(only_keys, "stocks"))
    assert info.value.retryable is False


def test_keyed_script_file_with_turn_options_and_errors(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keyed": [
        {"match": "(?i)complex or simple", "reply": "SIMPLE", "chunk_size": 2},
        {"match": "fail", "error": {"status": 500, "message": "boom"}},
    ]}))
    provider = get_provider(f"scripted:{path}")
    assert asyncio.run(_ask(provider, "COMPLEX or SIMPLE?")) == "SIMPLE"
    with pytest.raises(ProviderError, match="boom") as info:
        asyncio.run(_ask(provider, "please fail"))
    assert info.value.retryable is True  # 500 is retryable, as in ordered turns


def test_pattern_sees_roles_and_bad_keys_are_refused():
    assert request_text([Message("system", "a"), Message("user", "b")]) == "system: a\nuser: b"
    provider = ScriptedProvider(keyed=[KeyedReply(r"^system: sys", "from system")])
    assert asyncio.run(_ask(provider, "x")) == "from system"
    with pytest.raises(ProviderError, match="not a regular expression"):
        KeyedReply("(", "x")
    with pytest.raises(ProviderError, match="needs a 'match'"):
        ScriptedProvider(keyed=[{"reply": "x"}])
    with pytest.raises(ProviderError, match="give turns, keyed replies or both"):
        ScriptedProvider()
