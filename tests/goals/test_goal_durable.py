"""A goal that waits for a person is kept in the run store and continues later, from
another runner (another process), with the person's answer (issue 16 item 6)."""

from __future__ import annotations

import asyncio

import pytest

from sophon_dsl import Agent, GoalRunner, tool
from sophon_dsl.durable import open_store
from sophon_dsl.goals import GoalResumeError, GoalStatus
from sophon_dsl.goals.durable import decision_name

from goal_support import keyed, plan_reply, step, verdict


@tool
def noop(x: str = "") -> str:
    """Does nothing."""
    return x


def _three() -> str:
    return plan_reply(step("First job [one]", "first done"), step("Second job [two]", "second done"),
                      step("Third job [three]", "third done", depends_on=[2]))


def _runner(store, **kw):
    sub = keyed((r"Request: .*\[one\]", 'return 1'), (r"Request: .*\[two\]", 'return 2'),
                (r"Request: .*\[three\]", 'return 3'), (r"Request: .*\[four\]", 'return 4'))
    evaluator = keyed((r"Task: .*\[two\]", verdict("hitl", "only a person can tell", seen=2)),
                      (r"Task:", verdict("pass", "ok")))
    planner = keyed((r"Completed steps", plan_reply(step("Fourth job [four]", "fourth done"))), (r"Goal:", _three()))
    runner = GoalRunner(Agent(sub, [noop], stdlib=False), planner_provider=planner, evaluator_provider=evaluator,
                        store=store, **kw)
    return runner, sub, evaluator, planner


@pytest.fixture
def store_url(tmp_path):
    return f"sqlite:///{tmp_path / 'runs.db'}"


def _waiting(store_url):
    runner, *_ = _runner(store_url)
    first = runner.run("g")
    assert first.status is GoalStatus.HITL and first.run_id
    return first.run_id


def test_a_waiting_goal_is_kept_and_approved_later(store_url):
    run_id = _waiting(store_url)
    store = open_store(store_url)
    row = store.get_run(run_id)
    assert row["status"] == "waiting" and row["summary"]["waiting"]["steps"] == ["s2"]
    store.close()

    runner, sub, evaluator, planner = _runner(store_url)          # a new process, in effect
    result = runner.resume(run_id, approve=True, reason="looks right")
    assert result.status is GoalStatus.COMPLETE and result.run_id == run_id
    # only the step that waited behind the person ran: no step done before is asked again
    assert len(sub.calls) == 1 and len(evaluator.calls) == 1 and planner.calls == []
    assert [(s.id, s.status.value, s.verdict) for s in result.steps] == [
        ("s1", "done", "pass"), ("s2", "done", "pass"), ("s3", "done", "pass")]
    assert result.facts == {"seen": 2} and result.output == 3
    store = open_store(store_url)
    assert store.get_run(run_id)["status"] == "complete"
    store.close()


def test_a_rejected_step_fails_and_the_goal_replans(store_url):
    run_id = _waiting(store_url)
    runner, sub, evaluator, planner = _runner(store_url)
    result = runner.resume(run_id, approve=False)
    assert result.status is GoalStatus.COMPLETE and result.replans == 1 and len(planner.calls) == 1
    assert {s.id: s.verdict for s in result.steps}["s2"] == "fail"
    assert result.output == 4


def test_the_stored_decision_answers_and_resuming_twice_is_refused(store_url):
    run_id = _waiting(store_url)
    runner, *_ = _runner(store_url)
    with pytest.raises(GoalResumeError, match="waits for a person's answer"):
        runner.resume(run_id)
    store = open_store(store_url)
    store.put_decision(run_id, decision_name(run_id), {"action": "approve", "reason": "ok"}).result()
    store.close()
    assert runner.resume(run_id).status is GoalStatus.COMPLETE
    with pytest.raises(GoalResumeError, match="not waiting"):
        runner.resume(run_id, approve=True)
    with pytest.raises(GoalResumeError, match="no goal"):
        runner.resume("goal-nope", approve=True)


def test_a_waiting_goal_keeps_its_cascade_for_the_resume(store_url):
    runner, *_ = _runner(store_url, cascade="partial")
    run_id = runner.run("g").run_id
    store = open_store(store_url)
    try:
        assert store.get_run(run_id)["spec"]["cascade"] == "partial"
    finally:
        store.close()
    later, *_ = _runner(store_url)          # another process, started without --cascade
    assert later.cascade == "skip"
    assert later.resume(run_id, approve=True).status is GoalStatus.COMPLETE
    assert later.cascade == "partial"


def test_a_recorded_goal_keeps_its_progress_while_it_runs(store_url):
    """While a goal runs, its row says how far it got (issue 29 item 5: the dashboard shows a
    goal's steps live): step s2's own tool reads the store from another connection and sees
    s1 judged with its fact, s2 running and s3 pending, the run still running."""
    import time

    seen: list = []

    @tool
    def peek() -> str:
        """What the store says of the goal now."""
        store = open_store(store_url)
        try:
            for _ in range(600):  # the runner queues its progress; wait until it is committed
                row = store.list_runs()[0]
                goal = (row["summary"] or {}).get("goal") or {}
                steps = [(s["id"], s["status"], s["verdict"]) for s in goal.get("goal_execution", {}).get("steps", ())]
                if ("s2", "running", None) in steps:
                    seen.extend([row["status"], goal["status"], steps, goal["facts"]])
                    return "seen"
                time.sleep(0.05)
        finally:
            store.close()
        return "never saw s2 running"

    sub = keyed((r"Request: .*\[one\]", "return 1"), (r"Request: .*\[two\]", "†state.p = peek()\nreturn †state.p"),
                (r"Request: .*\[three\]", "return 3"))
    evaluator = keyed((r"Task: .*\[one\]", verdict("pass", "ok", first=1)), (r"Task:", verdict("pass", "ok")))
    planner = keyed((r"Goal:", plan_reply(step("First job [one]", "first done"),
                                          step("Second job [two]", "second done", depends_on=[1]),
                                          step("Third job [three]", "third done", depends_on=[2]))))
    runner = GoalRunner(Agent(sub, [noop, peek], stdlib=False), planner_provider=planner,
                        evaluator_provider=evaluator, store=store_url)
    result = runner.run("g")
    assert result.status is GoalStatus.COMPLETE
    assert seen == ["running", "running", [("s1", "done", "pass"), ("s2", "running", None), ("s3", "pending", None)],
                    {"first": 1}]
    store = open_store(store_url)
    try:
        row = store.get_run(result.run_id)
    finally:
        store.close()
    assert row["status"] == "complete"
    assert [s["status"] for s in row["summary"]["goal"]["goal_execution"]["steps"]] == ["done"] * 3


def test_a_running_goal_holds_its_lease_and_a_stored_cancel_request_ends_it(store_url):
    """While a recorded goal runs, `runs list` sees it running (its row holds a lease, not
    'interrupted'), and `sophon-dsl cancel`'s request in the store cancels it: the goal
    returns `cancelled` and its row says so."""
    import threading
    import time

    from sophon_dsl.durable.report import shown_status

    started = threading.Event()

    @tool
    async def linger() -> str:
        """Runs until cancelled."""
        started.set()
        await asyncio.sleep(60)
        return "done"

    sub = keyed((r"Request: .*\[slow\]", "$state.x = linger()\nreturn $state.x\n"), (r"Request:", "return 1"))
    planner = keyed((r"Goal:", plan_reply(step("Slow job [slow]", "done"), step("Next [two]", "done"),
                                          step("Last [three]", "done", depends_on=[1]))))
    runner = GoalRunner(Agent(sub, [linger], stdlib=False), planner_provider=planner,
                        evaluator_provider=keyed((r"Task:", verdict("pass", "ok"))), store=store_url)
    out: dict = {}
    worker = threading.Thread(target=lambda: out.setdefault("result", asyncio.run(runner.arun("g", run_id="goal-c1"))))
    t0 = time.monotonic()
    worker.start()
    assert started.wait(30)
    store = open_store(store_url)
    try:
        assert shown_status(store.get_run("goal-c1")) == "running"
        store.request_cancel("goal-c1", {"action": "cancel", "reason": "test"}).result()
        worker.join(30)
        assert not worker.is_alive() and time.monotonic() - t0 < 30
        assert out["result"].status is GoalStatus.CANCELLED
        row = store.get_run("goal-c1")
        assert row["status"] == "cancelled" and row["lease_owner"] is None
    finally:
        store.close()
