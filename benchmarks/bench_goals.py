"""Goal-loop overhead (issue 16): what the goal loop adds per step beyond model time.

With zero-latency scripted providers every millisecond is our own. Side by side, in one
process, best of ``--runs``:
    agent      one sub-agent run per step (Agent.arun with the same one-turn reply): the
               cost of the agent loop itself, which a goal step pays too
    goal       GoalRunner on a goal of N steps (a planner request, N sub-agent runs, N
               evaluator requests, the steps run as one plan by the runtime)
    overhead   (goal - N x agent) / N: planning, plan building and checking, the runtime,
               the evaluator's request and parsing, facts. Target <= 5 ms per step.

Run: python benchmarks/bench_goals.py [--steps 10] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from sophon_dsl import Agent, GoalRunner, tool
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider


@tool
def noop(x: str = "") -> str:
    """Does nothing."""
    return x


def _plan(n: int) -> str:
    # half the steps independent, half depending on the step before: a mixed shape
    steps = [{"task": f"Job number {i} [k{i}]", "success_criterion": f"job {i} is done", "expected_findings": [f"f{i}"],
              "depends_on": [i] if i % 2 else []} for i in range(n)]
    return json.dumps({"steps": steps})


def _providers(n: int):
    big = 10_000_000   # chunk size: the whole reply in one delta
    planner = ScriptedProvider(keyed=[KeyedReply("Goal:", {"reply": _plan(n), "chunk_size": big})])
    sub = ScriptedProvider(keyed=[KeyedReply("Request:", {"reply": 'return {"ok": true}', "chunk_size": big})])
    verdict = {"verdict": "pass", "confidence": 1, "note": "ok", "facts": {}}
    evaluator = ScriptedProvider(keyed=[KeyedReply("Task:", {"reply": json.dumps(verdict), "chunk_size": big})])
    return planner, sub, evaluator


async def _agent_runs(n: int) -> float:
    _, sub, _ = _providers(n)
    agent = Agent(sub, [noop], stdlib=False, max_turns=4)
    t = time.perf_counter()
    for i in range(n):
        await agent.arun(f"Job number {i}", input={"facts": {}, "inputs": {}})
    return time.perf_counter() - t


async def _goal_run(n: int) -> float:
    planner, sub, evaluator = _providers(n)
    runner = GoalRunner(Agent(sub, [noop], stdlib=False), planner_provider=planner, evaluator_provider=evaluator,
                        max_goal_steps=n)
    t = time.perf_counter()
    result = await runner.arun("bench")
    elapsed = time.perf_counter() - t
    assert result.ok and result.steps_run == n, result.to_json()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    n = args.steps
    asyncio.run(_goal_run(n))     # warm-up: imports, the DSL parser, the checker
    agent = goal = float("inf")
    for _ in range(args.runs):     # alternate, so both see the same machine load
        agent = min(agent, asyncio.run(_agent_runs(n)))
        goal = min(goal, asyncio.run(_goal_run(n)))
    overhead = (goal - agent) / n
    print(f"{n} steps, best of {args.runs}")
    print(f"  agent alone   {agent / n * 1e3:7.2f} ms per step")
    print(f"  goal loop     {goal / n * 1e3:7.2f} ms per step")
    print(f"  overhead      {overhead * 1e3:7.2f} ms per step   (target <= 5 ms: "
          f"{'met' if overhead <= 0.005 else 'missed'})")


if __name__ == "__main__":
    main()
