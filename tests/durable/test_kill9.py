"""kill -9 at a random point of a seeded 100-call plan (branches, caught failures, merges, maps),
then resume (sometimes killed again): the result equals an uninterrupted run's, no call
committed before a kill runs again, and a call that ran twice ran with one idempotency key.

Trials: ``SOPHON_KILL_TRIALS`` (default 4, 15-40 s; the issue's proof is 50) on SQLite,
``SOPHON_KILL_TRIALS_PG`` (default 2) on PostgreSQL."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

import sophon_dsl

from . import plans

WORKER = str(Path(__file__).with_name("killworker.py"))
TRIALS = int(os.environ.get("SOPHON_KILL_TRIALS", "4"))
PG_TRIALS = int(os.environ.get("SOPHON_KILL_TRIALS_PG", "2"))


def _start(action: str, db: str, seed: int, ledger: str) -> subprocess.Popen:
    env = dict(os.environ, SOPHON_TEST_LEDGER=ledger)
    proc = subprocess.Popen([sys.executable, WORKER, action, db, str(seed), "run1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    while (line := proc.stderr.readline()) and line.strip() != "go":
        seen.append(line)
    assert line.strip() == "go", "".join(seen)
    return proc


def _finish(proc: subprocess.Popen) -> dict:
    """The comparable result the worker printed last."""
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _kill_after(proc: subprocess.Popen, delay: float) -> bool:
    """kill -9 after ``delay`` s; False if the process had already ended by itself."""
    time.sleep(delay)
    if proc.poll() is not None:
        return False
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def _query(db: str, sql: str) -> list | None:
    """Rows of ``sql`` in the store (a SQLite file or a PostgreSQL URL); None before its
    tables exist."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            try:
                return conn.execute(sql).fetchall()
            except psycopg.errors.UndefinedTable:
                return None
    if not os.path.exists(db):
        return None
    with sqlite3.connect(db) as conn:
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.OperationalError:
            return None


def _registered(db: str) -> bool:
    rows = _query(db, "SELECT COUNT(*) FROM runs WHERE run_id = 'run1'")
    return rows is not None and rows[0][0] == 1


def _committed(db: str) -> set[str]:
    # (calls that ran their tool: a skipped call is committed without running)
    attempts = "(record::json->>'attempts')::int" if db.startswith("postgresql://") else \
        "json_extract(record, '$.attempts')"
    rows = _query(db, f"SELECT call_id FROM calls WHERE run_id = 'run1' AND {attempts} > 0")
    return {c for (c,) in rows or ()}


def _ledger(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def _window(db: str, seed: int, ledger: str) -> tuple[tuple[float, float], dict]:
    """When the calls of an uninterrupted durable run of the worker ran, in seconds after
    its plan_start, and its result."""
    proc = _start("run", db, seed, ledger)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = out.strip().splitlines()
    return tuple(json.loads(lines[0])["window"]), json.loads(lines[-1])


@pytest.mark.parametrize("trial", range(TRIALS))
def test_kill_minus_9_then_resume(tmp_path, trial):
    _kill_trial(tmp_path, trial, str(tmp_path / "cal.db"), str(tmp_path / "run.db"))


@pytest.mark.parametrize("trial", range(PG_TRIALS))
def test_kill_minus_9_then_resume_on_postgres(tmp_path, trial, pg_cluster):
    """The same on PostgreSQL, whose commits are one statement each in autocommit mode."""
    _kill_trial(tmp_path, trial, pg_cluster.new_database(), pg_cluster.new_database())


def _kill_trial(tmp_path, trial: int, cal_db: str, db: str) -> None:
    rng = random.Random(1300 + trial)
    seed = rng.randrange(10_000)
    reference = json.loads(json.dumps(plans.comparable(
        sophon_dsl.run(plans.seeded_plan(seed, maps=True), tools=plans.TOOLS, input={"zero": 0}))))
    # the kill lands while calls run: calibrated on an uninterrupted durable run of the plan
    (first, last), durable = _window(cal_db, seed, str(tmp_path / "cal.jsonl"))
    assert durable == reference
    span = last * 1.1

    ledger = str(tmp_path / "ledger.jsonl")
    proc = _start("run", db, seed, ledger)
    killed = _kill_after(proc, rng.uniform(first, span))
    result = None if killed else _finish(proc)
    resumes = 0
    first_kill = len(_committed(db)) if killed else None
    kills: list[tuple[set, int]] = []  # per kill: the calls committed then, the ledger's length
    while result is None:
        kills.append((_committed(db), len(_ledger(ledger))))
        # killed before the run was even registered: nothing to resume, it starts again
        proc = _start("resume" if _registered(db) else "run", db, seed, ledger)
        resumes += 1
        if resumes < 3 and rng.random() < 0.3 and _kill_after(proc, rng.uniform(0, span)):
            continue  # the resuming process was killed too
        result = _finish(proc)
    print(f"trial {trial}: calls committed at the first kill: {first_kill}, resumes: {resumes}")
    assert result == reference
    entries = _ledger(ledger)
    for committed, seen in kills:  # a call committed before a kill never ran after it
        again = committed & {e["call"] for e in entries[seen:]}
        assert not again, again
    runs = defaultdict(list)
    for entry in entries:
        runs[entry["call"]].append(entry["key"])
    for call, keys in runs.items():
        assert len(set(keys)) == 1 and keys[0] == f"run1:{call}"  # one idempotency key per call
