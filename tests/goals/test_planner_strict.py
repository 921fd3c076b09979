"""The planner's reply is validated strictly (seed 003): every defect raises PlannerError,
nothing falls back to a degraded plan; only the routing hint is forgiving."""

from __future__ import annotations

import asyncio
import json

import pytest

from sophon_dsl.goals import PlannerError, normalize_hint, parse_steps
from sophon_dsl.goals.planner import Planner, StepSummary
from sophon_dsl.llm.providers.scripted import ScriptedProvider

from goal_support import keyed, plan_reply, step


def _ok(n: int = 3) -> list[dict]:
    return [step(f"task {i}", f"criterion {i}") for i in range(n)]


def test_a_valid_plan_is_numbered_and_dependencies_resolved():
    steps = parse_steps(plan_reply(step("a", "a done", ["x_key"]), step("b", "b done"),
                                   step("c", "c done", depends_on=[1, "s2"], hint="Developer")))
    assert [s.id for s in steps] == ["s1", "s2", "s3"]
    assert steps[2].depends_on == ("s1", "s2") and steps[2].subagent_hint == "coder"
    assert steps[0].expected_findings == ("x_key",)


def test_fenced_json_and_a_bare_list_are_read():
    body = json.dumps(_ok())
    assert len(parse_steps(f"```json\n{body}\n```")) == 3


@pytest.mark.parametrize("reply, message", [
    ("not json at all", "not valid JSON"),
    (json.dumps({"plan": []}), "no 'steps' array"),
    (plan_reply(*_ok(2)), "it must have 3 to 10"),
    (plan_reply(*_ok(11)), "it must have 3 to 10"),
    (plan_reply(*_ok(2), {"success_criterion": "x"}), "'task' must be a non-empty string (missing)"),
    (plan_reply(*_ok(2), {"task": "x"}), "'success_criterion' must be a non-empty string"),
    (plan_reply(*_ok(2), {"task": "x", "success_criterion": "  "}), "'success_criterion' must be a non-empty"),
    (plan_reply(*_ok(2), step("Fetch the data", "fetch  the DATA")), "repeats the task"),
    (plan_reply(*_ok(2), step("x", "y", ["BadKey"])), "snake_case"),
    (plan_reply(*_ok(2), {"task": "x", "success_criterion": "y", "expected_findings": "k"}),
     "must be a list of snake_case keys"),
    (plan_reply(*_ok(2), step("x", "y", depends_on=[7])), "not a step number (1..3)"),
    (plan_reply(*_ok(2), step("x", "y", depends_on=["s9"])), "unknown step 's9'"),
    (plan_reply(*_ok(2), step("x", "y", depends_on=[3])), "cannot depend on itself"),
    (plan_reply(step("a", "a1", depends_on=[2]), step("b", "b1", depends_on=[3]), step("c", "c1", depends_on=[1])),
     "form a cycle"),
    (plan_reply(*_ok(2), "just a string"), "a step must be an object"),
])
def test_every_defect_is_a_planner_error(reply, message):
    with pytest.raises(PlannerError, match=None) as info:
        parse_steps(reply)
    assert message in str(info.value)


def test_replan_allows_one_step_and_dependencies_on_completed_steps():
    steps = parse_steps(plan_reply(step("again", "done now", depends_on=["s1"])), first_number=4, min_steps=1,
                        completed=frozenset({"s1"}))
    assert [(s.id, s.depends_on) for s in steps] == [("s4", ("s1",))]
    with pytest.raises(PlannerError, match="it must have 1 to 10"):
        parse_steps(plan_reply(), min_steps=1)


@pytest.mark.parametrize("hint, role", [
    ("researcher", "researcher"), ("Analyst", "researcher"), ("developer", "coder"), ("architect", "coder"),
    ("writer", "communicator"), ("reseracher", "researcher"), ("comunicator", "communicator"),
    ("web browser", "browser"), ("astronaut", None), ("", None), (None, None), (42, None),
])
def test_hints_are_normalised_or_dropped(hint, role):
    assert normalize_hint(hint) == role


def test_a_bad_hint_never_rejects_a_plan():
    steps = parse_steps(plan_reply(step("a", "a1", hint="astronaut"), step("b", "b1", hint=7), step("c", "c1")))
    assert [s.subagent_hint for s in steps] == [None, None, None]


def test_the_planner_sends_one_heavy_request_with_goal_identity_and_facts():
    provider = keyed((r"Goal:", plan_reply(*_ok())))
    planner = Planner(provider, model="heavy-model")
    steps = asyncio.run(planner.plan("ship it", identity="I" * 500, facts={"api_base_url": "http://x"}))
    assert len(steps) == 3 and len(provider.calls) == 1
    call = provider.calls[0]
    text = call["messages"][1].content
    assert call["model"] == "heavy-model" and "ship it" in text and "api_base_url" in text
    assert "I" * 400 in text and "I" * 401 not in text   # the identity is cut at 400 characters


def test_the_replan_prompt_asks_for_a_different_approach_and_states_the_budget():
    provider = keyed((r"Goal:", plan_reply(step("z", "z1"))))
    asyncio.run(Planner(provider).replan(
        "g", completed=[StepSummary("s1", "a", "pass")], failed=[StepSummary("s2", "b", "fail", "site blocked")],
        facts={}, remaining_steps=7, remaining_replans=3, first_number=4))
    text = provider.calls[0]["messages"][1].content
    assert "site blocked" in text and "Change the approach" in text and "7 step(s), 3 replan(s)" in text


def test_a_provider_failure_is_a_planner_error():
    provider = ScriptedProvider([{"error": {"status": 500, "message": "down"}}])
    with pytest.raises(PlannerError, match="request failed"):
        asyncio.run(Planner(provider).plan("g"))
