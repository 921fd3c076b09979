"""The call gate's matrix, continued (issue 24): time, memory and executor preflight against
each origin of a call, each cell a real run.  (Approval, taint and budget are in
test_gate_matrix.py.)

Outcomes are asserted, not durations: a run past ``max_time`` ends with ``Plan.Timeout``,
one past ``max_memory`` with ``Plan.MemoryExceeded``, a tool no Dask worker can run is
refused before anything starts (E705).  Each run goes through a worker thread joined with
a generous limit (a hang guard): a run that never ends fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from sophon_dsl import Agent, GoalRunner, run, tool
from sophon_dsl.llm.agent import AgentResult
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.runtime.errors import PlanInvalid
from sophon_dsl.tools import as_registry

from hang_guard import finishes

ORIGINS = ["top", "map", "nested", "latent", "agent", "goal", "resumed", "dask"]
HOLD: list[bytes] = []


@tool(name="stall", idempotent=True)
def stall(x: int = 0) -> int:
    """A sync tool that does not return for a long time (its thread is abandoned)."""
    time.sleep(30)
    return x


GROW_CAP = 40  # x 16 MiB: far past the 200 MiB budget, and an end for a copy nobody stops (a Dask worker's)


@tool(name="grow", idempotent=True)
async def grow(x: int = 0) -> int:
    """Grows the process by 16 MiB every few milliseconds, up to 640 MiB."""
    for _ in range(GROW_CAP):
        HOLD.append(bytearray(16 << 20))
        await asyncio.sleep(0.005)
    return x


@tool(name="gpu_only", resources={"GPU": 8}, idempotent=True)
def gpu_only(x: int = 0) -> int:
    """Needs 8 GPUs: no worker of the test cluster offers them."""
    return x


@tool(name="touch", idempotent=True)
def touch(x: int = 0) -> int:
    return x


TOOLS = [stall, grow, gpu_only, touch]
SNIPPET = {"time": "stall", "memory": "grow", "preflight": "gpu_only"}
LATENT_DECL = ('tool {name} = {{"description": "a model call", "input": {{"type": "object", "properties": '
               '{{"x": {{"type": "integer"}}}}}}, "output": {{"type": "integer"}}}}\n')


def body(row: str, o: str) -> str:
    return f"${o}.v = {SNIPPET[row]}(x=1)"


def wrap(origin: str, row: str) -> str:
    if origin == "map":
        return "$state.w = map(over=[1], as=w) {\n" + body(row, "local") + "\n}\n"
    if origin == "nested":
        return "$state.w = map(over=[1], as=w) {\n  $local.v = map(over=[1], as=v) {\n" + body(row, "local") + \
            "\n  }\n}\n"
    return body(row, "state") + "\n"


class StallingExecutor:
    """Runs latent calls as the Python tools would (a model that never answers, one that
    fills memory)."""

    async def execute(self, request: Any) -> Any:
        if request.call.tool == "latent_stall":
            await asyncio.to_thread(time.sleep, 30)
        return await grow.func(x=1)


@pytest.fixture(autouse=True)
def release_memory():
    yield
    HOLD.clear()


@pytest.fixture(scope="module")
def dask_address():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0")
    yield cluster.scheduler_address
    cluster.close()


def _executor(address: str):
    from sophon_dsl.scaleout import DaskExecutor

    return DaskExecutor(address)


def cell(origin: str, row: str, tmp_path, options: dict, address: str | None) -> Any:
    """Run the row's tool from ``origin``; the run's error code (or the refusal's codes)."""
    try:
        if origin in ("top", "map", "nested"):
            return _code(run(wrap(origin, row), tools=TOOLS, approve=True, **options))
        if origin == "dask":
            return _code(run(wrap("map", row), tools=TOOLS, approve=True, tool_executor=_executor(address),
                             **options))
        if origin == "latent":
            name = {"time": "latent_stall", "memory": "latent_grow"}[row]
            plan = LATENT_DECL.format(name=name) + f"$state.v = {name}(x=1)\n"
            return _code(run(plan, tools=as_registry(TOOLS, stdlib=False), approve=True,
                             executor=StallingExecutor(), **options))
        if origin == "agent":
            reply = wrap("top", row) + 'return "done"\n'
            result = Agent(ScriptedProvider([reply], cycle=False), TOOLS, stdlib=False, approve="yes", max_turns=1,
                           run_options=options).run("go")
            return _turn_codes(result)
        if origin == "goal":
            steps = [{"task": f"Step {k} [s{k}]", "success_criterion": f"step {k} is done", "expected_findings": [],
                      "depends_on": []} for k in (1, 2, 3)]
            planner = ScriptedProvider(keyed=[KeyedReply("Goal:", json.dumps({"steps": steps}))])
            sub = ScriptedProvider(keyed=[KeyedReply(r"Request: .*\[s1\]", wrap("top", row) + 'return "done"\n'),
                                          KeyedReply(r"Request: ", 'return "nothing to do"')])
            evaluator = ScriptedProvider(keyed=[KeyedReply("Task:", json.dumps(
                {"verdict": "pass", "confidence": 0.9, "note": "ok", "facts": {}}))])
            events: list = []  # (a step's sub-agent reports through the agent's on_event)
            agent = Agent(sub, TOOLS, stdlib=False, approve="yes", max_turns=1, run_options=options,
                          on_event=events.append)
            GoalRunner(agent, planner_provider=planner, evaluator_provider=evaluator).run("the goal")
            return _event_codes(events)
        if origin == "resumed":
            from sophon_dsl.durable.resume import resume

            store = f"sqlite:///{tmp_path}/runs.sqlite3"
            plan = "@risk(medium) $state.first = touch(x=99)\n" + wrap("top", row)
            first = run(plan, tools=TOOLS, approve="wait", store=store)
            assert first.status == "waiting"
            return _code(resume(first.run_id, store, TOOLS, approve=True, **options))
    except PlanInvalid as exc:
        return sorted(d.code for d in exc.diagnostics)
    raise AssertionError(origin)


def _code(result: Any) -> str | None:
    return result.error.error if result.error is not None else None


def _turn_codes(result: Any) -> set[str]:
    out = set()
    for turn in result.turns:
        for call in turn.calls:
            err = call.get("error") if isinstance(call, dict) else getattr(call, "error", None)
            if err:
                out.add(err["error"] if isinstance(err, dict) else err.error)
        for err in turn.errors:  # what the model is told: refused calls, a refused turn
            e = err.get("error") if isinstance(err, dict) else None
            if isinstance(e, dict):
                out.add(e.get("code") or e.get("error"))
    return out


def _event_codes(events: list) -> set[str]:
    out = set()
    for ev in events:
        err = ev.get("error") if isinstance(ev, dict) else getattr(ev, "error", None)
        if isinstance(err, dict) and "error" in err:
            out.add(err["error"])
        data = ev.get("data") if isinstance(ev, dict) else getattr(ev, "data", None)
        if isinstance(data, AgentResult):  # a step's sub-agent: its turns' errors
            out |= _turn_codes(data)
    return out


@pytest.mark.parametrize("origin", ORIGINS)
def test_time_every_run_ends_at_max_time(origin, tmp_path, request):
    address = request.getfixturevalue("dask_address") if origin == "dask" else None
    code = finishes(lambda: cell(origin, "time", tmp_path, {"max_time": 1}, address), 90, "the run never ended")
    assert code == "Plan.Timeout" or (isinstance(code, set) and "Plan.Timeout" in code), (origin, code)


@pytest.mark.parametrize("origin", ORIGINS)
def test_memory_every_run_stays_within_max_memory(origin, tmp_path, request):
    address = request.getfixturevalue("dask_address") if origin == "dask" else None
    options = {"max_memory": 200 << 20, "max_time": 60}
    code = finishes(lambda: cell(origin, "memory", tmp_path, options, address), 90, "the run never ended")
    assert code == "Plan.MemoryExceeded" or (isinstance(code, set) and "Plan.MemoryExceeded" in code), (origin, code)


@pytest.mark.parametrize("origin", ["top", "map", "nested", "resumed"])
def test_preflight_a_tool_no_worker_can_run_is_refused_before_anything_starts(origin, tmp_path, dask_address):
    options = {"tool_executor": _executor(dask_address)}
    if origin == "resumed":
        from sophon_dsl.durable.resume import resume

        store = f"sqlite:///{tmp_path}/runs.sqlite3"
        first = run("@risk(medium) $state.first = touch(x=99)\n" + wrap("top", "preflight"), tools=TOOLS,
                    approve="wait", store=store)
        with pytest.raises(PlanInvalid) as refused:
            resume(first.run_id, store, TOOLS, approve=True, **options)
        codes = sorted(d.code for d in refused.value.diagnostics)
    else:
        codes = cell(origin, "preflight", tmp_path, options, dask_address)
    assert codes == ["E705"], (origin, codes)


@pytest.mark.parametrize("origin", ["agent", "goal"])
def test_preflight_refuses_an_agents_call_before_it_runs(origin, tmp_path, dask_address):
    """An agent's turn is refused by the preflight like a plan (nothing starts), and the
    model hears why (E705 among the turn's errors) instead of the agent stopping on an
    exception."""
    options = {"tool_executor": _executor(dask_address)}
    codes = cell(origin, "preflight", tmp_path, options, dask_address)
    assert "E705" in codes, (origin, codes)


def test_a_flat_map_of_many_items_stops_at_max_time():
    @tool(name="numbers")
    def numbers(n: int) -> list[int]:
        return list(range(n))

    plan = "$state.xs = numbers(n=300000)\n$state.r = map($state.xs, as=x) { $local.t = touch(x=$x) }\n"
    result = finishes(lambda: run(plan, tools=[numbers, touch], max_time=1, max_expanded_calls=1_000_000), 120,
                      "the run never ended")
    assert result.error is not None and result.error.error == "Plan.Timeout"
