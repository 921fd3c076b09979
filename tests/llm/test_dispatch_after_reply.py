"""Issue 30 items 2 and 8: ``Agent(dispatch="after_reply")`` (plan then execute) and the call limit.

* after_reply: the whole reply is read before any call starts, and the run equals the streamed one;
* the default limit is 100 calls per turn; a plan read whole whose size is known to be over the
  limit (calls written, plus the items of maps over known lists) runs none of its calls;
* the options are validated with clear errors.
"""

from __future__ import annotations

import asyncio

import pytest

from sophon_dsl.llm.agent import DEFAULT_MAX_CALLS, Agent
from sophon_dsl.tools import tool
from test_agent import FakeProvider


def tools(events: list):
    @tool
    async def fetch(url: str) -> str:
        events.append(f"start fetch {url}")
        await asyncio.sleep(0)
        return url.upper()

    @tool
    async def join(parts: list) -> str:
        events.append("start join")
        return "+".join(parts)

    return [fetch, join]


REPLY = ('$state.a = fetch(url="a")\n$state.b = fetch(url="b")\n'
         '$state.j = join(parts=[$state.a,$state.b])\nreturn $state.j\n')


def test_after_reply_starts_nothing_before_the_reply_ends_and_agrees_with_streaming():
    events: list = []
    result = Agent(FakeProvider([REPLY], chunk=3, events=events), tools=tools(events), stdlib=False,
                   dispatch="after_reply").run("x")
    assert result.ok, result.turns[0].errors
    assert result.output == "A+B"
    first_start = min(i for i, e in enumerate(events) if e.startswith("start"))
    assert events.index("reply_end") < first_start, events

    streamed: list = []
    same = Agent(FakeProvider([REPLY], chunk=3, events=streamed), tools=tools(streamed), stdlib=False).run("x")
    assert same.ok and same.output == result.output and same.state == result.state
    assert [c["status"] for c in same.turns[0].calls] == [c["status"] for c in result.turns[0].calls]


def test_after_reply_refused_calls_are_recorded_failed_and_the_rest_run():
    events: list = []
    reply = '$state.a = fetch(url="a")\n$state.b = nosuch(x=1)\nreturn $state.a\n'
    result = Agent(FakeProvider([reply, 'return $state.a\n'], events=events), tools=tools(events), stdlib=False,
                   dispatch="after_reply").run("x")
    first = result.turns[0]
    assert [c["status"] for c in first.calls] == ["succeeded", "failed"]
    assert any(e["error"].get("code") == "E201" for e in first.errors)
    assert result.ok and result.output == "A"


def test_default_call_limit_is_at_least_100():
    assert DEFAULT_MAX_CALLS >= 100
    assert Agent(FakeProvider([]), tools=[], stdlib=False).max_calls == DEFAULT_MAX_CALLS
    events: list = []
    reply = "".join(f'$state.f{i} = fetch(url="u{i}")\n' for i in range(40))
    reply += "$state.j = join(parts=[" + ",".join(f"$state.f{i}" for i in range(40)) + "])\nreturn $state.j\n"
    result = Agent(FakeProvider([reply], chunk=50, events=events), tools=tools(events), stdlib=False).run("x")
    assert result.ok, result.turns[0].errors
    assert len(result.turns) == 1 and events.count("start join") == 1


@pytest.mark.parametrize("reply", [
    "".join(f'$state.f{i} = fetch(url="u{i}")\n' for i in range(4)) + "return 1\n",
    '$state.m = map(over=["a","b","c","d"],as=u) {$local.r = fetch(url=$u);return $local.r}\nreturn $state.m\n',
    '$state.m = map($input.urls,as=u) {$local.r = fetch(url=$u);return $local.r}\nreturn $state.m\n',
])
def test_after_reply_plan_over_the_limit_runs_none_of_its_calls(reply):
    events: list = []
    result = Agent(FakeProvider([reply, "return 0\n"], events=events), tools=tools(events), stdlib=False,
                   dispatch="after_reply", max_calls=3).run("x", input={"urls": ["a", "b", "c", "d"]})
    first = result.turns[0]
    assert not [e for e in events if e.startswith("start")], events
    assert all(c["status"] == "failed" for c in first.calls)
    assert any(e["error"].get("code") == "E305" and "none of its calls was started" in e["error"]["message"]
               for e in first.errors), first.errors


def test_lazy_plan_whose_map_is_over_the_limit_runs_nothing():
    events: list = []
    reply = '$state.m = map(over=["a","b","c","d"],as=u) {$local.r = fetch(url=$u);return $local.r}\nreturn $state.m\n'
    result = Agent(FakeProvider([reply], events=events), tools=tools(events), stdlib=False, mode="lazy",
                   approve="yes", max_calls=3, max_turns=1).run("x")
    assert result.turns[0].status == "invalid"
    assert not [e for e in events if e.startswith("start")]


@pytest.mark.parametrize("kwargs,message", [
    ({"dispatch": "later"}, "dispatch must be one of"),
    ({"max_calls": 0}, "max_calls must be a positive integer"),
    ({"max_calls": True}, "max_calls must be a positive integer"),
    ({"run_options": {"max_threads": 0}}, "max_threads must be a positive integer"),
    ({"run_options": {"max_threds": 8}}, "unknown run option"),
])
def test_agent_options_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Agent(FakeProvider([]), tools=[], stdlib=False, **kwargs)


def test_after_reply_runs_the_plan_as_a_whole_plan_runs():
    """Read whole before it runs, a reply keeps the whole plan's semantics: a reader between two
    writers of its path waits for both (streamed, the second writer would be refused: E212)."""
    seen: list = []

    @tool
    async def put(v: int) -> dict:
        await asyncio.sleep(0.001)
        return {"n": v}

    @tool
    def show(x: dict) -> dict:
        seen.append(x)
        return x

    reply = ('$state.a = put(v=1)\n$state.s = show(x=$state.a)\n@after(c1) $state.a &= put(v=2)\n'
             'return $state.s\n')
    result = Agent(FakeProvider([reply, "return $state.s\n"]), tools=[put, show], stdlib=False,
                   dispatch="after_reply").run("x")
    assert result.ok and not result.turns[0].errors, result.turns[0].errors
    assert seen == [{"n": 2}]
    streamed = Agent(FakeProvider([reply, "return $state.s\n"]), tools=[put, show], stdlib=False).run("x")
    assert [e["error"].get("code") for e in streamed.turns[0].errors] == ["E212"]
