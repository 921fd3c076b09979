"""kill -9 of a durable agent run (issue 13, the agent loop): ``sophon-dsl agent`` in a subprocess,
against a real OpenAI-compatible SSE server on 127.0.0.1 (tests/llm/sse_server.py), is killed
after a complete turn, in the middle of a streamed turn, and (``SOPHON_AGENT_KILL_TRIALS`` more
times, default 1) at a random point; then ``sophon-dsl resume`` continues it.  Each time: the same
final result as an uninterrupted run, no request for a turn whose reply was recorded, every call
committed before the kill once in the side-effect ledger, and a call that ran twice was in doubt
and ran with one idempotency key."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "llm"))
from sse_server import Reply, ScriptedLLMServer

TOOLS = str(Path(__file__).with_name("agenttools.py"))
TRIALS = int(os.environ.get("SOPHON_AGENT_KILL_TRIALS", "1"))
SCRIPT = ["$state.a = act(n=1)\n$state.b = look(n=$state.a)\n",
          "$state.c = act(n=3)\n$state.d = act(n=4)\n$state.e = act(n=5)\n",
          "return {sum: $state.e, b: $state.b}\n"]


# a reply holding a map, whose items run while the model goes on writing
MAP_SCRIPT = ["$state.out = map(over=[1, 2, 3, 4], as=it, concurrency=1) {\n    $local.a = act(n=$it)\n}\n"
              "# the model goes on writing while the items run" + " and on" * 12 + "\n$state.b = look(n=1)\n",
              "return {out: $state.out, b: $state.b}\n"]
MAP_AFTER_CUT = {0: "$state.b = look(n=1)\n"}  # what the model writes once told its reply was cut


class ScriptedModel(ScriptedLLMServer):
    """Answers by turn: the next reply of ``script`` after the previous turn's, or, when the
    previous turn's reply was cut (the request shows ``Reply.Interrupted``), what ``after_cut``
    has for it, else the same one again.  ``turns`` lists the turn each request asked for."""

    def __init__(self, script: list[str] = SCRIPT, after_cut: dict[int, str] | None = None) -> None:
        super().__init__([])
        self.script = script
        self.after_cut = after_cut or {}
        self.turns: list[int] = []
        self._index = {0: -1}

    def _take(self):
        with self._lock:
            last = self.requests[-1].json["messages"][-1]["content"]
            turn = int(re.search(r"Turn (\d+) of", last).group(1))
            prev = self._index[turn - 1]
            cut = "Reply.Interrupted" in last
            self._index[turn] = index = prev if cut else prev + 1
            self.turns.append(turn)
            text = self.after_cut.get(index) if cut else None
            return len(self.turns) - 1, Reply(text or self.script[min(index, len(self.script) - 1)],
                                              chunk_chars=4, delay=0.02)


def _start(cmd: list[str], srv: ScriptedModel, ledger: Path) -> subprocess.Popen:
    env = dict(os.environ, OPENAI_BASE_URL=srv.openai_base_url, OPENAI_API_KEY="test",
               SOPHON_TEST_LEDGER=str(ledger))
    return subprocess.Popen([sys.executable, "-m", "sophon_dsl.cli", *cmd], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _agent(srv: ScriptedModel, db: Path, ledger: Path) -> tuple[subprocess.Popen, str]:
    proc = _start(["agent", "go", "--tools", TOOLS, "--no-stdlib", "--provider", "openai", "--model", "m",
                   "--store", f"sqlite:///{db}", "--json"], srv, ledger)
    seen = []
    while (line := proc.stderr.readline()) and not line.startswith("run id: "):
        seen.append(line)
    assert line.startswith("run id: "), "".join(seen)
    return proc, line.removeprefix("run id: ").strip()


def _final(out: str) -> tuple:
    data = json.loads(out)
    return data["status"], data["output"], data["state"]


def _wait_for(cond, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < end, "the kill point never came"
        time.sleep(0.005)


def _ledger(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _recorded(db: Path, run_id: str) -> tuple[dict[int, bool], set[str], set[str]]:
    """Turns with a recorded reply (whether it is complete), keys of calls committed after
    running their tool, keys of calls with an intent."""
    with sqlite3.connect(db) as conn:
        turns = dict(conn.execute("SELECT turn, MAX(final) FROM agent_replies WHERE run_id = ? GROUP BY turn",
                                  (run_id,)))
        done = {f"{r}:{c}" for r, c in conn.execute(
            "SELECT run_id, call_id FROM calls WHERE run_id LIKE ? AND json_extract(record, '$.attempts') > 0",
            (f"{run_id}/%",))}
        intents = {k for (k,) in conn.execute("SELECT idem_key FROM intents WHERE run_id LIKE ?", (f"{run_id}/%",))}
    return turns, done, intents


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run: its result and how long it took from its run id to its end."""
    tmp = tmp_path_factory.mktemp("ref")
    with ScriptedModel() as srv:
        proc, _ = _agent(srv, tmp / "ref.db", tmp / "ledger")
        t0 = time.monotonic()  # the kill window starts when the run id is printed
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
        assert proc.returncode == 0, err
    return _final(out), took


def _trial(tmp: Path, reference: tuple, kill_when, model=ScriptedModel) -> dict[int, bool]:
    db, ledger = tmp / "runs.db", tmp / "ledger"
    with model() as srv:
        proc, run_id = _agent(srv, db, ledger)
        kill_when(srv, ledger, proc)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        turns, committed, intents = _recorded(db, run_id)
        asked_before = len(srv.turns)
        resumed = _start(["resume", run_id, "--tools", TOOLS, "--no-stdlib", "--store", f"sqlite:///{db}",
                          "--unknown", "rerun", "--json"], srv, ledger)
        out, err = resumed.communicate(timeout=60)
        assert resumed.returncode == 0, err
        asked = srv.turns[asked_before:]
    assert _final(out) == reference[0]
    assert not set(asked) & set(turns), f"asked again for recorded turn(s): {asked} vs {turns}"
    counts = Counter(e["key"] for e in _ledger(ledger))
    for key in committed & intents:  # (the side effects: act commits an intent, look does not)
        assert counts[key] == 1, f"{key} was committed before the kill and ran {counts[key]} times"
    for key, n in counts.items():
        assert n == 1 or (n == 2 and key in intents and key not in committed), (key, n)
    return turns


def test_killed_after_a_complete_turn(tmp_path, reference):
    def after_turn_one(srv, ledger, proc):  # turn 2 is asked for once turn 1's calls are committed
        _wait_for(lambda: len(srv.requests) >= 2, proc)

    assert _trial(tmp_path, reference, after_turn_one).get(1) == 1


def test_killed_in_the_middle_of_a_streamed_turn(tmp_path, reference):
    def mid_turn_two(srv, ledger, proc):  # act(n=3) ran: turn 2's reply is still streaming
        _wait_for(lambda: any(e["n"] == 3 for e in _ledger(ledger)), proc)

    assert _trial(tmp_path, reference, mid_turn_two).get(2) == 0  # cut: no final marker


@pytest.mark.parametrize("trial", range(TRIALS))
def test_killed_at_a_random_point(tmp_path, reference, trial):
    delay = random.Random(trial).uniform(0.0, reference[1])

    def at_random(srv, ledger, proc):
        time.sleep(delay)

    _trial(tmp_path, reference, at_random)


class MapModel(ScriptedModel):
    def __init__(self) -> None:
        super().__init__(MAP_SCRIPT, MAP_AFTER_CUT)


@pytest.fixture(scope="module")
def map_reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mapref")
    with MapModel() as srv:
        proc, _ = _agent(srv, tmp / "ref.db", tmp / "ledger")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert _final(out)[1] == {"out": [{"a": 10}, {"a": 20}, {"a": 30}, {"a": 40}], "b": 2}
    return _final(out), None


def test_killed_while_the_map_items_of_a_streamed_reply_run(tmp_path, map_reference):
    def mid_map(srv, ledger, proc):  # two items ran; the reply still streams (12 and more chunks)
        _wait_for(lambda: len(_ledger(ledger)) >= 2, proc)

    turns = _trial(tmp_path, map_reference, mid_map, MapModel)
    assert turns.get(1) == 0  # cut: the map was complete in the recorded prefix, its items resumed
    keys = [e["key"] for e in _ledger(tmp_path / "ledger")]
    assert {k.split("/", 1)[1] for k in keys} == {f"t1:c1[{i}].act" for i in range(4)}  # no turn ran the map again
