"""A streamed reply and the same plan run whole decide the same (issue 10 item 16).

Textual order must not matter: a read whose writer arrives later in the reply waits for it,
as the finished plan's read does.  A read that had a writer when it arrived goes ahead while
the reply streams (issue 30 item 6); a writer of its path arriving after it is refused and
named (E212), from the text alone, so two streams of one reply refuse the same calls.
Hypothesis draws plans over a few shared state paths (readers before, between and after
their writers, initial state holding some of them, failures and branch picks), streams
each as DSL text in random pieces with pauses (so calls end while later ones are still
being written), and compares final state and every call's status with ``arun`` of the
whole plan.  Plans whose outcome depends on timing by the language's own rules (two
writers of overlapping paths that the graph does not order: W301 for ``set``, arrival
order for the other methods) or that do not check are left out.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings, strategies as st

from sophon_dsl.compiler import compile_plan
from sophon_dsl.llm.stream import StreamTurn
from sophon_dsl.model import Call, Literal, OutputMethod, OutputTarget, Param, Plan, Reference
from sophon_dsl.runtime import Branch, arun
from sophon_dsl.runtime.errors import PlanInvalid
from sophon_dsl.syntax.dsl_printer import print_dsl
from sophon_dsl.tools import as_registry, tool

PATHS = [("a",), ("b",), ("a", "x"), ("c",)]


def registry(behaviours: dict, latency: dict):
    async def step(key: str, inp: object = None) -> object:
        await asyncio.sleep(latency.get(key, 0))
        kind, n = behaviours[key]
        if kind == "fail":
            raise RuntimeError(f"{key} failed")
        value = {"v": [key, inp]}
        return Branch(n, value) if kind == "branch" else value

    return as_registry([tool(step, name="step")], stdlib=False)


@st.composite
def plans(draw):
    n = draw(st.integers(2, 6))
    calls, behaviours, latency = [], {}, {}
    for i in range(n):
        key = f"k{i}"
        shape = draw(st.sampled_from(["set", "set", "merge", "branch", "none"]))
        if shape == "branch":
            target = OutputTarget((Reference("state", draw(st.sampled_from(PATHS))),
                                   Reference("state", (f"e{i}",))), "||")
        elif shape == "none":
            target = None
        else:
            method = OutputMethod.SET if shape == "set" else OutputMethod.MERGE
            target = OutputTarget((Reference("state", draw(st.sampled_from(PATHS))),), None, method)
        reads = draw(st.sampled_from(["none", "ref", "ref", "or"]))
        if reads == "none":
            value = Literal(i)
        elif reads == "ref":
            value = Reference("state", draw(st.sampled_from(PATHS)))
        else:
            from sophon_dsl.model import Expression

            value = Expression("||", (Reference("state", draw(st.sampled_from(PATHS))),
                                      Reference("state", draw(st.sampled_from(PATHS)))))
        b = draw(st.sampled_from(["ok", "ok", "ok", "fail", "branch"]))
        behaviours[key] = (b, draw(st.integers(0, 1)) if b == "branch" and shape == "branch" else 0)
        latency[key] = draw(st.sampled_from([0, 0.001, 0.003]))
        calls.append(Call("step", (Param("key", Literal(key)), Param("inp", value)), target))
    # the text order is any order; writers of overlapping paths are ordered by `@after` the
    # earlier one in the text (E304 would refuse a forward name while streaming)
    calls = draw(st.permutations(calls))
    written = [[p.key for p in c.output.paths] if c.output else [] for c in calls]
    for t in range(len(calls)):
        after = tuple(f"c{s + 1}" for s in range(t)
                      if any(a[:len(b)] == b[:len(a)] for a in written[s] for b in written[t]))
        if after:
            calls[t] = replace(calls[t], after=after)
    initial = draw(st.sampled_from([None, {"a": {"x": "old"}}, {"b": "old", "c": {"y": 1}}]))
    return Plan(tuple(calls)), behaviours, latency, initial


def _writers_ordered(compiled) -> bool:
    """Every two calls writing overlapping paths are ordered by the graph (so the whole
    plan's outcome does not depend on timing)."""
    n = len(compiled.calls)
    before = [set(d) for d in compiled.deps]
    for i in compiled.order:  # transitive closure, in topological order
        for d in list(before[i]):
            before[i] |= before[d]
    written = [[p.key for p in c.output.paths] if c.output else [] for c in compiled.calls]
    for i in range(n):
        for j in range(i + 1, n):
            if any(a[:len(b)] == b[:len(a)] for a in written[i] for b in written[j]):
                if i not in before[j] and j not in before[i]:
                    return False
    return True


def _outcome(result) -> tuple:
    def names(v):
        if isinstance(v, dict):
            return {"error": v["error"]} if set(v) == {"error", "cause"} else {k: names(x) for k, x in v.items()}
        if isinstance(v, list):
            return [names(x) for x in v]
        return v

    return names(result.state.get("state")), [(c.id, c.status) for c in result.calls]


async def _streamed(text: str, reg, initial, seed: int, order: str = "any"):
    rng = random.Random(seed)
    turn = StreamTurn(reg, initial={"state": initial} if initial is not None else None, max_calls=None,
                      order=order)
    k = 0
    while k < len(text):
        n = rng.randint(1, 25)
        turn.feed(text[k:k + n])
        k += n
        await asyncio.sleep(rng.choice([0, 0, 0.002]))
    out = await turn.finish()
    return out


async def _whole(plan: Plan, reg, initial):
    return await arun(plan, tools=reg, state=initial)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(plans(), st.integers(0, 10_000))
def test_streamed_and_whole_runs_agree(case, seed):
    plan, behaviours, latency, initial = case
    reg = registry(behaviours, latency)
    compiled = compile_plan(plan, tools=reg)
    assume(compiled.ok and _writers_ordered(compiled))
    try:
        whole = asyncio.run(_whole(plan, reg, initial))
    except PlanInvalid:
        assume(False)
        return
    text = print_dsl(plan)
    streamed = asyncio.run(_streamed(text, reg, initial, seed))
    assert streamed.result is not None
    _same_unless_refused(streamed, whole, text)
    # the calls refused depend on the text alone, not on what ran while it streamed
    again = asyncio.run(_streamed(text, reg, initial, seed + 1))
    assert again.refused == streamed.refused, (again.errors, streamed.errors)
    # written order: the same outcome, unless a call came after a read of its output, which is
    # then refused and named (E212), never a silent difference
    written = asyncio.run(_streamed(text, reg, initial, seed, "written"))
    late = [e for e in written.errors if e["error"].get("code") == "E212"]
    if not late:
        assert not written.refused, written.errors
        assert _outcome(written.result) == _outcome(whole), text
    else:
        assert {e["id"] for e in late} == set(written.refused), written.errors


def _same_unless_refused(streamed, whole, text: str) -> None:
    """The streamed run decides what the whole plan's run does, unless calls were refused as
    late writers (E212), which are then named (never a silent difference)."""
    late = [e for e in streamed.errors if e["error"].get("code") == "E212"]
    if not late:
        assert not streamed.refused, streamed.errors
        assert _outcome(streamed.result) == _outcome(whole), text
    else:
        assert {e["id"] for e in late} == set(streamed.refused), streamed.errors


def test_a_reader_written_before_its_writer_reads_the_writers_value():
    """The seed of the issue: state from an earlier turn holds the path, the writer comes later."""
    seen: list = []

    @tool
    def show(x: str) -> None:
        seen.append(x)

    @tool
    async def make() -> str:
        await asyncio.sleep(0.01)
        return "new"

    async def go():
        turn = StreamTurn(as_registry([show, make], stdlib=False), initial={"state": {"a": "old"}})
        turn.feed("show(x=$state.a)\n")
        await asyncio.sleep(0.02)  # the reader is complete long before its writer arrives
        turn.feed("$state.a = make()\n")
        return await turn.finish()

    out = asyncio.run(go())
    assert out.status == "succeeded"
    assert seen == ["new"]


def test_a_second_writer_after_an_anchored_reader_is_refused():
    """The reader had a writer when it arrived, so it may have run: a later writer of its path
    is refused (E212), whether or not the reader ran yet."""
    seen: list = []

    @tool
    def show(x: dict) -> None:
        seen.append(x)

    @tool
    def put(v: int) -> dict:
        return {"n": v}

    async def go():
        turn = StreamTurn(as_registry([show, put], stdlib=False))
        turn.feed("$state.a = put(v=1)\nshow(x=$state.a)\n")
        await asyncio.sleep(0.02)  # the first writer has ended: the read must still wait
        turn.feed("@after(c1) $state.a &= put(v=2)\n")
        return await turn.finish()

    out = asyncio.run(go())
    assert [e["error"]["code"] for e in out.errors] == ["E212"]
    assert out.refused == ["c3"]
    assert seen == [{"n": 1}], seen


def test_writers_all_before_or_all_after_a_reader_are_waited_for():
    seen: list = []

    @tool
    def show(x: dict) -> None:
        seen.append(x)

    @tool
    async def put(v: int) -> dict:
        await asyncio.sleep(0.005)
        return {"n": v}

    async def go(text: str):
        turn = StreamTurn(as_registry([show, put], stdlib=False))
        turn.feed(text)
        return await turn.finish()

    for text in ("$state.a = put(v=1)\n@after(c1) $state.a &= put(v=2)\nshow(x=$state.a)\n",
                 "show(x=$state.a)\n$state.a = put(v=1)\n@after(c2) $state.a &= put(v=2)\n"):
        seen.clear()
        out = asyncio.run(go(text))
        assert out.status == "succeeded" and not out.errors, out.errors
        assert seen == [{"n": 2}], (text, seen)


def _chain_tools(events: list):
    @tool
    async def fetch(n: int) -> dict:
        events.append(f"fetch {n}")
        await asyncio.sleep(0.005)
        return {"n": n}

    @tool
    def show(x: dict) -> None:
        events.append(f"show {x}")

    return as_registry([fetch, show], stdlib=False)


async def _until_shown(events: list, limit: float = 30.0) -> None:
    """While the reply is still open: until ``show`` ran (a loaded machine may take long;
    the test is about order, not time)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while not any(e.startswith("show") for e in events) and loop.time() < end:
        await asyncio.sleep(0.005)


def test_written_order_decides_reads_while_the_reply_streams():
    events: list = []

    async def go():
        turn = StreamTurn(_chain_tools(events), order="written")
        turn.feed("$state.a = fetch(n=1)\nshow(x=$state.a)\n")
        await _until_shown(events)
        events.append("still streaming")
        return await turn.finish()

    out = asyncio.run(go())
    assert out.status == "succeeded"
    assert events.index("show {'n': 1}") < events.index("still streaming")


def test_any_order_decides_a_read_whose_writer_came_first_while_the_reply_streams():
    events: list = []

    async def go():
        turn = StreamTurn(_chain_tools(events))
        turn.feed("$state.a = fetch(n=1)\nshow(x=$state.a)\n")
        await _until_shown(events)
        events.append("still streaming")
        return await turn.finish()

    out = asyncio.run(go())
    assert out.status == "succeeded"
    assert events == ["fetch 1", "show {'n': 1}", "still streaming"]


def test_any_order_waits_for_the_end_of_the_reply_when_the_reader_came_first():
    events: list = []

    async def go():
        turn = StreamTurn(_chain_tools(events), initial={"state": {"a": {"n": 0}}})
        turn.feed("show(x=$state.a)\n$state.a = fetch(n=1)\n")
        await asyncio.sleep(0.03)
        events.append("still streaming")
        return await turn.finish()

    out = asyncio.run(go())
    assert out.status == "succeeded"
    assert events == ["fetch 1", "still streaming", "show {'n': 1}"]


def test_written_order_refuses_a_writer_that_comes_after_its_reader_ran():
    events: list = []

    async def go():
        turn = StreamTurn(_chain_tools(events), order="written", initial={"state": {"a": {"n": 0}}})
        turn.feed("show(x=$state.a)\n")
        await asyncio.sleep(0.02)
        turn.feed("$state.a = fetch(n=1)\n")
        return await turn.finish()

    out = asyncio.run(go())
    assert [e["error"]["code"] for e in out.errors] == ["E212"]
    assert "c1 already read" in out.errors[0]["error"]["message"]
    assert {c["id"]: c["status"] for c in out.calls} == {"c1": "succeeded", "c2": "failed"}
    assert out.refused == ["c2"]


def test_agent_stream_order_option():
    from sophon_dsl.llm.agent import Agent
    from sophon_dsl.llm.providers.scripted import ScriptedProvider

    reply = "show(x=$state.a)\n$state.a = fetch(n=1)\n\n\n\nreturn 1\n"
    outcomes = {}
    for order in ("any", "written"):
        events: list = []
        provider = ScriptedProvider([reply], chunk_size=4, tokens_per_second=100)
        agent = Agent(provider=provider, tools=_chain_tools(events), max_turns=1, stream_order=order)
        result = agent.run("go", state={"a": {"n": 0}})
        codes = [e["error"].get("code") for t in result.to_json()["turns"] for e in t["errors"]]
        outcomes[order] = (result.status, codes, [e for e in events if e.startswith("show")])
    assert outcomes["any"] == ("succeeded", [], ["show {'n': 1}"])
    assert outcomes["written"] == ("failed", ["E212"], ["show {'n': 0}"])


def test_cli_agent_stream_order_flag(tmp_path, capsys):
    import json as _json

    from sophon_dsl.cli import main

    tools_file = tmp_path / "tools.py"
    tools_file.write_text(
        "import asyncio\nfrom sophon_dsl import tool\n\n"
        "@tool\nasync def fetch(n: int) -> dict:\n    await asyncio.sleep(0.005)\n    return {'n': n}\n\n"
        "@tool\ndef show(x: dict) -> dict:\n    return x\n", encoding="utf-8")
    script = tmp_path / "script.json"
    reply = "$state.seen = show(x=$state.a)\n$state.a = fetch(n=1)\n\n\n\nreturn $state.seen\n"
    script.write_text(_json.dumps([{"reply": reply, "chunk_size": 4, "tokens_per_second": 100}]), encoding="utf-8")
    codes = {}
    for order in ("any", "written"):
        rc = main(["agent", "go", "--provider", f"scripted:{script}", "--tools", str(tools_file), "--no-stdlib",
                   "--state", '{"a": {"n": 0}}', "--max-turns", "1", "--approve", "yes", "--json",
                   "--stream-order", order])
        out = _json.loads(capsys.readouterr().out)
        codes[order] = (rc, out["output"], [e["error"].get("code") for t in out["turns"] for e in t["errors"]])
    assert codes["any"] == (0, {"n": 1}, [])
    assert codes["written"][0] == 1 and codes["written"][2] == ["E212"]


# -- plans with maps (issue 12: a streamed map works like any call) ---------------------------

MAP_PATHS = [*PATHS, ("m0",), ("m1",)]


def _merged(behaviours, latency, *extra):
    """The generator's ``step`` tool (as :func:`registry`) beside ``extra`` tools."""
    async def step(key: str, inp: object = None) -> object:
        await asyncio.sleep(latency.get(key, 0))
        kind, n = behaviours[key]
        if kind == "fail":
            raise RuntimeError(f"{key} failed")
        value = {"v": [key, inp]}
        return Branch(n, value) if kind == "branch" else value

    return as_registry([tool(step, name="step"), *extra], stdlib=False)


def _map_call(draw, m: int):
    from sophon_dsl.maps import make_map_call
    from sophon_dsl.model import ListValue, MapSpec

    over = draw(st.sampled_from([Reference("input", ("items",)), Reference("state", (f"l{m}",)),
                                 ListValue(tuple(Literal(x) for x in range(3)))]))
    fail = ListValue(tuple(Literal(x) for x in draw(st.lists(st.integers(0, 4), max_size=2, unique=True))))
    body = []
    for b in range(draw(st.integers(1, 2))):
        src = Reference("item") if b == 0 else draw(st.sampled_from([Reference("item"),
                                                                      Reference("local", (f"r{b - 1}",))]))
        if draw(st.integers(0, 3)) == 0:  # an outer read: the map waits for its writers too
            src = Reference("state", draw(st.sampled_from(PATHS)))
        catch = draw(st.booleans())
        paths = (Reference("local", (f"r{b}",)), Reference("local", (f"e{b}",))) if catch else \
            (Reference("local", (f"r{b}",)),)
        body.append(Call("work", (Param("v", src), Param("fail", fail)), OutputTarget(paths, "||" if catch else None)))
    tolerate = draw(st.sampled_from([None, 0, 1, 3]))
    spec = MapSpec(over, tuple(body), result=draw(st.sampled_from([None, Reference("local", ("r0",))])),
                   concurrency=draw(st.sampled_from([None, 1, 2])), tolerate=tolerate,
                   tolerate_percent=None if tolerate is not None else draw(st.sampled_from([None, 50.0])))
    target = Reference("state", draw(st.sampled_from([(f"m{m}",), (f"m{m}",), ("c",)])))
    catch = draw(st.booleans())
    out = OutputTarget((target, Reference("state", (f"merr{m}",))), "||") if catch else OutputTarget((target,))
    call = make_map_call(spec, output=out)
    lists = [Call("items", (Param("n", Literal(draw(st.integers(0, 4)))),),
                  OutputTarget((Reference("state", (f"l{m}",)),)))] if over == Reference("state", (f"l{m}",)) else []
    return [*lists, call]


@st.composite
def plans_with_maps(draw):
    calls, behaviours, latency = [], {}, {}
    for m in range(draw(st.integers(1, 2))):
        calls += _map_call(draw, m)
    for i in range(draw(st.integers(0, 3))):
        key = f"k{i}"
        target = draw(st.sampled_from([None, ("a",), ("b",), ("c",)]))
        value = Reference("state", draw(st.sampled_from(MAP_PATHS))) if draw(st.booleans()) else Literal(i)
        behaviours[key] = (draw(st.sampled_from(["ok", "ok", "fail"])), 0)
        latency[key] = draw(st.sampled_from([0, 0.001, 0.003]))
        calls.append(Call("step", (Param("key", Literal(key)), Param("inp", value)),
                          OutputTarget((Reference("state", target),)) if target else None))
    calls = draw(st.permutations(calls))
    written = [[p.key for p in c.output.paths] if c.output else [] for c in calls]
    for t in range(len(calls)):
        after = tuple(f"c{s + 1}" for s in range(t)
                      if any(a[:len(b)] == b[:len(a)] for a in written[s] for b in written[t]))
        if after:
            calls[t] = replace(calls[t], after=after)
    items = draw(st.lists(st.integers(0, 4), max_size=4))
    initial = draw(st.sampled_from([None, {"a": {"x": "old"}}]))
    return Plan(tuple(calls)), behaviours, latency, initial, {"items": items}


def _map_outcome(result) -> tuple:
    """State, the plan's own calls' statuses, and the statuses of the item calls (a failing
    map stops starting items: which were already in flight depends on timing)."""
    state, calls = _outcome(result)
    return state, sorted((cid, s) for cid, s in calls if "[" not in cid), dict(calls)


def _agree(streamed, whole, text: str) -> None:
    s_state, s_top, s_items = _map_outcome(streamed)
    w_state, w_top, w_items = _map_outcome(whole)
    assert (s_state, s_top) == (w_state, w_top), text
    for cid in s_items.keys() & w_items.keys():
        assert s_items[cid] == w_items[cid], (cid, text)


async def _streamed_maps(text: str, reg, initial, data, seed: int, order: str = "any"):
    rng = random.Random(seed)
    turn = StreamTurn(reg, input=data, initial={"state": initial} if initial is not None else None,
                      max_calls=None, order=order)
    k = 0
    while k < len(text):
        n = rng.randint(1, 40)
        turn.feed(text[k:k + n])
        k += n
        await asyncio.sleep(rng.choice([0, 0, 0.002]))
    return await turn.finish()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(plans_with_maps(), st.integers(0, 10_000))
def test_streamed_maps_agree_with_whole_runs(case, seed):
    """DSL and JSON replies with maps, streamed in random pieces, decide what the whole plan
    decides (in either order, unless a late writer is refused, E212)."""
    from sophon_dsl.loader import dumps

    plan, behaviours, latency, initial, data = case
    reg = _merged(behaviours, latency, *_map_tools(latency))
    compiled = compile_plan(plan, tools=reg)
    assume(compiled.ok and _writers_ordered(compiled))
    try:
        whole = asyncio.run(arun(plan, tools=reg, state=initial, input=data))
    except PlanInvalid:
        assume(False)
        return
    refused = {}
    for form in ("dsl", "json"):
        text = dumps(plan, form)
        streamed = asyncio.run(_streamed_maps(text, reg, initial, data, seed))
        assert streamed.result is not None, (form, streamed.errors)
        late = [e for e in streamed.errors if e["error"].get("code") == "E212"]
        if not late:
            assert not streamed.refused, (form, streamed.errors)
            _agree(streamed.result, whole, text)
        else:
            assert {e["id"] for e in late} == set(streamed.refused), streamed.errors
        refused[form] = streamed.refused
    assert refused["dsl"] == refused["json"], refused   # (the text decides, in either form)
    text = print_dsl(plan)
    written = asyncio.run(_streamed_maps(text, reg, initial, data, seed, "written"))
    late = [e for e in written.errors if e["error"].get("code") == "E212"]
    if not late:
        assert not written.refused, written.errors
        _agree(written.result, whole, text)
    else:
        assert {e["id"] for e in late} == set(written.refused), written.errors


def _map_tools(latency: dict):
    @tool(name="items")
    async def items(n: int) -> list:
        await asyncio.sleep(0.002)
        return list(range(n))

    @tool(name="work")
    async def work(v: object = None, fail: list = ()) -> dict:
        await asyncio.sleep(0.001 if isinstance(v, int) and v % 2 else 0)
        if v in fail:
            raise RuntimeError("boom")  # one message for every item: a map's error is the same
        return {"v": v}

    return [items, work]
