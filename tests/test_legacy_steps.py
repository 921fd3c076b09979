"""Sophon ExecutionPlans and JarvisCore step lists run end to end with an LLM executor."""

from __future__ import annotations

import json

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.loader import parse

SOPHON = {
    "id": "plan_abc123", "goal": "Compare competitors and email the team",
    "steps": [
        {"id": "s1", "description": "Research Acme Corp", "dependsOn": [], "toolHints": ["web.search"]},
        {"id": "s2", "description": "Research Globex", "dependsOn": [], "toolHints": ["web.search"]},
        {"id": "s4", "description": "Build comparison spreadsheet", "dependsOn": ["s1", "s2"]},
        {"id": "s5", "description": "Email the team", "dependsOn": ["s4"], "estimatedRisk": "Medium"},
    ],
}


def test_steps_are_wired_as_data_flow():
    plan = sophon_dsl.loads(json.dumps(SOPHON), format="json")
    s4 = plan.calls[2]
    assert s4.output.paths[0].text() == "†state.steps.s4"
    inputs = s4.param("inputs").value
    assert [(k, v.text()) for k, v in inputs.entries] == [("s1", "†state.steps.s1"), ("s2", "†state.steps.s2")]
    assert s4.after == ("s1", "s2")
    assert sophon_dsl.check(plan) == []


def test_jarvis_steps_without_ids():
    steps = [{"task": "find the API base URL", "success_criterion": "a URL is recorded",
              "expected_findings": ["api_base_url"]},
             {"task": "count rows", "success_criterion": "row_count is known", "depends_on": [1]},
             {"task": "report", "success_criterion": "the report is sent", "depends_on": [2]}]
    plan = sophon_dsl.loads(json.dumps(steps), format="json")
    assert plan.call_ids() == ["step1", "step2", "step3"]
    assert plan.calls[1].param("inputs").value.entries[0][0] == "step1"
    assert plan.calls[0].success_criterion == "a URL is recorded"


def test_run_sophon_plan_with_scripted_model(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(SOPHON), encoding="utf-8")
    replies = tmp_path / "replies.yaml"
    # each step is a sub-agent (issue 26): its reply is a solution whose output is the step's result
    replies.write_text("- 'return {\"summary\": \"acme\"}'\n- 'return {\"summary\": \"globex\"}'\n"
                       "- 'return {\"summary\": \"sheet\"}'\n- 'return {\"summary\": \"sent\"}'\n", encoding="utf-8")
    assert main(["run", str(plan), "--json"]) == 1  # latent steps and no model: refused up front
    assert "E206" in capsys.readouterr().err
    assert main(["run", str(plan), "--provider", f"scripted:{replies}", "--approve", "yes", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "succeeded"
    steps = result["state"]["state"]["steps"]
    assert set(steps) == {"s1", "s2", "s4", "s5"}
    assert sorted(v["summary"] for v in steps.values()) == ["acme", "globex", "sent", "sheet"]


def test_run_provider_usage_error(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(SOPHON), encoding="utf-8")
    assert main(["run", str(plan), "--provider", "nosuchprovider"]) == 2
    assert "--provider" in capsys.readouterr().err


def test_jarvis_steps_follow_the_planner_rules(tmp_path, capsys):
    """Issue 26 item 3: a JarvisCore step list is checked on import as the goal planner checks
    a reply: 3-10 steps, a criterion that is there and is not the task, snake_case findings."""
    bad = tmp_path / "steps.json"
    bad.write_text(json.dumps([
        {"task": "Find the API base URL", "success_criterion": "", "expected_findings": ["BadKey"]},
        {"task": "Count rows", "success_criterion": "count rows", "depends_on": [1]},
    ], indent=1), encoding="utf-8")
    assert main(["check", str(bad), "--format", "json"]) == 1
    found = [(d["code"], d["path"]) for d in json.loads(capsys.readouterr().out)]
    assert found == [("E111", "$"), ("E111", "$[0].success_criterion"), ("E111", "$[0].expected_findings[0]"),
                     ("E111", "$[1].success_criterion")]
    no_criterion = [{"task": "a", "success_criterion": "a done"}, {"task": "b"},
                    {"task": "c", "success_criterion": "c"}]
    diags = parse(json.dumps(no_criterion), "json").diagnostics
    assert [(d.code, d.path) for d in diags] == [("E111", "$[1]"), ("E111", "$[2].success_criterion")]
    ok = [{"task": f"t{i}", "success_criterion": f"c{i}", "expected_findings": ["api_base_url"],
           "subagent_hint": "analyst"} for i in range(3)]
    plan = sophon_dsl.loads(json.dumps(ok), format="json")
    assert plan.calls[0].param("subagent_hint").value.value == "researcher"   # mapped as the planner maps it
    assert sophon_dsl.check(plan) == []
    eleven = [{"task": f"t{i}", "success_criterion": f"c{i}"} for i in range(11)]
    assert [d.code for d in parse(json.dumps(eleven), "json").diagnostics] == ["E111"]
    # a Sophon ExecutionPlan is not a step list of the planner: two steps are fine
    assert parse(json.dumps({"steps": SOPHON["steps"][:2]}), "json").diagnostics == []
