"""`sophon-dsl goal`: the seed's worked example end to end (calendar, Confluence, email,
Jira), the JSON contract and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sophon_dsl.cli import main

EX = Path(__file__).resolve().parents[2] / "examples" / "goals"
GOAL = ("Check my Google Calendar for meetings tomorrow, draft a preparation email for each meeting with relevant "
        "context from my Confluence pages, and create a Jira ticket to review the quarterly report")


def _argv(*extra: str, planner: str | None = None) -> list[str]:
    return ["goal", GOAL, "--tools", str(EX / "meeting_tools.py"), "--provider", f"scripted:{EX / 'agents.yaml'}",
            "--planner-provider", f"scripted:{planner or EX / 'planner.yaml'}",
            "--evaluator-provider", f"scripted:{EX / 'evaluator.yaml'}", *extra]


def test_the_seeds_worked_example_runs_end_to_end(capsys):
    assert main(_argv("--approve", "yes")) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["facts"] == {"meeting_count": 2, "report_page": "https://wiki.example/q3",
                               "ticket_key": "OPS-42", "draft_count": 2}
    assert result["output"]["s4"] == {"key": "OPS-42", "title": "Review the quarterly report"}
    assert len(result["output"]["s3"]) == 2 and "https://wiki.example/q3" in result["output"]["s3"][0]
    # the verdict lines on stderr: the emails wait for the calendar and the pages, the ticket for the calendar
    lines = [line.strip()[:4] for line in err.splitlines() if line.strip().startswith("[s")]
    assert lines.index("[s3]") > max(lines.index("[s1]"), lines.index("[s2]"))
    assert lines.index("[s4]") > lines.index("[s1]")
    assert "goal complete: 4 step(s) run, 0 replan(s)" in err


def test_json_contract(capsys):
    assert main(_argv("--approve", "yes", "--json")) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"status", "output", "facts", "goal_execution"} and result["status"] == "complete"
    ex = result["goal_execution"]
    assert [s["id"] for s in ex["steps"]] == ["s1", "s2", "s3", "s4"]
    assert all(s["status"] == "done" and s["verdict"] == "pass" for s in ex["steps"])
    assert (ex["replans"], ex["steps_run"]) == (0, 4) and isinstance(ex["elapsed_s"], float)


def test_refused_approvals_off_a_terminal_end_the_run_hitl(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", open("/dev/null"))
    assert main(_argv("--json")) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "hitl"
    assert {s["id"]: s["verdict"] for s in result["goal_execution"]["steps"]}["s4"] == "hitl"


def test_a_planner_error_exits_1(tmp_path, capsys):
    bad = tmp_path / "planner.yaml"
    bad.write_text('keyed:\n  - match: "Goal:"\n    reply: "{\\"steps\\": []}"\n', encoding="utf-8")
    assert main(_argv("--json", planner=str(bad))) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "failed" and "planner error" in result["error"]


@pytest.mark.parametrize("extra, message", [
    (["--max-replans", "-1"], "--max-replans must be at least 0"),
    (["--max-goal-steps", "0"], "--max-goal-steps must be at least 1"),
    (["--max-turns", "0"], "--max-turns must be at least 1"),
    (["--input", "{bad"], "--input"),
])
def test_usage_errors_exit_2(extra, message, capsys):
    assert main(_argv(*extra)) == 2
    assert message in capsys.readouterr().err


def test_an_empty_goal_and_a_bad_environment_limit_exit_2(capsys, monkeypatch):
    assert main(["goal", "  ", "--provider", f"scripted:{EX / 'agents.yaml'}"]) == 2
    assert "GOAL is empty" in capsys.readouterr().err
    monkeypatch.setenv("MAX_GOAL_STEPS", "lots")
    assert main(_argv()) == 2
    assert "MAX_GOAL_STEPS must be a whole number" in capsys.readouterr().err


def test_a_goal_waiting_for_a_person_continues_with_approve(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", open("/dev/null"))
    (tmp_path / "t.py").write_text("from sophon_dsl import tool\n\n@tool\ndef look(q: str) -> str:\n"
                                   "    '''Looks.'''\n    return q.upper()\n", encoding="utf-8")
    (tmp_path / "planner.yaml").write_text(
        'keyed:\n  - match: "Goal:"\n    reply: \'{"steps": [{"task": "Look up alpha", "success_criterion": "found"},'
        ' {"task": "Look up beta", "success_criterion": "found"}, {"task": "Look up gamma", "success_criterion":'
        ' "found", "depends_on": [2]}]}\'\n', encoding="utf-8")
    (tmp_path / "agents.yaml").write_text(
        'keyed:\n  - match: "Request: Look up (\\\\w+)"\n    reply: "return \\"done\\""\n', encoding="utf-8")
    (tmp_path / "evaluator.yaml").write_text(
        'keyed:\n  - match: "Task: Look up beta"\n'
        '    reply: \'{"verdict": "hitl", "confidence": 0.5, "note": "ask"}\'\n'
        '  - match: "Task:"\n    reply: \'{"verdict": "pass", "confidence": 0.9, "note": "ok"}\'\n', encoding="utf-8")
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    argv = ["goal", "Look things up", "--tools", str(tmp_path / "t.py"), "--provider",
            f"scripted:{tmp_path / 'agents.yaml'}", "--planner-provider", f"scripted:{tmp_path / 'planner.yaml'}",
            "--evaluator-provider", f"scripted:{tmp_path / 'evaluator.yaml'}", "--store", store, "--json"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    first = json.loads(out)
    run_id = err.split("goal run id: ", 1)[1].split()[0]
    assert first["status"] == "hitl" and run_id.startswith("goal-")
    assert main(["runs", "list", "--store", store, "--status", "waiting", "--json"]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["approve", run_id, "--store", store, "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["status"] == "complete"
    assert [(s["id"], s["status"]) for s in done["goal_execution"]["steps"]] == [
        ("s1", "done"), ("s2", "done"), ("s3", "done")]
    assert main(["approve", run_id, "--store", store]) == 1      # nothing waits any more
    assert "not waiting" in capsys.readouterr().err
