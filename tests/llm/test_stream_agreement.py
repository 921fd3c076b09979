"""A streamed reply and the same plan run whole decide the same (issue 10 item 16).

Textual order must not matter: a read whose writer arrives later in the reply (or a
second writer of a path already written) waits for it, as the finished plan's read does.
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
    assert streamed.result is not None and not streamed.refused, streamed.errors
    assert _outcome(streamed.result) == _outcome(whole), text
    # written order: the same outcome, unless a call came after a read of its output, which is
    # then refused and named (E212), never a silent difference
    written = asyncio.run(_streamed(text, reg, initial, seed, "written"))
    late = [e for e in written.errors if e["error"].get("code") == "E212"]
    if not late:
        assert not written.refused, written.errors
        assert _outcome(written.result) == _outcome(whole), text
    else:
        assert {e["id"] for e in late} == set(written.refused), written.errors


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


def test_a_second_writer_later_in_the_reply_is_waited_for():
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
    assert out.status == "succeeded"
    assert seen == [{"n": 2}], seen


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


def test_written_order_decides_reads_while_the_reply_streams():
    events: list = []

    async def go():
        turn = StreamTurn(_chain_tools(events), order="written")
        turn.feed("$state.a = fetch(n=1)\nshow(x=$state.a)\n")
        await asyncio.sleep(0.03)
        events.append("still streaming")
        return await turn.finish()

    out = asyncio.run(go())
    assert out.status == "succeeded"
    assert events.index("show {'n': 1}") < events.index("still streaming")


def test_any_order_waits_for_the_end_of_the_reply():
    events: list = []

    async def go():
        turn = StreamTurn(_chain_tools(events))
        turn.feed("$state.a = fetch(n=1)\nshow(x=$state.a)\n")
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
