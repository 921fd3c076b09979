"""Issue 24, item 7: an endless model reply (a stream of comments, one string that never
closes, blank lines) is cut at a size limit (``Agent(max_reply_bytes=...)``, default 1 MiB;
CLI ``--max-reply-bytes``) with a clear error the next turn sees (``Reply.TooLarge``); every
other request for a whole reply (``collect``: latent calls, planners, evaluators) is bounded
the same way.

Providers here stream without end; each test runs under a hang guard (a generous join, not a
timing assertion): before the fix these never returned, or grew the process until it died.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

import pytest

from sophon_dsl.cli import main
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.provider import DEFAULT_MAX_REPLY_BYTES, Message, ReplyTooLarge, collect
from sophon_dsl.tools import tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hang_guard import finishes


class EndlessProvider:
    """The first request streams ``start`` then ``chunk`` forever; later requests reply ``then``."""

    name = "endless"

    def __init__(self, start: str, chunk: str, then: Sequence[str] = ()) -> None:
        self.start, self.chunk, self.then = start, chunk, list(then)
        self.requests: list[list[Message]] = []
        self.sent = 0
        self.closed = False

    async def stream(self, messages: Sequence[Message], **kw: Any) -> AsyncIterator[str]:
        self.requests.append(list(messages))
        if len(self.requests) > 1:
            yield self.then.pop(0) if self.then else "return 1\n"
            return
        try:
            yield self.start
            while True:
                self.sent += len(self.chunk)
                yield self.chunk
                await asyncio.sleep(0)
        finally:
            self.closed = True


@tool(name="note")
def note(text: str) -> str:
    return text


def _agent(provider: Any, **kw: Any) -> Agent:
    return Agent(provider, tools=[note], stdlib=False, max_turns=2, **kw)


def _errors(turn: Any) -> list[dict]:
    return [e["error"] for e in turn.errors]


@pytest.mark.parametrize("start, chunk", [
    ('$state.a = note(text="kept")\n', "# a comment that never ends the reply\n"),   # comments
    ('$state.a = note(text="kept")\n$state.b = note(text="', "x" * 64),            # an unclosed string
    ('{"calls": [{"_tool": "note", "text": "kept", "_outputPath": "†state.a"}, {"_tool": "note", "text": "',
     "y" * 64),                                                                      # the same in JSON
    ("\n", "\n"),                                                                     # blank lines
    ("```", "`"),                                                                     # a fence that never ends
])
def test_an_endless_reply_is_cut_and_the_next_turn_is_told(start, chunk):
    provider = EndlessProvider(start, chunk, then=['$state.z = note(text="again")\nreturn $state.z\n'])
    agent = _agent(provider, max_reply_bytes=64 << 10)
    result = finishes(lambda: agent.run("write notes"), 120, "the endless reply was never cut")
    first = result.turns[0]
    assert "Reply.TooLarge" in [e.get("code") for e in _errors(first)]
    assert provider.closed  # the stream was closed where it was cut
    assert provider.sent <= (64 << 10) + len(chunk)  # nothing read past the limit
    assert len(first.reply) <= 64 << 10
    if "kept" in start:  # the statements that arrived whole ran
        assert result.state["state"]["a"] == "kept"
    # the second request carries the error, and the run goes on to its end
    assert "Reply.TooLarge" in "\n".join(m.content for m in provider.requests[1])
    assert result.status == "succeeded" and result.output == "again"


def test_the_default_limit_is_one_mebibyte():
    assert DEFAULT_MAX_REPLY_BYTES == 1 << 20
    provider = EndlessProvider("# start\n", "# " + "z" * 1000 + "\n")
    result = finishes(lambda: _agent(provider).run("go"), 120, "never cut")
    assert "Reply.TooLarge" in [e.get("code") for e in _errors(result.turns[0])]
    assert (1 << 20) - 1100 <= len(result.turns[0].reply) <= 1 << 20


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "1M"])
def test_max_reply_bytes_must_be_a_positive_number(bad):
    with pytest.raises(ValueError, match="max_reply_bytes"):
        _agent(EndlessProvider("", ""), max_reply_bytes=bad)


def test_collect_is_bounded():
    provider = EndlessProvider("", "w" * 100)
    with pytest.raises(ReplyTooLarge) as info:
        finishes(lambda: asyncio.run(collect(provider, [Message("user", "hi")], max_bytes=10_000)), 60)
    assert info.value.code == "Reply.TooLarge" and not info.value.retryable
    assert "10,000 bytes" in str(info.value) and provider.closed


def test_a_latent_call_with_an_endless_reply_fails_its_call():
    from sophon_dsl.model import ToolDecl

    summarize = ToolDecl("summarize", "Summarize a text",
                         {"type": "object", "properties": {"text": {"type": "string"}}}, {"type": "string"})

    class EndlessLatent:
        name = "endless-latent"
        turns = ['$state.s = summarize(text="t")\n', "return 1\n"]

        async def stream(self, messages: Sequence[Message], **kw: Any) -> AsyncIterator[str]:
            if messages[0].content.startswith("You execute one tool call"):
                while True:  # the latent call's reply never ends
                    yield "v" * 4096
                    await asyncio.sleep(0)
            yield self.turns.pop(0)

    provider = EndlessLatent()
    result = finishes(lambda: Agent(provider, tools=[summarize], stdlib=False, max_turns=2).run("summarize"),
                      120, "never cut")
    errors = [e["error"] for t in result.turns for e in t.errors]
    assert any("max_reply_bytes" in str(e) for e in errors), errors


def test_the_cli_flag(tmp_path, capsys):
    script = tmp_path / "script.yaml"
    big = "# " + "c" * 200 + "\n"
    script.write_text(json.dumps({"turns": ['$state.a = note(text="kept")\n' + big * 100, "return $state.a\n"]}),
                      encoding="utf-8")
    tools = tmp_path / "t.py"
    tools.write_text("from sophon_dsl.tools import tool\n\n@tool(name='note')\ndef note(text: str) -> str:\n"
                     "    return text\n", encoding="utf-8")
    capsys.readouterr()
    code = finishes(lambda: main(["agent", "notes", "--provider", f"scripted:{script}", "--tools", str(tools),
                                  "--no-stdlib", "--no-store", "--json", "--max-reply-bytes", "4K"]), 120)
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    result = json.loads(out.out)
    assert code == 0 and result["status"] == "succeeded" and result["output"] == "kept"
    assert "Reply.TooLarge" in json.dumps(result["turns"][0]["errors"])
    with pytest.raises(SystemExit) as info:
        main(["agent", "notes", "--provider", f"scripted:{script}", "--max-reply-bytes", "huge"])
    assert info.value.code == 2 and "not a size" in capsys.readouterr().err
