"""A goal run as one trace (issue 29 item 1): the goal's root span, its plan's run, a span per
step (the step's ``goal.step`` call, with its verdict) that is the parent of the step's
sub-agent run, whose turns are the parents of their calls; the planner's and the
evaluator's requests as GenAI spans inside the goal."""

from __future__ import annotations

import json

from sophon_dsl import Agent, GoalRunner, tool
from sophon_dsl.goals import GoalStatus
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider

from .conftest import by_name


def _keyed(*pairs):
    return ScriptedProvider(keyed=[KeyedReply(p, r) for p, r in pairs])


def _step(task, criterion, depends_on=()):
    return {"task": task, "success_criterion": criterion, "expected_findings": [], "depends_on": list(depends_on)}


def test_goal_steps_are_spans_and_the_parents_of_their_calls(spans):
    @tool
    def lookup(q: str) -> str:
        """Looks something up."""
        return "found " + q

    planner = _keyed((r"Goal:", json.dumps({"steps": [_step("Look up alpha [alpha]", "alpha found"),
                                                     _step("Look up beta [beta]", "beta found", [1]),
                                                     _step("Look up gamma [gamma]", "gamma found")]})))
    sub = _keyed((r"Request: .*\[alpha\]", '†state.a = lookup(q="alpha")\nreturn †state.a'),
                 (r"Request: .*\[beta\]", '†state.b = lookup(q="beta")\nreturn †state.b'),
                 (r"Request: .*\[gamma\]", '†state.c = lookup(q="gamma")\nreturn †state.c'))
    evaluator = _keyed((r"Task: .*", json.dumps({"verdict": "pass", "confidence": 0.9, "note": "ok", "facts": {}})))
    agent = Agent(sub, [lookup], stdlib=False)
    result = GoalRunner(agent, planner_provider=planner, evaluator_provider=evaluator).run("Find alpha and beta")
    assert result.status is GoalStatus.COMPLETE, result.error

    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    (root,) = [s for s in by_name(spans, "sophon.run") if s.attributes["sophon.run.kind"] == "goal"]
    assert root.parent is None and root.attributes["sophon.goal"] == "Find alpha and beta"
    assert root.attributes["sophon.run.status"] == "complete" and root.status.status_code.name != "ERROR"
    assert root.attributes["sophon.goal.verdicts.pass"] == 3
    assert {s.context.trace_id for s in finished} == {root.context.trace_id}  # one trace

    def ancestors(s):
        out = []
        while s.parent is not None:
            s = by_id[s.parent.span_id]
            out.append(s)
        return out

    steps = {s.attributes["sophon.call.id"]: s for s in by_name(spans, "sophon.call goal.step")}
    assert set(steps) == {"s1", "s2", "s3"}
    for sid in ("s1", "s2", "s3"):
        step = steps[sid]
        assert step.attributes["sophon.goal.step"] == sid and step.attributes["sophon.goal.verdict"] == "pass"
        assert "goal_step_verdict" in [e.name for e in step.events]
        assert root in ancestors(step)
        # the step's sub-agent: a run inside the step, its turn inside it, the tool's call inside that
        (call,) = [s for s in by_name(spans, "sophon.call lookup") if step in ancestors(s)]
        chain = ancestors(call)
        assert chain[0].name == "sophon.turn"
        assert chain[1].name == "sophon.run" and chain[1].attributes["sophon.run.kind"] == "agent"
        assert chain[2] is step
    # every LLM request is a GenAI span inside the goal: 1 plan, 3 sub-agent turns, 3 verdicts
    genai = [s for s in finished if "gen_ai.operation.name" in s.attributes]
    assert len(genai) == 7 and all(root in ancestors(s) for s in genai)
    in_steps = [s for s in genai if any(a.name == "sophon.call goal.step" for a in ancestors(s))]
    assert len(in_steps) == 6  # the sub-agents' requests and the verdicts, each inside its step
