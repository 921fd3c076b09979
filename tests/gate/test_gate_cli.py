"""The call gate through the CLI (issue 24, items 1, 4 and 6): the new user's reproductions,
each in a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "sophon_dsl"]

TOOLS = """\
import os
from sophon_dsl import tool

@tool(risk="high")
def charge(amount: int) -> int:
    with open(os.environ["CHARGED"], "a") as fh:
        fh.write(f"{amount}\\n")
    return amount

@tool
def numbers(n: int) -> list[int]:
    return list(range(n))
"""

MAP_PLAN = "$state.r = map($input.xs, as=x) { $local.c = charge(amount=$x) }\n"


@pytest.fixture
def work(tmp_path, monkeypatch):
    (tmp_path / "t.py").write_text(TOOLS)
    (tmp_path / "m.plan").write_text(MAP_PLAN)
    monkeypatch.setenv("CHARGED", str(tmp_path / "charged.txt"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *argv], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())


def charged(work: Path) -> list[str]:
    path = work / "charged.txt"
    return path.read_text().split() if path.exists() else []


def test_a_risky_tool_in_a_map_body_is_not_run_without_approval(work):
    proc = cli("run", "m.plan", "--tools", "t.py", "--no-store", "--input", '{"xs":[5,7]}', cwd=work)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert charged(work) == []
    assert "c1[*].charge" in proc.stderr  # the refusal names the map body's call
    assert "Traceback" not in proc.stderr


def test_the_same_map_runs_when_approved(work):
    proc = cli("run", "m.plan", "--tools", "t.py", "--no-store", "--input", '{"xs":[5,7]}', "--approve", "yes",
               cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert sorted(charged(work)) == ["5", "7"]


def test_stdlib_files_write_in_a_map_body_needs_approval(work):
    sandbox = work / "sandbox"
    sandbox.mkdir()
    plan = work / "w.plan"
    plan.write_text('$state.r = map($input.names, as=n) { $local.w = files.write(path=$n, content="x") }\n')
    proc = cli("run", "w.plan", "--no-store", "--sandbox", str(sandbox), "--input", '{"names":["a.txt","b.txt"]}',
               cwd=work)
    assert proc.returncode != 0
    assert list(sandbox.iterdir()) == []
    ok = cli("run", "w.plan", "--no-store", "--sandbox", str(sandbox), "--input", '{"names":["a.txt"]}',
             "--approve", "yes", cwd=work)
    assert ok.returncode == 0, ok.stderr
    assert [p.name for p in sandbox.iterdir()] == ["a.txt"]


def test_dry_run_and_graph_show_map_body_risk(work):
    dry = cli("dry-run", "m.plan", "--tools", "t.py", "--input", '{"xs":[5,7]}', cwd=work)
    assert dry.returncode == 0, dry.stderr
    assert "approval needed for: c1[*].charge (charge, high, each item of map c1: 2 item(s))" in dry.stdout
    as_json = cli("dry-run", "m.plan", "--tools", "t.py", "--input", '{"xs":[5,7]}', "--json", cwd=work)
    approvals = json.loads(as_json.stdout)["approvals"]
    assert [(a["id"], a["risk"], a["map"], a["items"]) for a in approvals] == [("c1[*].charge", "high", "c1", 2)]
    graph = cli("graph", "m.plan", "--tools", "t.py", cwd=work)
    assert "⚠ risk high, approval for each item" in graph.stdout
    assert "c1#91;*#93;.charge" in graph.stdout and ":::risky" in graph.stdout
    data = json.loads(cli("graph", "m.plan", "--tools", "t.py", "--format", "json", cwd=work).stdout)
    assert data["risky"] == [{"id": "c1[*].charge", "risk": "high", "map": "c1"}]
    assert charged(work) == []


def test_local_data_through_a_map_over_files_list_is_not_sent_unapproved(work):
    sandbox = work / "sandbox"
    sandbox.mkdir()
    (sandbox / "secret-payroll.txt").write_text("salary")
    plan = work / "leak.plan"
    plan.write_text('$state.names = files.list(path=".")\n'
                    '$state.r = map($state.names.entries, as=f) '
                    '{ $local.g = http.get(url="https://127.0.0.1:9/?f=†f.name") }\n')
    proc = cli("run", "leak.plan", "--no-store", "--sandbox", str(sandbox), "--approve", "no", "--json", cwd=work)
    assert proc.returncode != 0
    result = json.loads(proc.stdout)
    assert result["status"] == "rejected"
    assert not [c for c in result["calls"] if c["tool"] == "http.get" and c["status"] != "pending"]


def test_a_nested_map_past_the_budget_stops_with_too_many_calls(work):
    plan = work / "n.plan"
    plan.write_text("$state.xs = numbers(n=40)\n"
                    "$state.r = map($state.xs, as=x) {\n"
                    "  $local.inner = map($state.xs, as=y) { $local.v = numbers(n=1) }\n"
                    "}\n")
    proc = cli("run", "n.plan", "--tools", "t.py", "--no-store", "--max-expanded-calls", "500", "--json", cwd=work)
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["error"]["error"] == "Plan.TooManyCalls"
    assert "max_expanded_calls" in result["error"]["cause"] and "map c2[" in result["error"]["cause"]
    bad = cli("run", "n.plan", "--tools", "t.py", "--no-store", "--max-calls", "0", cwd=work)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
