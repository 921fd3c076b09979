"""Durable agent runs whose replies hold maps (issue 13, the agent loop with issue 12's maps):
the OpenAI SDK over HTTP against the SSE server of tests/llm/sse_server.py, the process "dies"
(an exception no layer handles, raised from the provider's stream) after a complete turn or
in the middle of a streamed turn whose map items are running, then the run is resumed.
Each time: the same status, output and state as an uninterrupted run, no request for a turn
whose reply was recorded, no committed item call run again (an item call that ran twice was
in doubt and kept its idempotency key), and the map's item records in the turn's calls."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pytest

from sophon_dsl.durable import current_call, open_store
from sophon_dsl.llm import providers
from sophon_dsl.llm.agent import Agent
from sophon_dsl.tools import tool

sys.path.insert(0, str(Path(__file__).parents[1] / "llm"))
from sse_server import Reply, ScriptedLLMServer


class Crash(BaseException):
    """Stands for the process dying (not an error the loop handles)."""


class ByTurn(ScriptedLLMServer):
    """Answers each request with the reply scripted for the turn it asks for; ``turns`` lists
    the turn of each request."""

    def __init__(self, script: dict[int, str]) -> None:
        super().__init__([])
        self.script = script
        self.turns: list[int] = []

    def _take(self):
        with self._lock:
            last = self.requests[-1].json["messages"][-1]["content"]
            turn = int(re.search(r"Turn (\d+) of", last).group(1))
            self.turns.append(turn)
            return len(self.turns) - 1, Reply(self.script[turn], chunk_chars=4, delay=0.01)


class Dying:
    """The OpenAI provider, in a process that dies (``Crash``) when ``when(request)`` says so,
    checked before each piece of the stream is handed on."""

    name = "openai"

    def __init__(self, url: str, when=None) -> None:
        self.inner = providers.OpenAIProvider("m", base_url=url, api_key="test")
        self.when = when
        self.requests = 0

    async def stream(self, messages, **kw):
        self.requests += 1
        async for delta in self.inner.stream(messages, **kw):
            if self.when is not None and self.when(self.requests):
                raise Crash()
            yield delta


def make_tools(ledger: list):
    @tool(name="act", risk="low")
    async def act(n: int) -> int:
        """A side effect (not idempotent): it commits an intent before it starts."""
        ledger.append(current_call().key)
        await asyncio.sleep(0.04)
        return n * 10

    @tool(name="look", risk="low", idempotent=True)
    def look(n: int) -> int:
        return n + 1

    return [act, look]


T1 = "$state.out = map(over=[1, 2, 3, 4], as=it, concurrency=2) {\n    $local.a = act(n=$it)\n" \
     "    $local.b = look(n=$local.a)\n}\n"
# a literal list: the map starts while the reply streams (a read of $state would wait for its end)
T2 = "$state.more = map(over=[11, 21, 31, 41], as=row, concurrency=1) {\n    $local.c = act(n=$row)\n}\n" \
     "# the model goes on writing while the items run" + " and on" * 30 + "\n$state.z = look(n=1)\n"
T2_JSON = json.dumps({"calls": [
    {"_map": {"over": [11, 21, 31, 41], "as": "row", "concurrency": 1,
              "do": [{"_tool": "act", "n": "†row", "_outputPath": "†local.c"}]}, "_outputPath": "†state.more"},
    {"_tool": "look", "n": 1, "_outputPath": "†state.z", "_note": "the model goes on" + " and on" * 40}]})
T3 = "return {out: $state.out, more: $state.more, z: $state.z}\n"
AFTER_CUT = "$state.z = look(n=1)\n"  # what the model writes after its reply was cut (turn 3)


def _agent(srv: ByTurn, ledger: list, url: str | None, when=None, **kw) -> Agent:
    return Agent(Dying(srv.openai_base_url, when), tools=make_tools(ledger), stdlib=False, store=url, **kw)


def _final(result) -> tuple:
    return result.status, result.output, result.state


def _calls(turn) -> list:
    return sorted((c["id"], c["status"]) for c in turn.calls)


def _stored(db: Path, run_id: str) -> tuple[set[str], set[str]]:
    """Keys of the item calls committed after running their tool, and of those with an intent."""
    with sqlite3.connect(db) as conn:
        done = {f"{r}:{c}" for r, c in conn.execute(
            "SELECT run_id, call_id FROM calls WHERE run_id LIKE ? AND json_extract(record, '$.attempts') > 0",
            (f"{run_id}/%",))}
        intents = {k for (k,) in conn.execute("SELECT idem_key FROM intents WHERE run_id LIKE ?", (f"{run_id}/%",))}
        conn.execute("UPDATE runs SET lease_owner = NULL, lease_until = NULL")  # the dead process's lease
    return done, intents


def _no_committed_call_twice(ledger: list, committed: set[str], intents: set[str]) -> None:
    counts = Counter(ledger)
    for key in committed & intents:
        assert counts[key] == 1, f"{key} was committed before the crash and ran {counts[key]} times"
    for key, n in counts.items():
        assert n == 1 or (n == 2 and key in intents and key not in committed), (key, n)


@pytest.fixture(scope="module")
def reference():
    ledger: list = []
    with ByTurn({1: T1, 2: T2, 3: T3}) as srv:
        result = _agent(srv, ledger, None).run("go")
    assert result.status == "succeeded", result.to_json()
    assert result.output["more"] == [{"c": 110}, {"c": 210}, {"c": 310}, {"c": 410}]
    assert len(ledger) == 8
    return result


def test_a_map_turn_then_a_crash_as_the_next_reply_starts(tmp_path, reference):
    db, ledger = tmp_path / "runs.db", []
    with ByTurn({1: T1, 2: T2, 3: T3}) as srv:
        with pytest.raises(Crash):
            _agent(srv, ledger, f"sqlite:///{db}", when=lambda request: request == 2, run_id="m1").run("go")
        assert srv.turns == [1, 2]
        committed, intents = _stored(db, "m1")
        assert {f"m1/t1:c1[{k}].act" for k in range(4)} <= committed
        asked = len(srv.turns)
        resumed = _agent(srv, ledger, f"sqlite:///{db}").resume("m1", unknown="rerun")
        assert srv.turns[asked:] == [2, 3]  # turn 1's reply, with its map, is not asked for again
    assert _final(resumed) == _final(reference)
    # the committed map is not expanded again: its items' records come back all the same
    assert _calls(resumed.turns[0]) == _calls(reference.turns[0])
    assert len(_calls(resumed.turns[0])) == 9
    _no_committed_call_twice(ledger, committed, intents)
    assert len(ledger) == 8


@pytest.mark.parametrize("form", ["dsl", "json"])
def test_a_crash_while_the_map_items_of_a_streamed_reply_run(tmp_path, reference, form):
    db, ledger = tmp_path / "runs.db", []
    reply = T2 if form == "dsl" else T2_JSON

    def mid_map(request: int) -> bool:  # two of turn 2's items started, the reply still streams
        return request == 2 and sum("/t2:" in k for k in ledger) >= 2

    with ByTurn({1: T1, 2: reply, 3: AFTER_CUT, 4: T3}) as srv:
        with pytest.raises(Crash):
            _agent(srv, ledger, f"sqlite:///{db}", when=mid_map, run_id="m2").run("go")
        with open_store(f"sqlite:///{db}") as s:
            text, complete = s.load_replies("m2")[2]
        assert not complete and len(text) < len(reply)
        committed, intents = _stored(db, "m2")
        assert any("/t2:c1[" in k for k in committed) and "m2/t2:c1[3].act" not in committed
        asked = len(srv.turns)
        resumed = _agent(srv, ledger, f"sqlite:///{db}").resume("m2", unknown="rerun")
        assert srv.turns[asked:] == [3, 4]  # turns 1 and 2 were recorded
        told = srv.requests[asked].json["messages"][-1]["content"]  # what turn 3's request shows
    assert _final(resumed) == _final(reference)
    cut = resumed.turns[1]
    # the map was complete in the recorded prefix: it ran on, its committed items restored
    assert _calls(cut) == [c for c in _calls(reference.turns[1]) if c[0] != "c2"]
    assert [e["error"]["code"] for e in cut.errors] == ["Reply.Interrupted"], cut.errors
    # (a cut JSON reply's unclosed document is no mistake of the model's: no E002 beside it)
    assert cut.status == "succeeded" and not [d for d in cut.diagnostics if d.is_error]
    assert "Reply.Interrupted" in told and "E002" not in told
    _no_committed_call_twice(ledger, committed, intents)
    assert sum("/t2:" in k for k in Counter(ledger)) == 4
