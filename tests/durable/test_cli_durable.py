"""The durable-run commands: run --store / the default store, runs list|show, resume, approve."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sophon_dsl.cli import main
from sophon_dsl.durable import open_store

from . import plans
from .faults import FaultyStore, forget_lease

TOOLS = str(Path(__file__).with_name("plans.py"))
PLAN = "$state.a = look(n=1)\n@risk(high)\nb: $state.b || $state.err = act(n=1, x=$state.a)\n"


def _plan(tmp_path, text=PLAN):
    p = tmp_path / "p.plan"
    p.write_text(text, encoding="utf-8")
    return str(p)


def _run_id(err: str) -> str:
    line = next(x for x in err.splitlines() if x.startswith("run id: "))
    return line.removeprefix("run id: ")


def test_default_store_env_override_and_no_store(tmp_path, capsys, monkeypatch):
    plan = _plan(tmp_path)
    assert main(["run", plan, "--tools", TOOLS, "--approve", "yes", "--json"]) == 0
    out, err = capsys.readouterr()
    rid = _run_id(err)
    assert json.loads(out)["run_id"] == rid
    assert (Path(os.environ["XDG_DATA_HOME"]) / "sophon-dsl" / "runs.sqlite3").is_file()
    assert main(["runs", "list", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [rid]

    monkeypatch.setenv("SOPHON_DSL_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    assert main(["run", plan, "--tools", TOOLS, "--approve", "yes"]) == 0
    assert _run_id(capsys.readouterr().err) and (tmp_path / "env.db").is_file()
    assert main(["run", plan, "--tools", TOOLS, "--approve", "yes", "--no-store"]) == 0
    assert "run id" not in capsys.readouterr().err
    assert main(["runs", "list", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1  # the env store holds one run


def test_waiting_run_is_approved_from_another_command(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    plan = _plan(tmp_path)
    assert main(["run", plan, "--tools", TOOLS, "--approve", "wait", "--store", url]) == 3
    err = capsys.readouterr().err
    rid = _run_id(err)
    assert f"sophon-dsl approve {rid}" in err
    assert main(["runs", "list", "--status", "waiting", "--store", url]) == 0
    assert rid in capsys.readouterr().out
    assert main(["runs", "show", rid, "--json", "--store", url]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "waiting" and shown["waiting"]["decision"] == "plan"
    assert main(["approve", rid, "--store", url, "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["status"] == "succeeded" and done["run_id"] == rid and done["state"]["state"]["b"] == 10
    assert main(["approve", rid, "--store", url]) == 1  # not waiting any more
    assert "not waiting" in capsys.readouterr().err
    assert main(["runs", "show", rid, "--log", "--store", url]) == 0
    assert "#0 c1: state.a set 3" in capsys.readouterr().out


def test_rejected_with_a_reason(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert main(["run", _plan(tmp_path), "--tools", TOOLS, "--approve", "wait", "--store", url]) == 3
    rid = _run_id(capsys.readouterr().err)
    assert main(["approve", rid, "--reject", "--reason", "too risky", "--store", url, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "rejected" and out["error"]["cause"] == "too risky"


def test_in_doubt_call_shown_and_resumed_with_unknown_fail(tmp_path, capsys):
    path = str(tmp_path / "r.db")
    store = FaultyStore(path, 4)  # run row, plan decision, c1 (idempotent: no intent), b's intent
    try:
        import sophon_dsl

        first = sophon_dsl.run(PLAN, tools=plans.TOOLS, store=store, approve=True, run_id="r1")
    finally:
        store.close()
    assert first.error.error == "Store.CommitFailed"
    forget_lease(path, "r1")
    url = f"sqlite:///{path}"
    assert main(["runs", "show", "r1", "--json", "--store", url]) == 0
    calls = {c["id"]: c for c in json.loads(capsys.readouterr().out)["calls"]}
    assert calls["b"]["in_doubt"] is True and calls["c1"]["status"] == "succeeded"
    assert main(["resume", "r1", "--store", url, "--tools", TOOLS, "--unknown", "fail", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["state"]["state"]["err"]["error"] == "Call.OutcomeUnknown"


def test_unknown_run_ids_exit_2(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    open_store(url).close()  # an existing store (a missing one is its own usage error: issue 25)
    for argv in (["resume", "nope"], ["approve", "nope"], ["runs", "show", "nope"]):
        assert main([*argv, "--store", url]) == 2
        assert "no run 'nope'" in capsys.readouterr().err


def test_bad_store_url_is_a_usage_error(tmp_path, capsys):
    assert main(["run", _plan(tmp_path), "--tools", TOOLS, "--store", "mysql://x"]) == 2
    assert "--store" in capsys.readouterr().err


def test_resume_shows_its_calls_live_and_why_one_failed(tmp_path, capsys):
    """Without --json, resume shows what `run` shows (a line per call as it changes) plus what
    was restored and each in-doubt decision: a failed call's cause is on the terminal."""
    path = str(tmp_path / "r.db")
    store = FaultyStore(path, 4)  # as above: b's intent is the last commit
    try:
        import sophon_dsl

        sophon_dsl.run(PLAN, tools=plans.TOOLS, store=store, approve=True, run_id="r1")
    finally:
        store.close()
    forget_lease(path, "r1")
    capsys.readouterr()
    assert main(["resume", "r1", "--store", f"sqlite:///{path}", "--tools", TOOLS, "--unknown", "fail"]) == 0
    err = capsys.readouterr().err
    assert "resuming run r1: 1 call(s) restored from the store, 1 in doubt" in err
    assert "[b] act: in doubt (started before the crash; its outcome is unknown): fail" in err
    assert "[b] act: failed" in err and "Call.OutcomeUnknown" in err
    assert "plan succeeded: 1 failed (caught), 1 succeeded" in err
