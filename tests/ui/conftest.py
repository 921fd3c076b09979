"""Fixtures shared by the dashboard tests."""

from __future__ import annotations

import json

import pytest

from .helpers import cli, make_plan


@pytest.fixture
def agent_and_goal_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    make_plan(tmp_path, "unused.plan", "")
    script = tmp_path / "agent.json"
    script.write_text(json.dumps({"turns": ['†state.a = echo(x="<i>one</i>")\n',
                                            '{"calls": [], "output": {"done": "†state.a"}}']}), encoding="utf-8")
    agent = cli("agent", "say one", "--tools", "tools.py", "--no-stdlib", "--store", url,
                "--provider", f"scripted:{script}", "--json", cwd=tmp_path)
    assert agent.returncode == 0, agent.stderr
    agent_id = json.loads(agent.stdout)["run_id"]
    (tmp_path / "planner.yaml").write_text(
        'keyed:\n  - match: "Goal:"\n    reply: \'{"steps": [{"task": "Echo alpha", "success_criterion": "echoed"},'
        ' {"task": "Echo beta", "success_criterion": "echoed"}, {"task": "Echo gamma", "success_criterion":'
        ' "echoed", "depends_on": [2]}]}\'\n', encoding="utf-8")
    (tmp_path / "agents.yaml").write_text(
        'keyed:\n  - match: "Request: Echo (\\\\w+)"\n    reply: "return \\"done\\""\n', encoding="utf-8")
    (tmp_path / "evaluator.yaml").write_text(
        'keyed:\n  - match: "Task: Echo beta"\n    reply: \'{"verdict": "partial", "confidence": 0.6, "note": "half '
        '<b>done</b>", "facts": {"beta_size": 2}}\'\n'
        '  - match: "Task:"\n    reply: \'{"verdict": "pass", "confidence": 0.9, "note": "ok", "facts": '
        '{"found": "yes"}}\'\n', encoding="utf-8")
    goal = cli("goal", "Echo things", "--tools", "tools.py", "--no-stdlib", "--store", url,
               "--provider", f"scripted:{tmp_path / 'agents.yaml'}",
               "--planner-provider", f"scripted:{tmp_path / 'planner.yaml'}",
               "--evaluator-provider", f"scripted:{tmp_path / 'evaluator.yaml'}", "--json", cwd=tmp_path)
    assert goal.returncode == 0, goal.stderr
    goal_id = goal.stderr.split("goal run id: ", 1)[1].split()[0]
    yield url, agent_id, goal_id
