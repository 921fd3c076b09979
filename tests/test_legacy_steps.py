"""Sophon ExecutionPlans and JarvisCore step lists run end to end with an LLM executor."""

from __future__ import annotations

import json

import sophon_dsl
from sophon_dsl.cli import main

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
             {"task": "count rows", "success_criterion": "row_count is known", "depends_on": [1]}]
    plan = sophon_dsl.loads(json.dumps(steps), format="json")
    assert plan.call_ids() == ["step1", "step2"]
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
