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
