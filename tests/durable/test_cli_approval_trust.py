"""Issue 24, items 2, 3 and 11, through the CLI with real SQLite stores:

* ``approve`` and ``runs show`` show what is being approved (each call's tool, risk and
  arguments, bounded and escaped as the prompt shows them);
* a forced resume after a tool's risk rose asks again (the stored approval covers exactly
  the calls, tools and risks it was given for);
* a stored run is data, not configuration: a row whose tool flags were changed, or that this
  user's run key did not seal, or that names a file changed since the run began, is refused
  (exit 2) before anything is imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from sophon_dsl.cli import main

ROOT = Path(__file__).resolve().parents[2]

TOOLS = '''
import os
from sophon_dsl import tool

@tool(risk="high")
def pay(amount: int, note: str = "") -> int:
    """Charge (risky)."""
    return amount

@tool(idempotent=True)
def stop(x: int) -> int:
    """Crash the process the first time (an in-flight run killed), pass the value on after."""
    if not os.path.exists({marker!r}):
        os._exit(3)
    return x

@tool(risk="{wipe_risk}")
def wipe(x: int) -> int:
    """Its risk is edited between run and resume."""
    return x
'''

CRASHING = "$state.a = pay(amount=5)\n$state.b = stop(x=$state.a)\n$state.c = wipe(x=$state.b)\n"


def _tools(tmp_path, wipe_risk="low", extra=""):
    path = tmp_path / "t.py"
    path.write_text(TOOLS.format(marker=str(tmp_path / "go-on"), wipe_risk=wipe_risk) + extra, encoding="utf-8")
    return str(path)


def _plan(tmp_path, text):
    p = tmp_path / "p.plan"
    p.write_text(text, encoding="utf-8")
    return str(p)


def _run_id(err: str) -> str:
    return next(x for x in err.splitlines() if x.startswith("run id: ")).removeprefix("run id: ")


def _cli(*argv, stdin=None, session=False):
    """``python -m sophon_dsl ...`` in a subprocess (this test's environment: its run key)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "sophon_dsl", *argv], input=stdin, capture_output=True,
                          text=True, env=env, timeout=120, start_new_session=session)


def _crashed_run(tmp_path, url):
    """A run approved (pay, high) whose process died after pay: wipe has not run yet."""
    tools = _tools(tmp_path)
    proc = _cli("run", _plan(tmp_path, CRASHING), "--tools", tools, "--store", url, "--approve", "yes")
    assert proc.returncode == 3, proc.stderr
    (tmp_path / "go-on").write_text("", encoding="utf-8")
    return _run_id(proc.stderr), tools


def _spec(db, run_id):
    with sqlite3.connect(db) as conn:
        return json.loads(conn.execute("SELECT spec FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])


def _set_spec(db, run_id, spec):
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET spec = ? WHERE run_id = ?", (json.dumps(spec), run_id))


# -- item 2: what is being approved --------------------------------------------------------


def test_approve_and_runs_show_show_each_waiting_call_with_its_arguments(tmp_path, capsys):
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    tools = _tools(tmp_path)
    (tmp_path / "go-on").write_text("", encoding="utf-8")
    long_note = "\u202eevil\x1b[2J" + "x" * 1000  # a bidi override, an escape sequence, a long tail
    plan = _plan(tmp_path, f"$state.a = pay(amount=5, note={json.dumps(long_note)})\n$state.c = wipe(x=$state.a)\n")
    assert main(["run", plan, "--tools", tools, "--store", url, "--approve", "wait"]) == 3
    rid = _run_id(capsys.readouterr().err)

    assert main(["runs", "show", rid, "--store", url]) == 0
    out = capsys.readouterr().out
    assert "waiting for approval (plan)" in out
    assert "c1: pay (risk high)" in out
    args_line = next(x for x in out.splitlines() if "amount=5" in x)
    assert "\\u202eevil\\u001b[2J" in args_line  # escaped, never sent to the terminal as it is
    assert "\x1b" not in out and "\u202e" not in out
    assert "more characters)" in args_line and len(args_line) < 400  # cut as the prompt cuts it

    assert main(["runs", "show", rid, "--json", "--store", url]) == 0
    waiting = json.loads(capsys.readouterr().out)["waiting"]
    assert waiting["decision"] == "plan"  # (the fields it had, unchanged)
    (call,) = waiting["calls"]
    assert (call["id"], call["tool"], call["risk"]) == ("c1", "pay", "high")
    assert call["args"].startswith("amount=5, note=") and "\\u001b" in call["args"]

    assert main(["approve", rid, "--store", url, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["status"] == "succeeded"
    assert f"approving plan of run {rid}:" in captured.err and "c1: pay (risk high)" in captured.err
    assert "amount=5, note=" in captured.err and "\x1b" not in captured.err


def test_a_tampered_waiting_record_is_shown_escaped(tmp_path, capsys):
    """The waiting record is the row's data: whatever it holds is escaped when shown."""
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    assert main(["run", _plan(tmp_path, "$state.a = pay(amount=5)\n"), "--tools", _tools(tmp_path), "--store", url,
                 "--approve", "wait"]) == 3
    rid = _run_id(capsys.readouterr().err)
    with sqlite3.connect(db) as conn:
        summary = json.loads(conn.execute("SELECT summary FROM runs WHERE run_id = ?", (rid,)).fetchone()[0])
        summary["waiting"]["calls"][0].update(tool="pay\x1b]0;owned\x07", args="\u2066x\u2069\n" + "y" * 5000)
        conn.execute("UPDATE runs SET summary = ? WHERE run_id = ?", (json.dumps(summary), rid))
    assert main(["runs", "show", rid, "--store", url]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u2066" not in out
    assert "pay\\u001b]0;owned\\u0007" in out and max(map(len, out.splitlines())) < 500
    for broken in ({"decision": "plan", "calls": 5}, {"calls": []}, "plan"):  # malformed: no traceback
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE runs SET summary = ? WHERE run_id = ?", (json.dumps({"waiting": broken}), rid))
        assert main(["runs", "show", rid, "--store", url]) == 0
        assert main(["runs", "show", rid, "--json", "--store", url]) == 0
        code = main(["approve", rid, "--store", url, "--json"])
        err = capsys.readouterr().err
        assert "Traceback" not in err and code in (0, 1, 3), (broken, err)


def test_a_call_gate_wait_shows_the_values_read_at_run_time(tmp_path, capsys):
    import sophon_dsl
    from sophon_dsl.toolsource import load_tool_sources

    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    (tmp_path / "go-on").write_text("", encoding="utf-8")
    tools, _ = load_tool_sources([_tools(tmp_path)])
    plan = "$state.a = wipe(x=41)\n$state.b = pay(amount=$state.a)\n"
    first = sophon_dsl.run(plan, tools=tools, store=url, approve=True, run_id="g1")
    assert first.status == "succeeded"
    # a run whose per-call gate is left waiting: the plan gate's decision is stored, the call's is not
    r = sophon_dsl.run(plan, tools=tools, store=url, approve="wait", approve_calls=True, run_id="g2")
    assert r.status == "waiting"
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO decisions VALUES ('g2', 'plan', ?)",
                     (json.dumps({"action": "approve", "shown": [["c2", "pay", "high"]]}),))
    r = sophon_dsl.resume("g2", store=url, tools=tools, approve="wait", approve_calls=True)
    assert r.status == "waiting"
    assert main(["runs", "show", "g2", "--json", "--store", url]) == 0
    waiting = json.loads(capsys.readouterr().out)["waiting"]
    assert waiting["kind"] == "call" and waiting["calls"][0]["args"] == "amount=41"  # the value, not $state.a


# -- item 3: a forced resume after a risk rose asks again ------------------------------------


def test_forced_resume_after_a_risk_rose_refuses_with_approve_no(tmp_path, capsys):
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    rid, tools = _crashed_run(tmp_path, url)
    _tools(tmp_path, wipe_risk="critical")  # the tools file edited: wipe low -> critical
    assert main(["resume", rid, "--store", url, "--tools", tools, "--approve", "no"]) == 1
    assert "Store.PlanChanged" in capsys.readouterr().err  # (not forced: refused as before)
    assert main(["resume", rid, "--store", url, "--tools", tools, "--force", "--approve", "no", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "rejected" and "c" not in out["state"].get("state", {})


def test_forced_resume_after_a_risk_rose_asks_at_the_prompt(tmp_path):
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    rid, tools = _crashed_run(tmp_path, url)
    _tools(tmp_path, wipe_risk="critical")
    # a session of its own: no controlling terminal, so the prompt reads standard input
    proc = _cli("resume", rid, "--store", url, "--tools", tools, "--force", "--approve", "ask", "--json",
                stdin="y\n", session=True)
    assert proc.returncode == 0, proc.stderr
    assert "c3: wipe (risk critical)" in proc.stderr and "Approve? [y/N]" in proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "succeeded" and out["state"]["state"]["c"] == 5


def test_forced_resume_with_approve_yes_approves_and_a_risk_that_did_not_rise_is_not_asked(tmp_path, capsys):
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    rid, tools = _crashed_run(tmp_path, url)
    _tools(tmp_path, extra="\n# an unrelated edit: the sources' hash changes, no risk does\n")
    # the stored approval covers every risky call as it is now: reused, --approve no never consulted
    assert main(["resume", rid, "--store", url, "--tools", tools, "--force", "--approve", "no", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["state"]["c"] == 5

    second = tmp_path / "second"
    second.mkdir()
    rid2, tools = _crashed_run(second, url)
    _tools(second, wipe_risk="critical")
    assert main(["resume", rid2, "--store", url, "--tools", tools, "--force", "--approve", "yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["state"]["c"] == 5
    with sqlite3.connect(db) as conn:
        stored = json.loads(conn.execute("SELECT decision FROM decisions WHERE run_id = ? AND name = 'plan'",
                                         (rid2,)).fetchone()[0])
    assert sorted(map(tuple, stored["shown"])) == [("c1", "pay", "high"), ("c3", "wipe", "critical")]


# -- item 11: a stored run is data, not configuration ---------------------------------------


def _evil(tmp_path):
    marker = tmp_path / "IMPORTED"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    return str(evil), marker


def _waiting_run(tmp_path, url, capsys):
    (tmp_path / "go-on").write_text("", encoding="utf-8")
    tools = _tools(tmp_path)
    assert main(["run", _plan(tmp_path, "$state.a = pay(amount=5)\n"), "--tools", tools, "--store", url,
                 "--approve", "wait"]) == 3
    return _run_id(capsys.readouterr().err), tools


def test_a_row_pointing_tools_at_another_file_is_refused_before_any_import(tmp_path, capsys):
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    rid, tools = _waiting_run(tmp_path, url, capsys)
    evil, marker = _evil(tmp_path)
    spec = _spec(db, rid)
    spec["meta"]["tools"] = [evil]
    _set_spec(db, rid, spec)
    for argv in (["resume", rid, "--approve", "no"], ["approve", rid], ["approve", rid, "--reject"]):
        assert main([*argv, "--store", url]) == 2
        err = capsys.readouterr().err
        assert "Store.ConfigUntrusted" in err and "nothing was imported" in err and evil in err
        assert not marker.exists()
    with sqlite3.connect(db) as conn:  # approve refused before storing its decision
        assert conn.execute("SELECT count(*) FROM decisions WHERE run_id = ?", (rid,)).fetchone()[0] == 0

    # whoever edits the row can recompute a plain hash: the seal is keyed, they cannot
    spec["meta"]["fingerprints"] = {evil: hashlib.sha256(Path(evil).read_bytes()).hexdigest()}
    _set_spec(db, rid, spec)
    assert main(["resume", rid, "--approve", "no", "--store", url]) == 2
    assert "Store.ConfigUntrusted" in capsys.readouterr().err and not marker.exists()

    # the tools given again on the command line: the row's are not used at all
    assert main(["approve", rid, "--tools", tools, "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "succeeded" and not marker.exists()


def test_a_row_cannot_pick_the_sandbox_the_hosts_or_the_provider(tmp_path, capsys):
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    rid, tools = _waiting_run(tmp_path, url, capsys)
    original = _spec(db, rid)
    for key, value in (("sandbox", "/"), ("allow_host", ["169.254.169.254"]), ("stdlib_config", "/etc/passwd"),
                       ("provider", "scripted:/dev/zero"), ("no_stdlib", True)):
        _set_spec(db, rid, {**original, "meta": {**original["meta"], key: value}})
        assert main(["resume", rid, "--approve", "no", "--store", url]) == 2, key
        err = capsys.readouterr().err
        assert "Store.ConfigUntrusted" in err and "Traceback" not in err, key
    _set_spec(db, rid, original)  # the row as the run recorded it: its own configuration is used
    assert main(["approve", rid, "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "succeeded"


def test_an_unsealed_row_or_another_users_key_needs_the_flags_again(tmp_path, capsys, monkeypatch):
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    rid, tools = _waiting_run(tmp_path, url, capsys)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "someone-else"))  # no run key of theirs
    assert main(["approve", rid, "--store", url]) == 2
    err = capsys.readouterr().err
    assert "Store.ConfigUntrusted" in err and "no run key" in err and f"--tools {tools}" in err
    monkeypatch.undo()
    spec = _spec(db, rid)
    del spec["meta"]["seal"]  # as rows recorded before seals were
    _set_spec(db, rid, spec)
    assert main(["approve", rid, "--store", url]) == 2
    assert "carries no seal" in capsys.readouterr().err
    assert main(["approve", rid, "--store", url, "--tools", tools, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "succeeded"


def test_a_tools_file_changed_since_the_run_began_is_not_imported_on_the_rows_word(tmp_path, capsys):
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    rid, tools = _waiting_run(tmp_path, url, capsys)
    marker = tmp_path / "IMPORTED"
    Path(tools).write_text(Path(tools).read_text() + f"\nopen({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    assert main(["approve", rid, "--store", url]) == 2
    err = capsys.readouterr().err
    assert "Store.ConfigChanged" in err and "changed since the run began" in err and not marker.exists()
    # named again on the command line, the file as it is now is the user's choice
    assert main(["approve", rid, "--store", url, "--tools", tools]) == 0
    assert marker.exists()


def test_the_run_key_is_private(tmp_path, capsys):
    from sophon_dsl.durable.trust import key_path

    _waiting_run(tmp_path, f"sqlite:///{tmp_path / 'r.db'}", capsys)
    assert os.stat(key_path()).st_mode & 0o777 == 0o600


def test_runs_list_and_show_escape_every_row_text_in_text_mode(tmp_path, capsys):
    """Every text a row holds (the goal, plan file, tool, error, state values) is shown escaped by
    `runs list` / `runs show`: a stored run is data and must not drive the terminal."""
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    hostile = "\u202eevil\x1b[31m\x07"
    tools = _tools(tmp_path, extra=f'''

@tool
def echo(x: str) -> str:
    """Returns its text."""
    return x

@tool
def boom() -> int:
    """Fails with a hostile message."""
    raise RuntimeError({hostile!r})
''')
    plan = _plan(tmp_path, f"$state.a = echo(x={json.dumps(hostile)})\n$state.b = boom()\n")
    assert main(["run", plan, "--tools", tools, "--store", url]) == 1
    rid = _run_id(capsys.readouterr().err)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET plan_id = ? WHERE run_id = ?", (hostile, rid))
    for argv in (["runs", "list"], ["runs", "show", rid], ["runs", "show", rid, "--log"]):
        assert main([*argv, "--store", url]) == 0
        out = capsys.readouterr().out
        for ch in ("\u202e", "\x1b", "\x07"):
            assert ch not in out, (argv, out)
        assert "\\u202eevil" in out, (argv, out)
    assert main(["runs", "show", rid, "--json", "--store", url]) == 0
    shown = json.loads(capsys.readouterr().out)  # --json stays exact data (escaping is JSON's own)
    assert shown["state"]["state"]["a"] == hostile
