"""A durable run keeps each attempt of a retried call (issue 29 item 5): in the call's
committed record, in the attempts table while it runs (schema version 5), through
``runs show --json``, and restored from its record; a store made before version 5 opens
and shows its runs."""

from __future__ import annotations

import json
import sqlite3

import pytest

import sophon_dsl
from sophon_dsl import tool
from sophon_dsl.cli import main
from sophon_dsl.durable import open_store
from sophon_dsl.durable.base import MIGRATIONS
from sophon_dsl.durable.journal import record_json, restore_record
from sophon_dsl.durable.report import stored_attempts, stored_result
from sophon_dsl.runtime import RunError
from sophon_dsl.runtime.result import Attempt, new_record

tries: dict[str, int] = {}


@tool
async def flaky(key: str, fails: int) -> str:
    n = tries[key] = tries.get(key, 0) + 1
    if n <= fails:
        raise RunError("Net.Flaky", f"{key}: try {n}")
    return key


PLAN = ('@retry({"max_attempts": 3, "interval": 0.01, "backoff_rate": 1})\n'
        'r: $state.r = flaky(key="r", fails=2)\n'
        'once: $state.once = flaky(key="once", fails=0)\n')


@pytest.fixture(autouse=True)
def _fresh():
    tries.clear()


def test_put_and_load_attempts_replace_and_go_with_their_run(store):
    store.create_run("r1", plan_id="p", goal=None, spec={"plan": "f()"}, plan_hash="h").result()
    first = [Attempt(1, 10.0, 11.0, "failed", None).stored()]
    store.put_attempts("r1", "c1", first).result()
    assert store.load_attempts("r1") == {"c1": first}
    both = [*first, Attempt(2, 12.0, 13.5, "failed", None).stored()]
    store.put_attempts("r1", "c1", both).result()  # the attempts so far replace the earlier ones
    assert store.load_attempts("r1") == {"c1": both} and store.load_attempts("other") == {}
    assert store.delete_runs(["r1"]) == ["r1"]
    assert store.load_attempts("r1") == {}


def test_a_retried_call_s_attempts_are_committed_and_shown(store_url, capsys):
    r = sophon_dsl.run(sophon_dsl.loads(PLAN, format="dsl"), tools=[flaky], store=store_url)
    assert r.status == "succeeded"
    store = open_store(store_url)
    try:
        rec = store.load_calls(r.run_id)
        assert [a["status"] for a in rec["r"]["attempt_log"]] == ["failed", "failed", "succeeded"]
        assert "attempt_log" not in rec["once"]  # attempted once: the record as it always was
        shown = {c["id"]: c for c in stored_result(store, store.get_run(r.run_id))["calls"]}
        log = shown["r"]["attempt_log"]
        assert [(a["attempt"], a["status"], (a["error"] or {}).get("error")) for a in log] == [
            (1, "failed", "Net.Flaky"), (2, "failed", "Net.Flaky"), (3, "succeeded", None)]
        assert log[0]["started_at"] == shown["r"]["started_at"] and log[-1]["ended_at"] == shown["r"]["ended_at"]
        assert shown["once"]["attempt_log"] == [{"attempt": 1, "started_at": shown["once"]["started_at"],
                                                 "ended_at": shown["once"]["ended_at"], "status": "succeeded",
                                                 "error": None}]
    finally:
        store.close()
    # the CLI's `runs show --json` prints the same
    capsys.readouterr()
    assert main(["runs", "show", r.run_id, "--json", "--store", store_url]) == 0
    calls = {c["id"]: c for c in json.loads(capsys.readouterr().out)["calls"]}
    assert [a["status"] for a in calls["r"]["attempt_log"]] == ["failed", "failed", "succeeded"]


def test_a_committed_record_restores_its_attempts():
    rec = new_record("r", "flaky", 0)
    rec.status, rec.attempts, rec.started_at, rec.ended_at = "succeeded", 2, 100.0, 103.0
    rec.attempt_log = [Attempt(1, 100.0, 100.5, "failed", None), Attempt(2, 102.0, 103.0, "succeeded")]
    data = json.loads(json.dumps(record_json(rec, ())))
    back = new_record("r", "flaky", 0)
    restore_record(back, data)
    assert [a.stored() for a in back.attempt_log] == [a.stored() for a in rec.attempt_log]
    # a record committed before attempts were logged restores without them
    del data["attempt_log"]
    old = new_record("r", "flaky", 0)
    restore_record(old, data)
    assert old.attempt_log is None and old.attempts == 2


def test_stored_attempts_of_records_of_every_age():
    assert stored_attempts({"attempts": 0, "started": None}) == []   # never started
    once = stored_attempts({"attempts": 1, "started": 1.0, "ended": 2.0, "status": "failed",
                            "error": {"error": "X", "cause": "y"}}, lambda t: t)
    assert once == [{"attempt": 1, "started_at": 1.0, "ended_at": 2.0, "status": "failed",
                     "error": {"error": "X", "cause": "y"}}]
    # several attempts, committed by a version that kept only the first start and last end
    assert stored_attempts({"attempts": 3, "started": 1.0, "ended": 9.0, "status": "succeeded"}) is None


def _to_version_4(path: str) -> None:
    """Make the SQLite store at ``path`` what a version before attempts were logged wrote:
    schema version 4 (no attempts table) and call records without ``attempt_log``."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("DROP TABLE attempts")
        conn.execute("DELETE FROM schema_migrations WHERE version > 4")
        for run_id, call_id, record in conn.execute("SELECT run_id, call_id, record FROM calls").fetchall():
            data = json.loads(record)
            data.pop("attempt_log", None)
            conn.execute("UPDATE calls SET record = ? WHERE run_id = ? AND call_id = ?",
                         (json.dumps(data), run_id, call_id))
        conn.commit()
    finally:
        conn.close()


def test_a_store_of_schema_version_4_opens_and_shows_its_runs(tmp_path):
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    r = sophon_dsl.run(sophon_dsl.loads(PLAN, format="dsl"), tools=[flaky], store=url)
    assert r.status == "succeeded"
    _to_version_4(str(path))
    store = open_store(url)  # migrated to the current version on open
    try:
        assert store.schema_version() == MIGRATIONS[-1][0] == 5
        assert store.load_attempts(r.run_id) == {}
        shown = {c["id"]: c for c in stored_result(store, store.get_run(r.run_id))["calls"]}
        assert shown["r"]["attempts"] == 3 and shown["r"]["attempt_log"] is None  # not recorded then
        assert [a["status"] for a in shown["once"]["attempt_log"]] == ["succeeded"]
        # the dashboard draws such a call as one bar, as it did
        from sophon_dsl.ui import data

        head = store.get_run_head(r.run_id)
        pv = data.plan_view(store.get_run(r.run_id))
        calls = data.call_rows(pv["plan"], pv["ids"], data.load_progress(store, r.run_id))
        bars = {b["id"]: b for b in data.timeline({"calls": calls}, pv["deps"])["bars"]}
        assert bars["r"]["attempts"] == 3 and bars["r"]["segments"] == []
        assert len(bars["once"]["segments"]) == 1
        assert data.snapshot(store, head, pv["plan"])["calls"] == {"r": "succeeded", "once": "succeeded"}
    finally:
        store.close()
