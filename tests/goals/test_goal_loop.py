"""The goal loop (issue 16, seed 003) end to end, offline: one scripted provider per role
(planner, sub-agents, evaluator), keyed by request pattern so parallel steps do not depend
on the order of their requests."""

from __future__ import annotations

import json

import pytest

from sophon_dsl import Agent, GoalRunner, tool
from sophon_dsl.goals import GoalStatus

from goal_support import Timeline, keyed, plan_reply, step, verdict


@tool
def noop(x: str = "") -> str:
    """Does nothing."""
    return x


def _agent(sub, tools=(noop,), **kw):
    return Agent(sub, list(tools), stdlib=False, **kw)


def _requests(provider) -> list[str]:
    return ["\n".join(m.content for m in c["messages"]) for c in provider.calls]


def test_parallel_steps_one_failure_one_replan_then_complete():
    planner = keyed(
        (r"Completed steps", plan_reply(
            step("Search the pages through the API [delta]", "the API returned pages", ["pages"]),
            step("Draft the emails again [epsilon]", "two drafts exist", ["drafts"], depends_on=[1, "s1"],
                 hint="writer"))),
        (r"Goal:", plan_reply(
            step("Fetch tomorrow's meetings [alpha]", "a list of meetings", ["meetings"], hint="researcher"),
            step("Search the wiki pages [beta]", "pages found", ["pages"], hint="analyst"),
            step("Draft the emails [gamma]", "one draft per meeting", ["drafts"], depends_on=[1, 2]))),
    )
    inner = keyed((r"Request: .*\[alpha\]", 'return {"meetings": ["standup", "review"]}'),
                  (r"Request: .*\[beta\]", 'return "blocked by a login page"'),
                  (r"Request: .*\[delta\]", 'return {"pages": 3}'),
                  (r"Request: .*\[epsilon\]", 'return ["draft 1", "draft 2"]'))
    sub = Timeline(inner, ["[alpha]", "[beta]", "[gamma]", "[delta]", "[epsilon]"])
    evaluator = keyed((r"Task: .*\[alpha\]", verdict("pass", "two meetings", meetings=2)),
                      (r"Task: .*\[beta\]", verdict("fail", "a login page blocked the search")),
                      (r"Task: .*\[delta\]", verdict("pass", "three pages", pages=3, meetings=99)),
                      (r"Task: .*\[epsilon\]", verdict("pass", "drafted", drafts=2)))
    events = []
    result = GoalRunner(_agent(sub), planner_provider=planner, evaluator_provider=evaluator,
                        on_event=events.append).run("Prepare tomorrow's meetings")

    assert result.status is GoalStatus.COMPLETE, result.error
    # exact requests per role: 2 plans; 4 sub-agent turns (gamma was skipped); 4 verdicts
    assert (len(planner.calls), len(sub.calls), len(evaluator.calls)) == (2, 4, 4)
    # alpha and beta are independent: both started before either ended
    first = sub.log[:4]
    assert {k for e, k in first[:2]} == {"[alpha]", "[beta]"} and all(e == "start" for e, _ in first[:2])
    by_id = {s.id: s for s in result.steps}
    assert [(s.id, s.status.value, s.verdict) for s in result.steps] == [
        ("s1", "done", "pass"), ("s2", "failed", "fail"), ("s3", "skipped", None),
        ("s4", "done", "pass"), ("s5", "done", "pass")]
    assert by_id["s3"].note == "not run: s2 did not succeed"
    assert result.replans == 1 and result.steps_run == 4
    # facts merge in completion order and a known key is never overwritten
    assert result.facts == {"meetings": 2, "pages": 3, "drafts": 2}
    # the replan was told what completed and what failed, and planned only the rest
    replan_text = _requests(planner)[1]
    assert '"id": "s1"' in replan_text and "a login page blocked the search" in replan_text
    # facts and the completed step's result reach the dependent step's sub-agent
    epsilon = next(t for t in _requests(inner) if "[epsilon]" in t)
    assert '"meetings":2' in epsilon.replace(" ", "") and '"pages":3' in epsilon.replace(" ", "")
    assert "standup" in epsilon
    assert result.output == ["draft 1", "draft 2"]
    kinds = [e.type for e in events]
    assert kinds.count("goal_plan") == 2 and kinds.count("goal_replan") == 1
    assert kinds.count("goal_step_verdict") == 4 and kinds[-1] == "goal_done"
    js = result.to_json()
    assert set(js) == {"status", "output", "facts", "goal_execution"}
    assert set(js["goal_execution"]) == {"steps", "replans", "steps_run", "elapsed_s"}
    assert set(js["goal_execution"]["steps"][0]) == {"id", "task", "verdict", "confidence", "note", "status"}
    json.dumps(js)


def _three(tag: str = "") -> str:
    return plan_reply(step(f"First job{tag} [one]", "first done"), step(f"Second job{tag} [two]", "second done"),
                      step(f"Third job{tag} [three]", "third done", depends_on=[2]))


def _subs():
    return keyed((r"Request: .*\[one\]", 'return 1'), (r"Request: .*\[two\]", 'return 2'),
                 (r"Request: .*\[three\]", 'return 3'), (r"Request: .*\[four\]", 'return 4'))


def test_step_limit_blocks_before_running_a_plan_that_does_not_fit():
    sub, evaluator = _subs(), keyed((r"Task:", verdict("pass")))
    result = GoalRunner(_agent(sub), planner_provider=keyed((r"Goal:", _three())), evaluator_provider=evaluator,
                        max_goal_steps=2).run("g")
    assert result.status is GoalStatus.BLOCKED and "goal step limit (2)" in result.error
    assert sub.calls == [] and result.steps_run == 0


def test_replan_limit_fails_the_goal():
    evaluator = keyed((r"Task: .*\[two\]", verdict("fail", "nope")), (r"Task:", verdict("pass")))
    planner = keyed((r"Completed steps", plan_reply(step("Second again [two]", "second done"))),
                    (r"Goal:", _three()))
    result = GoalRunner(_agent(_subs()), planner_provider=planner, evaluator_provider=evaluator,
                        max_replans=1).run("g")
    assert result.status is GoalStatus.FAILED and "replan limit (1)" in result.error
    assert result.replans == 1 and len(planner.calls) == 2


def test_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("MAX_GOAL_STEPS", "5")
    monkeypatch.setenv("MAX_REPLAN_ATTEMPTS", "2")
    runner = GoalRunner(_agent(_subs()))
    assert (runner.max_goal_steps, runner.max_replans) == (5, 2)
    monkeypatch.setenv("MAX_GOAL_STEPS", "many")
    with pytest.raises(ValueError, match="MAX_GOAL_STEPS must be a whole number"):
        GoalRunner(_agent(_subs()))


def test_no_evaluator_request_where_the_outcome_is_known():
    # one sub-agent fails (its provider refuses), one runs out of turns (no final output, but
    # its calls succeeded: partial; without any success it would fail, see the next test)
    sub = keyed((r"Request: .*\[one\]", {"error": {"status": 400, "message": "bad request"}}),
                (r"Request: .*\[two\]", '$state.n = noop(x="a")\nreturn null'),
                (r"Request: .*\[three\]", 'return 3'))
    evaluator = keyed((r"Task:", verdict("pass")))
    planner = keyed((r"Completed steps", plan_reply(step("Other route [three]", "done"))), (r"Goal:", _three()))
    result = GoalRunner(_agent(sub), planner_provider=planner, evaluator_provider=evaluator,
                        subagent_turns=2).run("g")
    by_id = {s.id: s for s in result.steps}
    assert by_id["s1"].verdict == "fail" and "bad request" in by_id["s1"].note
    assert by_id["s2"].verdict == "partial" and "no final output" in by_id["s2"].note
    # only s3 (after s2's partial pass) and the replanned s4 asked the evaluator
    assert len(evaluator.calls) == 2 and result.status is GoalStatus.COMPLETE


@tool
def always_fails(order: str) -> str:
    """Always raises."""
    raise RuntimeError("the payment service is down")


def test_a_step_without_a_successful_call_or_output_fails_and_is_replanned():
    # issue 25 item 1: the step's only tool always raises, the sub-agent runs out of turns;
    # the step fails, its dependent is skipped (nothing sent), and the loop replans
    sent = []

    @tool
    def notify(text: str) -> str:
        """Sends a notification."""
        sent.append(text)
        return "sent"

    sub = keyed((r"Request: .*\[charge\]", '$state.r = always_fails(order="A1")'),
                (r"Request: .*\[notify\]", '$state.s = notify(text="you were charged")\nreturn "ok"'),
                (r"Request: .*\[other\]", 'return "refund filed"'))
    planner = keyed((r"Completed steps", plan_reply(step("File a refund instead [other]", "filed"))),
                    (r"Goal:", plan_reply(step("Charge the order [charge]", "charged"),
                                          step("Tell the customer [notify]", "told", depends_on=[1]),
                                          step("Log it [other]", "logged"))))
    evaluator = keyed((r"Task:", verdict("pass")))
    result = GoalRunner(_agent(sub, (always_fails, notify)), planner_provider=planner, evaluator_provider=evaluator,
                        subagent_turns=2).run("g")
    by_id = {s.id: s for s in result.steps}
    assert "s1" in by_id, (result.status, result.error, result.to_json())
    assert by_id["s1"].verdict == "fail" and by_id["s1"].status.value == "failed"
    assert "no call succeeded" in by_id["s1"].note
    assert by_id["s2"].status.value == "skipped" and sent == []
    assert result.replans == 1 and result.status is GoalStatus.COMPLETE


def test_unreadable_verdict_is_an_evaluator_error_at_once():
    evaluator = keyed((r"Task:", "looks good to me"))
    planner = keyed((r"Goal:", _three()))
    result = GoalRunner(_agent(_subs()), planner_provider=planner, evaluator_provider=evaluator).run("g")
    assert result.status is GoalStatus.FAILED and "evaluator error" in result.error
    assert len(planner.calls) == 1   # never replanned around an evaluator error


@pytest.mark.parametrize("answer, status, verdict_", [(True, GoalStatus.COMPLETE, "pass"),
                                                      (None, GoalStatus.HITL, "hitl")])
def test_hitl_asks_the_person_or_ends_the_run(answer, status, verdict_):
    asked = []

    def person(request):
        asked.append(request)
        return answer

    evaluator = keyed((r"Task: .*\[two\]", verdict("hitl", "only a person can tell")), (r"Task:", verdict("pass")))
    result = GoalRunner(_agent(_subs()), planner_provider=keyed((r"Goal:", _three())), evaluator_provider=evaluator,
                        approve=person if answer is not None else None).run("g")
    assert result.status is status
    by_id = {s.id: s for s in result.steps}
    assert by_id["s2"].verdict == verdict_
    if answer is None:
        assert by_id["s3"].status.value == "skipped" and asked == []
    else:
        assert asked and asked[0].call_id == "s2" and asked[0].args["evaluator_note"] == "only a person can tell"


def test_a_person_rejecting_a_hitl_step_fails_it_and_replans():
    evaluator = keyed((r"Task: .*\[two\]", verdict("hitl", "unsure")), (r"Task:", verdict("pass")))
    planner = keyed((r"Completed steps", plan_reply(step("Fourth [four]", "done"))), (r"Goal:", _three()))
    result = GoalRunner(_agent(_subs()), planner_provider=planner, evaluator_provider=evaluator,
                        approve=lambda req: False).run("g")
    assert result.status is GoalStatus.COMPLETE and result.replans == 1
    assert {s.id: s.verdict for s in result.steps}["s2"] == "fail"


def test_a_rejected_approval_inside_a_step_is_hitl_without_asking_the_evaluator():
    @tool(risk="high")
    def wire(amount: int) -> str:
        """Sends money."""
        return "sent"

    sub = keyed((r"Request: .*\[two\]", '$state.r = wire(amount=5)\nreturn $state.r'),
                (r"Request: .*\[one\]", 'return 1'), (r"Request: .*\[three\]", 'return 3'))
    evaluator = keyed((r"Task:", verdict("pass")))
    agent = _agent(sub, tools=(wire,), mode="lazy", approve="no")
    result = GoalRunner(agent, planner_provider=keyed((r"Goal:", _three())), evaluator_provider=evaluator).run("g")
    assert result.status is GoalStatus.HITL
    assert {s.id: s.verdict for s in result.steps}["s2"] == "hitl"
    assert len(evaluator.calls) == 1     # only s1 was judged by the model


def test_planner_error_fails_the_goal_with_no_step_run():
    sub = _subs()
    result = GoalRunner(_agent(sub), planner_provider=keyed((r"Goal:", "not json")),
                        evaluator_provider=keyed((r"Task:", verdict("pass")))).run("g")
    assert result.status is GoalStatus.FAILED and result.error.startswith("planner error")
    assert sub.calls == [] and result.steps == []


def test_routing_hint_restricts_the_sub_agents_tools():
    @tool
    def search(q: str) -> str:
        """Searches."""
        return q

    @tool
    def send(to: str) -> str:
        """Sends."""
        return to

    sub = _subs()
    planner = keyed((r"Goal:", plan_reply(step("First job [one]", "first done", hint="analyst"),
                                          step("Second job [two]", "second done", hint="writer"),
                                          step("Third job [three]", "third done"))))
    runner = GoalRunner(_agent(sub, tools=(search, send)), planner_provider=planner,
                        evaluator_provider=keyed((r"Task:", verdict("pass"))),
                        roles={"researcher": ["search"], "communicator": ["send"]})
    assert runner.run("g").ok
    shown = {next(k for k in ("[one]", "[two]", "[three]") if k in t): t.split("\nTools:\n", 1)[1]
             for t in _requests(sub)}
    assert "search(q" in shown["[one]"] and "send(to" not in shown["[one]"]
    assert "send(to" in shown["[two]"] and "search(q" not in shown["[two]"]
    assert "search(q" in shown["[three]"] and "send(to" in shown["[three]"]


def test_cancelling_keeps_the_steps_reached():
    import asyncio

    evaluator = keyed((r"Task:", verdict("pass", "ok", first=1)))
    sub = keyed((r"Request: .*\[one\]", 'return 1'), (r"Request: .*\[two\]", 'return 2'),
                (r"Request: .*\[three\]", {"reply": "return 3", "tokens_per_second": 2, "chunk_size": 1}))
    done = []

    async def go():
        runner = GoalRunner(_agent(sub), planner_provider=keyed((r"Goal:", _three())), evaluator_provider=evaluator,
                            on_event=lambda e: done.append(e.data) if e.type == "goal_done" else None)
        task = asyncio.ensure_future(runner.arun("g"))
        while len(evaluator.calls) < 2:          # s1 and s2 judged; s3 is streaming slowly
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    partial = done[-1]
    assert partial.status is GoalStatus.CANCELLED and partial.facts == {"first": 1}
    assert [(s.id, s.status.value) for s in partial.steps] == [("s1", "done"), ("s2", "done"), ("s3", "cancelled")]
