"""`sophon-dsl run` and `sophon-dsl dry-run` (public contract of issue 3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import sophon_dsl
from sophon_dsl.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PLAN = str(EXAMPLES / "competitors.plan")
TOOLS = str(EXAMPLES / "competitors_tools.py")
INPUT = "@" + str(EXAMPLES / "competitors_input.json")


def test_run_bundled_example_json(capsys):
    assert main(["run", PLAN, "--tools", TOOLS, "--input", INPUT, "--approve", "yes", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "succeeded"
    assert set(result) >= {"status", "state", "output", "calls"}
    state = result["state"]["state"]
    assert state["receipt"]["recipients"] == ["ana@example.com", "bo@example.com"]
    assert "| Globex |" in state["sheet"]["markdown"]
    assert [c["id"] for c in result["calls"]] == ["c1", "c2", "c3", "c4", "c5"]
    for call in result["calls"]:
        assert set(call) >= {"id", "tool", "status", "attempts", "error", "reason", "started_at", "ended_at"}
        assert call["status"] == "succeeded" and call["error"] is None


def test_run_without_approval_is_rejected_and_runs_nothing(capsys):
    assert main(["run", PLAN, "--tools", TOOLS, "--input", INPUT, "--approve", "no", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "rejected"
    assert result["error"]["error"] == "Approval.Rejected"
    assert all(c["status"] == "pending" for c in result["calls"])


def test_run_progress_lines_on_a_pipe(capsys):
    assert main(["run", PLAN, "--tools", TOOLS, "--input", INPUT, "--approve", "yes"]) == 0
    err = capsys.readouterr().err
    assert "[c1] web.search: running" in err and "[c5] gmail.send: succeeded" in err
    assert "plan succeeded: 5 succeeded" in err


def test_run_failure_cascades_and_exits_1(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text('†state.a = web.search(query="Nobody Inc")\n'
                    '†state.s = sheet.create(title="t", rows=[†state.a])\n'
                    '†state.b = web.search(query="Globex")\n', encoding="utf-8")
    assert main(["run", str(plan), "--tools", TOOLS, "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    status = {c["id"]: c["status"] for c in result["calls"]}
    assert status == {"c1": "failed", "c2": "skipped", "c3": "succeeded"}
    assert result["calls"][0]["error"]["error"] == "Tool.Failed"
    assert result["state"]["state"]["b"]["name"] == "Globex"


def test_run_usage_errors(tmp_path, capsys):
    assert main(["run", PLAN, "--tools", TOOLS, "--input", "{not json", "--approve", "yes"]) == 2
    assert "--input: invalid JSON at line 1 column 2" in capsys.readouterr().err
    assert main(["run", PLAN, "--tools", TOOLS, "--input", "@" + str(tmp_path / "none.json")]) == 2


def test_run_invalid_plan_runs_nothing(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text('†state.a = web.serch(query="x")\n', encoding="utf-8")
    assert main(["run", str(plan), "--tools", TOOLS]) == 1
    assert "E201" in capsys.readouterr().err


def test_dry_run_with_mocks(tmp_path, capsys):
    mocks = tmp_path / "mocks.yaml"
    mocks.write_text("web.search:\n  latency: 0.2\n  result: {name: X, founded: 1, employees: 2, pricing: p}\n"
                     "c4:\n  latency: 0.1\n", encoding="utf-8")
    assert main(["dry-run", PLAN, "--tools", TOOLS, "--mocks", str(mocks), "--input", INPUT, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "succeeded"
    groups = report["parallel_groups"]
    assert sorted(groups[0]) == ["c1", "c2", "c3"]
    assert abs(report["predicted_makespan"] - 0.3) < 0.05
    assert report["approvals"]


def test_dry_run_missing_mocks_file_is_usage_error(capsys):
    assert main(["dry-run", PLAN, "--tools", TOOLS, "--mocks", "/nonexistent/mocks.yaml"]) == 2


def test_python_api_exports_runtime():
    for name in ("run", "arun", "start", "dry_run"):
        assert callable(getattr(sophon_dsl, name))


def test_readme_first_command_runs_the_example():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "sophon-dsl run examples/competitors.plan" in readme
    proc = subprocess.run([sys.executable, "-m", "sophon_dsl.cli", "run", "examples/competitors.plan",
                           "--tools", "examples/competitors_tools.py",
                           "--input", "@examples/competitors_input.json", "--approve", "yes"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "msg-" in proc.stdout
