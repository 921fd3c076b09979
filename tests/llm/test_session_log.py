"""The session log (seed 002, middleware 1; issue 26 item 12): each agent request and its
answer are an event pair, ``user_message`` / ``agent_message``, through ``on_event``, in the
result (``AgentResult.session``, ``--json``) and in a durable run's row."""

from __future__ import annotations

import json

import yaml

from sophon_dsl.cli import main
from sophon_dsl.durable import open_store
from sophon_dsl.llm.agent import AGENT_MESSAGE, USER_MESSAGE, Agent
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.tools import tool


@tool(name="lookup", risk="none")
def lookup(q: str) -> dict:
    return {"answer": q.upper()}


def _provider(*replies):
    return ScriptedProvider(keyed=[KeyedReply("Request: ", list(replies))])


def test_request_and_answer_are_an_event_pair_around_the_run():
    events = []
    result = Agent(_provider('$state.r = lookup(q="x")\nreturn $state.r.answer\n'), tools=[lookup], stdlib=False,
                   on_event=events.append).run("look x up")
    types = [e.type for e in events]
    assert types[0] == USER_MESSAGE                      # before anything else of the pipeline
    assert types[-2:] == [AGENT_MESSAGE, "agent_done"]   # the answer, then the end of the run
    user, agent = events[0].data, events[-2].data
    assert user["type"] == USER_MESSAGE and user["text"] == "look x up" and user["at"].endswith("Z")
    assert agent == {"type": AGENT_MESSAGE, "text": "X", "at": agent["at"], "status": "succeeded", "output": "X"}
    assert result.session == [user, agent]
    assert result.to_json()["session"] == [user, agent]


def test_a_failed_run_answers_with_its_error_and_structured_output_is_json_text():
    result = Agent(_provider('$state.r = nosuch(q="x")\n'), tools=[lookup], stdlib=False, max_turns=1).run("go")
    answer = result.session[1]
    assert answer["status"] == "failed" and answer["text"] == result.error and answer["output"] is None
    result = Agent(_provider('return {"a": [1, 2]}\n'), tools=[lookup], stdlib=False).run("go")
    assert json.loads(result.session[1]["text"]) == {"a": [1, 2]}


def test_cli_agent_json_carries_the_session_without_a_store(tmp_path, capsys):
    script = tmp_path / "replies.yaml"
    script.write_text(yaml.safe_dump(['return "done"\n']))
    code = main(["agent", "say done", "--no-stdlib", "--provider", f"scripted:{script}", "--no-store", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(m["type"], m["text"]) for m in out["session"]] == [(USER_MESSAGE, "say done"), (AGENT_MESSAGE, "done")]


def test_a_durable_run_keeps_the_request_when_it_begins_and_the_pair_when_it_ends(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    seen = {}

    @tool(name="peek", risk="none")
    def peek() -> int:
        with open_store(url) as store:  # what another process sees while the run goes on
            seen["spec"] = store.get_run("s1")["spec"]
        return 1

    result = Agent(_provider("$state.p = peek()\nreturn $state.p\n"), tools=[peek], stdlib=False, store=url,
                   run_id="s1").run("peek once")
    assert [m["type"] for m in seen["spec"]["session"]] == [USER_MESSAGE]
    assert seen["spec"]["session"][0]["text"] == "peek once"
    with open_store(url) as store:
        row = store.get_run("s1")
    assert row["summary"]["agent"]["session"] == result.session
    assert main(["runs", "show", "s1", "--store", url, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(m["type"], m["text"]) for m in shown["session"]] == [(USER_MESSAGE, "peek once"), (AGENT_MESSAGE, "1")]
