"""The pipeline's five safety guards, each at its seed 002 threshold, offline."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest

from sophon_dsl.cli import main
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.prompt import build_messages
from sophon_dsl.llm.provider import Message
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.planning.budget import Budget, BudgetExceeded, BudgetLimit, estimate_tokens
from sophon_dsl.planning.context import ContextWindow
from sophon_dsl.planning.guards import Guards
from sophon_dsl.planning.limits import HARD_LIMIT
from sophon_dsl.planning.loops import LoopDetector
from sophon_dsl.planning.toolfilter import filter_tools
from sophon_dsl.planning.truncate import truncate_json
from sophon_dsl.tools import ToolSpec, tool


@tool(name="web.search", risk="low", description="Search the web")
async def search(query: str) -> list:
    return [{"title": query}]


def keyed(*replies, **kw):
    return ScriptedProvider(keyed=[KeyedReply(p, r) for p, r in replies], **kw)


# -- truncation ---------------------------------------------------------------------------

@pytest.mark.parametrize("value, marker", [
    (list(range(5000)), "[...truncated, showing 1812/5000 items]"),
    ([{"t": 'é"' * 100} for _ in range(200)], "items]"),
    ({f"k{i}": i for i in range(3000)}, '"…truncated":"showing 742/3000 keys"'),
    ({"a": "x" * 20000, "b": [1] * 3000}, "more characters]"),
    ("word " * 5000, "more characters]"),
    ([[[list(range(4000))]]], "items]"),
])
def test_truncation_is_valid_json_within_8000_characters_saying_what_was_left_out(value, marker):
    text = truncate_json(value)
    json.loads(text)
    assert len(text) <= 8000
    assert marker in text


def test_small_values_are_untouched_and_text_is_cut_at_a_word():
    assert truncate_json({"a": [1, 2]}) == '{"a":[1,2]}'
    cut = json.loads(truncate_json("alpha " * 3000))
    assert cut.split("…")[0].endswith("alpha")


def test_the_prompt_feeds_state_back_truncated_json_aware():
    state = {"state": {"rows": [{"id": i, "text": "row text"} for i in range(2000)]}}
    ctx = build_messages("x", tools=[], state=state)[1].content
    line = next(x for x in ctx.splitlines() if x.startswith("State ($state): "))
    shown = json.loads(line.removeprefix("State ($state): "))
    assert shown["rows"][-1].startswith("[...truncated, showing ")
    assert len(line) < 8100


# -- tool filter --------------------------------------------------------------------------

def _spec(name, description=""):
    return ToolSpec(name, description, {"type": "object", "properties": {}}, None)


def test_tool_filter_top_ten_by_tag_and_keyword_with_always_on_tools():
    specs = [_spec(f"misc.t{i}", "does nothing") for i in range(12)]
    specs += [_spec("mail.send", "send an email"), _spec("web.fetch", "download a page from the web"),
              _spec("datetime.now", "the time"), _spec("memory.search", "recall")]
    chosen = [s.name for s in filter_tools(specs, "send the web page by mail")]
    assert len(chosen) == 10
    assert {"datetime.now", "memory.search", "mail.send", "web.fetch"} <= set(chosen)
    assert filter_tools(specs[:10], "anything") == specs[:10]          # ten or fewer: all


def test_agent_prompt_offers_at_most_ten_tools():
    tools = [search] + [_spec(f"misc.t{i}", "does nothing") for i in range(14)]
    provider = keyed(("Request: ", "return 1"))
    Agent(provider, tools=tools, stdlib=False).run("search the web")
    system = provider.calls[0]["messages"][0].content
    listed = [x for x in system.split("\nTools:\n", 1)[1].splitlines() if "->" in x]
    assert len(listed) == 10 and any(x.startswith("web.search(") for x in listed)


def _listed(provider):
    system = provider.calls[0]["messages"][0].content
    return [x.split("(", 1)[0] for x in system.split("\nTools:\n", 1)[1].splitlines() if "->" in x]


def test_agent_keeps_the_standard_always_on_tools_next_to_the_top_scored_own_tools():
    # the prompt lists the caller's own tools; the seed's always-on tools come from the
    # standard library and are offered with them, the ten best own tools filling the rest
    tools = [search] + [_spec(f"misc.t{i}", "does nothing") for i in range(14)]
    provider = keyed(("Request: ", "return 1"))
    Agent(provider, tools=tools).run("search the web")
    listed = _listed(provider)
    assert len(listed) == 10
    assert {"datetime.now", "memory.search", "web.search"} <= set(listed)
    provider = keyed(("Request: ", "return 1"))          # a few own tools: all of them, plus the two
    Agent(provider, tools=[search]).run("search the web")
    assert sorted(_listed(provider)) == ["datetime.now", "memory.search", "web.search"]


def test_always_on_lists_the_callers_own_pinned_tools_and_off_means_the_seeds_are_not_added():
    tools = [search] + [_spec(f"misc.t{i}", "does nothing") for i in range(14)]
    provider = keyed(("Request: ", "return 1"))
    Agent(provider, tools=tools, guards=Guards(always_on=("misc.t13", "datetime.now"))).run("search the web")
    listed = _listed(provider)
    assert len(listed) == 10 and {"misc.t13", "datetime.now", "web.search"} <= set(listed)
    assert "memory.search" not in listed
    provider = keyed(("Request: ", "return 1"))
    Agent(provider, tools=[search], guards=Guards(always_on=())).run("search the web")
    assert _listed(provider) == ["web.search"]
    provider = keyed(("Request: ", "return 1"))          # no filter: the caller's tools as given
    Agent(provider, tools=[search], guards=Guards(tool_filter=False)).run("search the web")
    assert _listed(provider) == ["web.search"]


# -- loop detector -----------------------------------------------------------------------

def test_generic_repeat_thresholds_10_20_30():
    d = LoopDetector()
    d.observe([("f", "a=1")] * 9 + [("g", str(i)) for i in range(10)])
    assert d.check() == ([], None)
    d.observe([("f", "a=1"), ("h", "1"), ("h", "2")])
    tell, stop = d.check()
    assert [(f.pattern, f.severity, f.count) for f in tell] == [("generic_repeat", "warn", 10)]
    d = LoopDetector()
    d.observe([x for i in range(10) for x in (("f", "a=1"), ("f", "a=1"), ("g", str(i)))])
    tell, stop = d.check()
    assert stop is None and tell[0].severity == "stop" and tell[0].code == "Loop.Detected"
    d.observe([("f", "a=1")])
    assert d.check()[1].pattern == "generic_repeat"            # told before: now it ends
    d = LoopDetector()
    d.observe([("f", "a=1")] * 30)
    tell, stop = d.check()
    assert stop is not None and stop.severity == "hard"        # circuit breaker: at once


def test_poll_no_progress_3_5_and_ping_pong():
    d = LoopDetector()
    d.observe([("poll", "id=1")] * 2)
    assert d.check() == ([], None)
    d.observe([("poll", "id=1")])
    assert [(f.pattern, f.severity) for f in d.check()[0]] == [("poll_no_progress", "warn")]
    d.observe([("poll", "id=1")] * 2)
    tell, stop = d.check()
    assert stop is None and ("poll_no_progress", "stop") in [(f.pattern, f.severity) for f in tell]
    d = LoopDetector()
    d.observe([("a", ""), ("b", "")] * 3)
    assert [f.pattern for f in d.check()[0]] == ["ping_pong"]


def test_agent_tells_the_model_then_stops_with_loop_detected():
    provider = keyed(("Request: ", '$state.x = web.search(query="same")\n'))
    result = Agent(provider, tools=[search], stdlib=False, max_turns=20).run("poll")
    assert result.status == "failed" and result.error.startswith("Loop.Detected: poll_no_progress")
    assert len(result.turns) == 6            # warned after 3 and 4, told the stop after 5, ended after 6
    contexts = [c["messages"][1].content for c in provider.calls]
    assert "Loop.Warning poll_no_progress" in contexts[3]
    assert "Loop.Detected poll_no_progress" in contexts[5] and "the next repeat ends the run" in contexts[5]


# -- iteration limits ----------------------------------------------------------------------

def test_iteration_hard_limit_and_progress_every_ten_turns(capsys):
    provider = keyed(("Request: ", [f'$state.v{i} = web.search(query="q{i}")\n' for i in range(30)]))
    events = []
    result = Agent(provider, tools=[search], stdlib=False, max_turns=25,
                   on_event=events.append).run("go on")
    assert result.status == "failed" and len(result.turns) == 25
    progress = [e.data["turn"] for e in events if e.type == "agent_progress"]
    assert progress == [10, 20]
    with pytest.raises(ValueError, match="at most 500"):
        Agent(provider, tools=[search], max_turns=HARD_LIMIT + 1)
    Agent(provider, tools=[search], max_turns=HARD_LIMIT)
    assert main(["agent", "x", "--provider", "scripted:none.yaml", "--max-turns", "501"]) == 2
    assert "at most 500" in capsys.readouterr().err


# -- budget ----------------------------------------------------------------------------------

def test_budget_refuses_before_sending_and_reports_usage():
    provider = keyed(("Request: ", '$state.a = web.search(query="x")\n'))
    budget = Budget([BudgetLimit(daily_tokens=3000)])
    # (a request counts as its prompt plus max_tokens: the default 4096 alone is over 3000)
    agent = Agent(provider, tools=[search], stdlib=False, max_turns=5, guards=Guards(budget=budget),
                  max_tokens=1024)
    result = agent.run("search")
    sent = len(provider.calls)
    assert result.status == "failed" and "Budget.Exceeded" in result.error
    assert result.provider_error["code"] == "Budget.Exceeded"
    usage = result.to_json()["usage"]
    assert usage["requests"] == sent          # the refused request was never sent nor counted
    assert sent >= 1 and usage["input_tokens"] + usage["output_tokens"] <= 3000


def test_budget_daily_and_monthly_cost_per_model():
    day = [dt.date(2026, 3, 30)]
    budget = Budget([BudgetLimit(model="big", monthly_cost=0.05), BudgetLimit(provider="p", daily_tokens=500)],
                    prices={"big": (0.01, 0.02)}, today=lambda: day[0])
    budget.check("p", "big", 100, 100)
    budget.record("p", "big", 100, 100)          # 200 tokens; cost 0.003
    budget.check("p", "big", 200, 100)           # 500: at the limit, not over it
    with pytest.raises(BudgetExceeded, match="daily tokens"):
        budget.check("p", "big", 201, 100)
    day[0] = dt.date(2026, 3, 31)                # a new day: the daily limit is fresh
    budget.check("p", "big", 201, 100)
    budget.record("q", "big", 1500, 1500)        # another provider, same model: 0.045 this month
    with pytest.raises(BudgetExceeded, match="monthly cost") as info:
        budget.check("p", "big", 100, 100)
    assert info.value.retryable is False and info.value.to_json()["limit"]["period"] == "monthly"
    day[0] = dt.date(2026, 4, 1)
    budget.check("p", "big", 100, 100)           # a new month
    assert estimate_tokens("abcdefgh") == 2


# -- context window -------------------------------------------------------------------------

def _conversation(n=10, size=400):
    return [Message("system", "sys")] + [Message("user" if i % 2 else "assistant", f"m{i} " + "x" * size)
                                          for i in range(n)]


def test_context_window_compacts_the_oldest_60_percent_with_a_summary():
    summarizer = keyed(("Summarise this conversation", "facts so far"))
    window = ContextWindow(1000, summarizer=summarizer)
    msgs = _conversation()                       # ~1,000 tokens: above 80 % of 1,000
    out = asyncio.run(window.fit(msgs))
    assert out[0].content == "sys" and out[-1] == msgs[-1]
    assert out[1].content == "(Summary of 5 earlier messages) facts so far"   # 60 % of the 9 before the last
    assert out[2:] == msgs[6:]
    assert window.actions[0]["action"] == "compacted"
    asked = summarizer.calls[0]
    assert asked["temperature"] == 0.0 and "m0 " in asked["messages"][1].content
    small = _conversation(3, 100)
    assert asyncio.run(window.fit(small)) == small


def test_context_window_truncates_to_70_percent_when_the_summary_times_out():
    class Slow:
        name = "slow"

        async def stream(self, messages, **kw):
            await asyncio.sleep(5)
            yield "late"

    window = ContextWindow(1000, summarizer=Slow(), timeout=0.05)
    msgs = _conversation()
    out = asyncio.run(window.fit(msgs))
    assert sum(estimate_tokens(m.content) for m in out) <= 700
    assert out[0].content == "sys" and out[-1] == msgs[-1]
    assert "earlier messages were left out" in out[1].content
    assert window.actions[0]["action"] == "truncated" and "0.05 s" in window.actions[0]["reason"]


def test_agent_context_window_keeps_the_request_within_the_window():
    provider = keyed(("Request: ", "return 1"))
    big = {"rows": ["y" * 7000 for _ in range(6)]}
    guards = Guards(context_window=ContextWindow(2000))      # no summarizer: truncate
    result = Agent(provider, tools=[search], stdlib=False, guards=guards).run("sum", state=big)
    assert result.ok
    sent = provider.calls[0]["messages"]
    assert sum(estimate_tokens(m.content) for m in sent) <= 1400
    assert sent[1].content.startswith("Request: sum") and "left out to fit the context window" in sent[1].content


def test_the_seeds_iteration_limit_is_the_default_under_planning():
    provider = keyed(("Request: ", "return 1"))
    assert Agent(provider, tools=[search], stdlib=False).max_turns == 8             # a plain agent, as before
    assert Agent(provider, tools=[search], stdlib=False, planning="never").max_turns == 100   # MaxToolIterations
    assert Agent(provider, tools=[search], stdlib=False, planning="auto", max_turns=3).max_turns == 3
    # a model that never gives a final output under planning stops at the 100th turn
    endless = keyed(("Request: ", [f'$state.v{i} = web.search(query="q{i}")\n' for i in range(120)]))
    result = Agent(endless, tools=[search], stdlib=False, planning="never").run("go on")
    assert result.status == "failed" and len(result.turns) == 100


# -- context compaction inside the agent loop (issue 26 item 7) ---------------------------

def test_long_session_is_summarised_once_and_later_turns_carry_the_summary():
    # each turn writes a long comment (the conversation grows) and one call; the tenth returns
    filler = "# " + "notes " * 300 + "\n"
    turns = [f'{filler}$state.v{i} = web.search(query="q{i}")\n' for i in range(9)] + ["return 1\n"]

    def provider():
        return keyed(("Summarise this conversation", "EARLIER: v0..v3 searched"), ("Request: ", turns))

    first = provider()
    Agent(first, tools=[search], stdlib=False, max_turns=1).run("search ten times")
    base = sum(estimate_tokens(m.content) for m in first.calls[0]["messages"])
    per_turn = estimate_tokens(turns[0]) + 40
    p = provider()   # (a window given as a size summarises with the agent's own provider)
    agent = Agent(p, tools=[search], stdlib=False, max_turns=12,
                  guards=Guards(context_window=int((base + 4.5 * per_turn) / 0.8)))
    window = agent.guards.context_window
    result = agent.run("search ten times")
    assert result.status == "succeeded" and len(result.turns) == 10
    asks = [i for i, c in enumerate(p.calls) if "Summarise this conversation" in c["messages"][0].content]
    assert asks, "no summary was asked for"
    first_ask = asks[0]
    summarised = p.calls[first_ask]["messages"][1].content
    assert "Turn 1: succeeded" in summarised                      # the oldest turns went into it
    after = [m.content for m in p.calls[first_ask + 1]["messages"]]
    assert any(t.startswith("(Summary of ") and "EARLIER: v0..v3 searched" in t for t in after)
    assert not any("Turn 1: succeeded" in t for t in after)       # replaced by the summary
    # the turn after that carries the same summary without asking again (until it grows past 80 %)
    nxt = p.calls[first_ask + 2]
    if "Summarise this conversation" not in nxt["messages"][0].content:
        assert any("EARLIER: v0..v3 searched" in m.content for m in nxt["messages"])
    assert any(a["action"] == "compacted" for a in window.actions)
    assert p.calls[0]["messages"][0].content.startswith(first.calls[0]["messages"][0].content[:200])
