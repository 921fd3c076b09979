"""Each attempt of a retried call is recorded (issue 29 item 5: the dashboard's timeline draws a
bar per attempt): ``CallRecord.attempt_log``, its JSON, and what a call attempted once keeps
(nothing more: its one attempt is the call's own start and end)."""

from __future__ import annotations

import re

import pytest

from sophon_dsl.loader import parse
from sophon_dsl.runtime import RunError, run
from sophon_dsl.runtime.result import Attempt, attempts_of
from sophon_dsl.runtime.state import iso_time
from sophon_dsl.tools import tool

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
tries: dict[str, int] = {}


@tool
async def flaky(key: str, fails: int) -> str:
    """Fails ``fails`` times per key, then returns the key."""
    n = tries[key] = tries.get(key, 0) + 1
    if n <= fails:
        raise RunError("Net.Flaky", f"{key}: try {n}")
    return key


@tool
def flaky_sync(key: str, fails: int) -> str:
    n = tries[key] = tries.get(key, 0) + 1
    if n <= fails:
        raise RunError("Net.Flaky", f"{key}: try {n}")
    return key


def plan_of(text: str):
    res = parse(text)
    assert res.ok, res.diagnostics
    return res.plan


RETRY = '@retry({"max_attempts": 3, "interval": 0.01, "backoff_rate": 1})\n'


@pytest.fixture(autouse=True)
def _fresh():
    tries.clear()


# the runner's three ways to an attempt: the tool awaited directly, through the invoker
# (a per-call timeout), and under a concurrency limit (the call starts in its slot)
@pytest.mark.parametrize("tool_name, options", [("flaky", {}), ("flaky", {"timeout": 30}),
                                                ("flaky", {"max_concurrency": 1}), ("flaky_sync", {})])
def test_a_call_that_fails_twice_then_succeeds_logs_three_attempts(tool_name, options):
    result = run(plan_of(f'{RETRY}a: $state.a = {tool_name}(key="a", fails=2)'), [flaky, flaky_sync], **options)
    assert result.status == "succeeded"
    rec = result.call("a")
    assert rec.attempts == 3
    log = rec.attempt_log
    assert [a.attempt for a in log] == [1, 2, 3]
    assert [a.status for a in log] == ["failed", "failed", "succeeded"]
    assert [a.error.error if a.error else None for a in log] == ["Net.Flaky", "Net.Flaky", None]
    assert [a.error.cause for a in log[:2]] == ["a: try 1", "a: try 2"]
    # one after the other: each attempt ends before the next starts (the gap is the backoff)
    for a, b in zip(log, log[1:]):
        assert a.started <= a.ended <= b.started <= b.ended
    # the call's own times are its first attempt's start and its last attempt's end
    assert iso_time(log[0].started) == rec.started_at and iso_time(log[-1].ended) == rec.ended_at


def test_the_json_of_a_retried_call_lists_its_attempts_and_a_call_run_once_keeps_its_shape():
    result = run(plan_of(f'{RETRY}a: $state.a = flaky(key="a", fails=1)\nb: $state.b = flaky(key="b", fails=0)'),
                 [flaky])
    a, b = result.to_json()["calls"]
    assert [(t["attempt"], t["status"], t["error"]) for t in a["attempt_log"]] == [
        (1, "failed", {"error": "Net.Flaky", "cause": "a: try 1"}), (2, "succeeded", None)]
    assert all(ISO.match(t["started_at"]) and ISO.match(t["ended_at"]) for t in a["attempt_log"])
    assert a["attempt_log"][0]["started_at"] == a["started_at"] and a["attempt_log"][-1]["ended_at"] == a["ended_at"]
    # attempted once: the record's JSON is what it was before attempts were logged
    assert set(b) == {"id", "tool", "status", "attempts", "error", "reason", "started_at", "ended_at"}
    rec_b = result.call("b")
    assert rec_b.attempt_log is None
    once = attempts_of(rec_b)
    assert [(t.attempt, t.status, t.error) for t in once] == [(1, "succeeded", None)]
    assert iso_time(once[0].started) == rec_b.started_at and iso_time(once[0].ended) == rec_b.ended_at


def test_a_call_that_fails_every_attempt_logs_each_failure():
    result = run(plan_of(f'{RETRY}a: $state.a = flaky(key="a", fails=9)'), [flaky])
    rec = result.call("a")
    assert rec.status == "failed" and rec.attempts == 3
    assert [a.status for a in rec.attempt_log] == ["failed"] * 3
    assert [a.error.cause for a in rec.attempt_log] == ["a: try 1", "a: try 2", "a: try 3"]
    assert rec.attempt_log[-1].error == rec.error


def test_a_run_stopped_during_a_backoff_keeps_the_failed_attempt_failed():
    # the backoff (60 s) outlasts the run's time limit: the call is cancelled between attempts
    plan = plan_of('@retry({"max_attempts": 3, "interval": 60})\na: $state.a = flaky(key="a", fails=9)')
    result = run(plan, [flaky], max_time=0.3)
    rec = result.call("a")
    assert rec.status == "cancelled" and rec.attempts == 1
    assert [(a.attempt, a.status) for a in rec.attempt_log] == [(1, "failed")]


def test_a_call_that_never_started_has_no_attempts():
    result = run(plan_of('a: $state.a = flaky(key="a", fails=9)\nb: $state.b = flaky(key=$state.a, fails=0)'),
                 [flaky])
    assert result.call("b").status == "skipped"
    assert attempts_of(result.call("b")) == []


def test_an_attempt_round_trips_through_its_stored_form():
    a = Attempt(2, 1700000000.25, 1700000001.5, "failed", None)
    assert Attempt.from_stored(a.stored()).stored() == a.stored()
    b = Attempt(1, 1700000000.0)
    assert Attempt.from_stored(b.stored()).stored() == {"attempt": 1, "started": 1700000000.0, "ended": None,
                                                        "status": "running", "error": None}
    assert b.to_json()["ended_at"] is None and ISO.match(b.to_json()["started_at"])
