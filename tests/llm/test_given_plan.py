"""The plan as a context message (seed 004, issue 26 item 5): an agent handed an existing plan
(``Agent.run(plan=...)``, ``sophon-dsl agent REQUEST --plan FILE --state @state.json``)
continues from it, and ``stateless`` sends each turn the plan and the state only."""

from __future__ import annotations

import asyncio
import json

import pytest

from sophon_dsl.cli import main
from sophon_dsl.diagnostics import DiagnosticError
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.given_plan import as_plan
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.tools import tool

# seed 004, "Example: Planning one step ahead": the happy path, with billing already checked
REFUND_PLAN = [
    {"_tool": "checkBillingHistory", "customerId": "†input.customerId", "_outputPath": "†state.billingHistory"},
    {"_tool": "issueRefund", "customerId": "†input.customerId", "amount": "†input.amount"},
]
STATE = {"billingHistory": {"orders": 5, "lastChargeback": "2025-09-10"}}
INPUT = {"customerId": "cust_123", "amount": 50.0}
FOLLOWS = '$state.refund = issueRefund(customerId=$input.customerId,amount=$input.amount)\nreturn $state.refund\n'
# the reply is given only when the request holds the handed plan and the state it stands at
GIVEN = r"(?s)State \(\$state\): \{\"billingHistory\".*lastChargeback.*Plan \(given to you.*checkBillingHistory"

TOOLS = '''
from pathlib import Path
from sophon_dsl.tools import tool
LOG = Path({log!r})

@tool(name="checkBillingHistory")
def check(customerId: str) -> dict:
    LOG.open("a").write("checkBillingHistory\\n")
    return {{"orders": 5}}

@tool(name="issueRefund")
def refund(customerId: str, amount: float) -> dict:
    LOG.open("a").write("issueRefund\\n")
    return {{"confirmationId": "refund_xyz789"}}

@tool(name="escalateToSupervisor")
def escalate(customerId: str) -> str:
    LOG.open("a").write("escalateToSupervisor\\n")
    return "escalated"
'''


def refund_tools(ran: list):
    @tool(name="checkBillingHistory")
    def check(customerId: str) -> dict:
        ran.append("checkBillingHistory")
        return {"orders": 5}

    @tool(name="issueRefund")
    def refund(customerId: str, amount: float) -> dict:
        ran.append("issueRefund")
        return {"confirmationId": "refund_xyz789"}

    return [check, refund]


def test_cli_agent_continues_from_a_plan_file_and_a_state_file(tmp_path, capsys):
    log = tmp_path / "log.txt"
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS.format(log=str(log)))
    (tmp_path / "plan.json").write_text(json.dumps(REFUND_PLAN, ensure_ascii=False))
    (tmp_path / "state.json").write_text(json.dumps(STATE))
    script = tmp_path / "replies.yaml"
    script.write_text(json.dumps({"keyed": [{"match": GIVEN, "reply": FOLLOWS}]}))
    code = main(["agent", "I'd like a refund for my last order.", "--tools", str(tools), "--no-stdlib",
                 "--provider", f"scripted:{script}", "--plan", str(tmp_path / "plan.json"),
                 "--state", f"@{tmp_path / 'state.json'}", "--input", json.dumps(INPUT), "--approve", "yes",
                 "--json", "--no-store"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert out["output"] == {"confirmationId": "refund_xyz789"}
    assert out["state"]["state"]["billingHistory"] == STATE["billingHistory"]
    assert log.read_text().split() == ["issueRefund"]         # billing was not checked again, no escalation


def test_cli_plan_flag_bad_input(tmp_path, capsys):
    bad = tmp_path / "plan.sophon"
    bad.write_text('$state.a = f(x=\n')
    script = tmp_path / "r.yaml"
    script.write_text(json.dumps(["return 1"]))
    base = ["agent", "go", "--no-stdlib", "--provider", f"scripted:{script}", "--no-store"]
    assert main([*base, "--plan", str(bad), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "invalid" and out["diagnostics"][0]["code"].startswith("E")
    assert out["diagnostics"][0]["line"] == 1
    assert main([*base, "--plan", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_run_with_a_plan_object_text_or_data():
    for plan in (REFUND_PLAN, {"type": "plan", "plan": REFUND_PLAN}, json.dumps(REFUND_PLAN),
                 "$state.billingHistory = checkBillingHistory(customerId=$input.customerId)\n"
                 "issueRefund(customerId=$input.customerId, amount=$input.amount)\n"):
        ran: list = []
        provider = ScriptedProvider(keyed=[KeyedReply(GIVEN, FOLLOWS)])
        agent = Agent(provider, tools=refund_tools(ran), stdlib=False, approve="yes")
        result = agent.run("I'd like a refund for my last order.", plan=plan, state=STATE, input=INPUT)
        assert result.ok and result.output == {"confirmationId": "refund_xyz789"}, result.error
        assert ran == ["issueRefund"]
        assert [c.tool for c in as_plan(plan).calls] == ["checkBillingHistory", "issueRefund"]
    with pytest.raises(DiagnosticError):
        Agent(ScriptedProvider(["return 1"]), stdlib=False).run("go", plan="$state.a = f(x=\n")
    with pytest.raises(TypeError, match="plan must be"):
        as_plan(42)


def test_stateless_turns_are_sent_the_plan_and_the_state_only():
    ran: list = []
    provider = ScriptedProvider(keyed=[
        KeyedReply(r"Plan \(given to you", "$state.billingHistory = checkBillingHistory(customerId=$input.customerId)"),
        KeyedReply(r"Plan \(your previous turn\)", FOLLOWS)])
    agent = Agent(provider, tools=refund_tools(ran), stdlib=False, approve="yes", stateless=True)
    result = agent.run("refund my last order", plan=REFUND_PLAN, input=INPUT)
    assert result.ok and ran == ["checkBillingHistory", "issueRefund"]
    first, second = (c["messages"] for c in provider.calls)
    assert [m.role for m in first] == [m.role for m in second] == ["system", "user"]
    assert "Plan (given to you" in first[1].content and "State ($state): {}" in first[1].content
    # turn 2: the plan the model wrote and the state it produced, not turn 1's request or reply
    assert "Plan (your previous turn)" in second[1].content and "c1 succeeded" in second[1].content
    assert '"orders":5' in second[1].content.replace(" ", "")
    assert "given to you" not in second[1].content
    assert second[0].content == first[0].content


def test_a_recorded_run_keeps_the_plan_and_stateless_for_its_resume(tmp_path):
    from sophon_dsl.durable import open_store

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    ran: list = []
    agent = Agent(ScriptedProvider(keyed=[KeyedReply(GIVEN, FOLLOWS)]), tools=refund_tools(ran), stdlib=False,
                  approve="yes", stateless=True, store=url, run_id="g1")
    first = agent.run("refund", plan=REFUND_PLAN, state=STATE, input=INPUT)
    assert first.ok
    again = Agent(ScriptedProvider(["return 0"]), tools=refund_tools(ran), stdlib=False, approve="yes")
    resumed = asyncio.run(again.aresume("g1", store=url))
    assert again.stateless is True and resumed.output == first.output and ran == ["issueRefund"]
    with open_store(url) as s:
        assert "checkBillingHistory" in json.dumps(s.get_run("g1"))
