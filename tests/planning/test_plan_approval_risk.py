"""Plan-level approval asks only for plans with a call at medium risk or above (issue 26 items 6
and 9): a lazy plan of harmless calls runs without asking, whoever approves; with
``--planning auto`` a request the classifier sends to plan-first runs the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sophon_dsl.cli import main
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.model import Risk
from sophon_dsl.tools import tool

ACME = ("Search my emails for the invoice from Acme, then create a Jira ticket with the amount and send "
        "a summary to the team Slack channel")     # the classifier scores it 4: plan first
HARMLESS = '$state.hits = web.search(query="acme invoice")\nreturn $state.hits\n'
RISKY = '$state.hits = web.search(query="acme invoice")\n$state.sent = mail.send(to="team", text="x")\n' \
        'return $state.sent\n'


def make_tools(ran: list):
    @tool(name="web.search", risk="low", description="Search the web")
    async def search(query: str) -> list:
        ran.append("web.search")
        return [query]

    @tool(name="mail.send", risk="medium", description="Send mail")
    async def send(to: str, text: str) -> str:
        ran.append("mail.send")
        return "sent"

    return [search, send]


def says_no(asked: list):
    def approver(request):
        asked.append((request.kind, [c["tool"] for c in request.calls]))
        return False
    return approver


def agent(reply: str, ran: list, asked: list, events: list, **kw) -> Agent:
    provider = ScriptedProvider(keyed=[KeyedReply("Request: ", reply)])
    return Agent(provider, tools=make_tools(ran), stdlib=False, approve=says_no(asked),
                 on_event=events.append, **kw)


def test_a_lazy_plan_with_no_risky_call_runs_without_asking_an_approver_that_would_say_no():
    ran, asked, events = [], [], []
    result = agent(HARMLESS, ran, asked, events, mode="lazy").run("find the acme invoice")
    assert result.ok and result.output == ["acme invoice"]
    assert asked == [] and ran == ["web.search"]
    assert not [e for e in events if e.type.startswith("approval_")]
    assert "agent_dry_run" in [e.type for e in events]       # still planned first: checked and dry-run


def test_a_lazy_plan_with_a_medium_call_is_asked_about_once_and_no_rejects_it():
    ran, asked, events = [], [], []
    result = agent(RISKY, ran, asked, events, mode="lazy").run("find and send")
    assert result.status == "rejected" and ran == []
    assert asked == [("plan", ["mail.send"])]


def test_approval_risk_none_reviews_every_plan():
    ran, asked, events = [], [], []
    result = agent(HARMLESS, ran, asked, events, mode="lazy", approval_risk=Risk.NONE).run("find")
    assert result.status == "rejected" and asked == [("plan", ["web.search"])] and ran == []


def test_planning_auto_sends_the_request_to_plan_first_and_a_harmless_plan_runs_without_a_prompt():
    ran, asked, events = [], [], []
    result = agent(HARMLESS, ran, asked, events, planning="auto").run(ACME)
    assert result.ok and ran == ["web.search"] and asked == []
    assert result.to_json()["planning"]["plan"] is True and result.to_json()["planning"]["score"] == 4
    types = [e.type for e in events]
    assert "agent_dry_run" in types and not [t for t in types if t.startswith("approval_")]


def test_cli_planning_auto_runs_a_harmless_plan_first_without_a_plan_approval(tmp_path, capsys):
    tools = tmp_path / "tools.py"
    tools.write_text("from sophon_dsl.tools import tool\n\n@tool(name='web.search', risk='low')\n"
                     "async def search(query: str) -> list:\n    return [query]\n")
    script = tmp_path / "replies.yaml"
    script.write_text(json.dumps({"keyed": [{"match": "Request: ", "reply": HARMLESS}]}))
    code = main(["agent", ACME, "--tools", str(tools), "--no-stdlib", "--provider", f"scripted:{script}",
                 "--planning", "auto", "--approve", "no", "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert code == 0 and out["status"] == "succeeded" and out["output"] == ["acme invoice"]
    assert out["planning"]["plan"] is True and out["planning"]["decided_by"] == "heuristic"
    assert "approv" not in captured.err.lower()


def test_cli_approve_ask_shows_no_prompt_for_a_harmless_plan_first_request(tmp_path):
    """``--approve ask`` with no terminal to answer on (a new session, stdin closed): a prompt
    would be refused ("no answer at the prompt"); the harmless plan runs without one."""
    tools = tmp_path / "tools.py"
    tools.write_text("from sophon_dsl.tools import tool\n\n@tool(name='web.search', risk='low')\n"
                     "async def search(query: str) -> list:\n    return [query]\n")
    script = tmp_path / "replies.yaml"
    script.write_text(json.dumps({"keyed": [{"match": "Request: ", "reply": HARMLESS}]}))
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "sophon_dsl", "agent", ACME, "--tools", str(tools), "--no-stdlib",
                           "--provider", f"scripted:{script}", "--planning", "auto", "--approve", "ask",
                           "--no-store"], cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          start_new_session=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "plan first (lazy)" in proc.stderr and "Approve?" not in proc.stderr
    assert "approval" not in proc.stderr
