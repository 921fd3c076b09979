"""The cascade after a failed call (issue 26 item 11): seed 000 skips every dependent (the
default), seed 001 lets a dependent with another dependency that succeeded go on with the
failure's ``{error, cause}`` in its input (``cascade="partial"``, ``--cascade partial``).
Each case runs on the scheduler and on the reference interpreter, which must agree."""

from __future__ import annotations

import json

import pytest

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.runtime import RunError
from sophon_dsl.runtime.reference import reference_run
from sophon_dsl.tools import tool


@tool(name="fetch", risk="none")
def fetch(name: str) -> dict:
    if name.startswith("bad"):
        raise RunError("Fetch.NotFound", f"no page for {name}")
    return {"name": name}


@tool(name="combine", risk="none")
def combine(a: object = None, b: object = None, note: str = "") -> dict:
    return {"a": a, "b": b, "note": note}


TOOLS = [fetch, combine]

PLAN = """
s1: $state.a = fetch(name="bad one")
s2: $state.b = fetch(name="good")
s3: $state.both = combine(a=$state.a, b=$state.b)
s4: $state.only = combine(a=$state.a)
s5: $state.chain = combine(a=$state.only, b=$state.b)
s6: $state.text = combine(note="got †state.a and †state.b.name")
@after(s1, s2) s7: $state.after = combine(note="after both")
@after(s1) s8: $state.after_failed = combine(note="after s1 only")
"""

FAILURE = {"error": "Fetch.NotFound", "cause": "no page for bad one"}


def _both(plan: str, **kw):
    got = sophon_dsl.run(plan, TOOLS, **kw)
    want = reference_run(sophon_dsl.loads(plan), TOOLS, **kw)
    assert [(c.id, c.status) for c in got.calls] == [(c.id, c.status) for c in want.calls]
    assert got.state == want.state
    assert got.status == want.status
    return got


def _status(result) -> dict:
    return {c.id: c.status for c in result.calls}


def test_default_cascade_skips_every_dependent_of_a_failed_call():
    result = _both(PLAN)
    assert _status(result) == {"s1": "failed", "s2": "succeeded", "s3": "skipped", "s4": "skipped",
                               "s5": "skipped", "s6": "skipped", "s7": "skipped", "s8": "skipped"}


def test_partial_cascade_runs_a_dependent_whose_other_dependency_succeeded_with_the_failure_as_input():
    result = _both(PLAN, cascade="partial")
    assert _status(result) == {"s1": "failed", "s2": "succeeded", "s3": "succeeded", "s4": "skipped",
                               "s5": "succeeded", "s6": "succeeded", "s7": "succeeded", "s8": "skipped"}
    state = result.state["state"]
    assert state["both"] == {"a": FAILURE, "b": {"name": "good"}, "note": ""}
    # s4 read only the failed call: skipped (seed 001: "if all of a step's dependencies have
    # failed, the step is skipped"); s5 read s4 and s2: the skip is its input
    assert state["chain"]["a"] == {"error": "Call.Skipped", "cause": "s4 was skipped"}
    assert state["text"]["note"] == f"got {json.dumps(FAILURE, separators=(',', ':'))} and good"
    assert state["after"]["note"] == "after both"
    assert result.status == "failed"             # a call failed: the plan did, whatever ran after it


def test_partial_cascade_keeps_fallbacks_and_untaken_branches_as_they_are():
    plan = """
s1: $state.a = fetch(name="bad")
s2: $state.b = fetch(name="good")
s3: $state.fallback = combine(a=$state.a || $state.b)
s4: $state.ok || $state.caught = fetch(name="bad too")
s5: $state.branch = combine(a=$state.ok, b=$state.b)
"""
    result = _both(plan, cascade="partial")
    state = result.state["state"]
    assert state["fallback"]["a"] == {"name": "good"}         # `||` still takes the value
    assert _status(result)["s5"] == "skipped"                   # s4 took its catch: a branch, not a failure


def test_cascade_value_is_checked():
    with pytest.raises(ValueError, match="cascade must be one of 'skip', 'partial'"):
        sophon_dsl.run(PLAN, TOOLS, cascade="sometimes")


def test_cli_run_cascade_partial(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text(PLAN, encoding="utf-8")
    tools = tmp_path / "tools.py"
    tools.write_text(
        "from sophon_dsl.runtime import RunError\n"
        "from sophon_dsl.tools import tool\n\n"
        "@tool(name='fetch', risk='none')\n"
        "def fetch(name: str) -> dict:\n"
        "    if name.startswith('bad'):\n"
        "        raise RunError('Fetch.NotFound', f'no page for {name}')\n"
        "    return {'name': name}\n\n"
        "@tool(name='combine', risk='none')\n"
        "def combine(a: object = None, b: object = None, note: str = '') -> dict:\n"
        "    return {'a': a, 'b': b, 'note': note}\n", encoding="utf-8")
    args = ["run", str(plan), "--tools", str(tools), "--no-store", "--json"]
    assert main(args) == 1
    skipped = json.loads(capsys.readouterr().out)
    assert {c["id"]: c["status"] for c in skipped["calls"]}["s3"] == "skipped"
    assert main([*args, "--cascade", "partial"]) == 1
    partial = json.loads(capsys.readouterr().out)
    assert {c["id"]: c["status"] for c in partial["calls"]}["s3"] == "succeeded"
    assert partial["state"]["state"]["both"]["a"] == FAILURE
    with pytest.raises(SystemExit) as bad:
        main([*args, "--cascade", "never"])
    assert bad.value.code == 2


def test_agent_turns_take_the_partial_cascade_from_run_options():
    reply = ('$state.a = fetch(name="bad")\n$state.b = fetch(name="good")\n'
             '$state.c = combine(a=$state.a, b=$state.b)\nreturn $state.c\n')
    for cascade, status in (("skip", "skipped"), ("partial", "succeeded")):
        provider = ScriptedProvider(keyed=[KeyedReply("Request: ", reply)])
        result = Agent(provider, tools=TOOLS, stdlib=False, max_turns=1,
                       run_options={"cascade": cascade}).run("combine")
        calls = result.turns[0].calls
        assert calls[2]["status"] == status, calls
    assert result.turns[0].state_after["state"]["c"]["a"]["error"] == "Fetch.NotFound"


def test_durable_run_keeps_its_cascade_for_resume(tmp_path):
    from sophon_dsl.durable import open_store

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    result = sophon_dsl.run(PLAN, TOOLS, cascade="partial", store=url)
    store = open_store(url)
    try:
        assert store.get_run(result.run_id)["spec"]["cascade"] == "partial"
    finally:
        store.close()


def test_a_recorded_agent_run_keeps_its_cascade_for_resume(tmp_path):
    import asyncio

    from sophon_dsl.durable import open_store

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    reply = ('$state.a = fetch(name="bad")\n$state.b = fetch(name="good")\n'
             '$state.c = combine(a=$state.a, b=$state.b)\nreturn $state.c\n')
    first = Agent(ScriptedProvider(keyed=[KeyedReply("Request: ", reply)]), tools=TOOLS, stdlib=False,
                  max_turns=1, run_options={"cascade": "partial"}, store=url, run_id="a1").run("combine")
    assert first.turns[0].calls[2]["status"] == "succeeded"
    store = open_store(url)
    try:
        assert store.get_run("a1")["spec"]["options"]["cascade"] == "partial"
    finally:
        store.close()
    # an agent built without it takes the run's own cascade back, as it takes its loop options
    again = Agent(ScriptedProvider(["return 0"]), tools=TOOLS, stdlib=False, max_turns=1)
    resumed = asyncio.run(again.aresume("a1", store=url))
    assert again.run_options["cascade"] == "partial"
    assert resumed.turns[0].calls[2]["status"] == "succeeded"

