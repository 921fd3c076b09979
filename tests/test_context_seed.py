"""A context list's input and state messages seed the run (issue 10, item 17).

Seed 004 sends the planner a context list: ``input`` / ``state`` messages, then the plan.
Run as a document, that data is the run's initial ``†input`` / ``†state`` unless the
caller gives its own (``input=`` / ``state=``, ``--input`` / ``--state``).
"""

from __future__ import annotations

import json

import pytest

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.loader import parse
from sophon_dsl.runtime import PlanInvalid
from sophon_dsl.syntax.doc_printer import dump_json, dump_yaml

# seed 004's refund request and billing history, with a plan that reads both
CONTEXT = [
    {"type": "input", "request": "I'd like a refund for my last order.", "customerId": "cust_123",
     "amount": 50.0},
    {"type": "state", "billingHistory": {"orders": 5, "lastChargeback": "2025-09-10"}},
    {"type": "plan", "plan": [
        {"_tool": "issueRefund", "customerId": "†input.customerId", "amount": "†input.amount",
         "history": "†state.billingHistory", "_outputPath": "†state.refund"},
    ]},
]

TOOLS = '''
from sophon_dsl import tool


@tool
def issueRefund(customerId: str, amount: float, history: dict) -> dict:
    return {"customerId": customerId, "amount": amount, "orders": history["orders"]}
'''


@sophon_dsl.tool
def issueRefund(customerId: str, amount: float, history: dict) -> dict:
    return {"customerId": customerId, "amount": amount, "orders": history["orders"]}


@pytest.fixture
def context_file(tmp_path):
    path = tmp_path / "context.json"
    path.write_text(json.dumps(CONTEXT), encoding="utf-8")
    return path


@pytest.fixture
def tools_file(tmp_path):
    path = tmp_path / "refund_tools.py"
    path.write_text(TOOLS, encoding="utf-8")
    return path


def test_load_keeps_the_messages_data(context_file):
    plan = sophon_dsl.load(str(context_file))
    assert plan.initial.input == {"request": "I'd like a refund for my last order.",
                                  "customerId": "cust_123", "amount": 50.0}
    assert plan.initial.state == {"billingHistory": {"orders": 5, "lastChargeback": "2025-09-10"}}
    # the data is not part of what the plan says: the same calls without it compare equal
    assert plan == parse(json.dumps({"inputSchema": plan.input_schema, "calls": CONTEXT[2]["plan"]}),
                         "json").plan


def test_run_seeds_input_and_state(context_file):
    plan = sophon_dsl.load(str(context_file))
    result = sophon_dsl.run(plan, tools=[issueRefund])
    assert result.status == "succeeded", result.error
    assert result.state["state"]["refund"] == {"customerId": "cust_123", "amount": 50.0, "orders": 5}
    assert result.state["state"]["billingHistory"]["lastChargeback"] == "2025-09-10"
    # the plan's own data is not changed by a run: a second run starts from it again
    assert plan.initial.state == {"billingHistory": {"orders": 5, "lastChargeback": "2025-09-10"}}
    assert sophon_dsl.run(plan, tools=[issueRefund]).state == result.state


def test_run_of_plan_text_seeds_too():
    result = sophon_dsl.run(json.dumps(CONTEXT), tools=[issueRefund])
    assert result.status == "succeeded", result.error
    assert result.state["state"]["refund"]["customerId"] == "cust_123"


def test_callers_input_and_state_win(context_file):
    plan = sophon_dsl.load(str(context_file))
    result = sophon_dsl.run(plan, tools=[issueRefund], input={"customerId": "cust_9", "amount": 1.5},
                            state={"billingHistory": {"orders": 2}})
    assert result.status == "succeeded", result.error
    assert result.state["state"]["refund"] == {"customerId": "cust_9", "amount": 1.5, "orders": 2}
    # each is defaulted on its own: a caller's input keeps the document's state
    result = sophon_dsl.run(plan, tools=[issueRefund], input={"customerId": "cust_9", "amount": 1.5})
    assert result.state["state"]["refund"] == {"customerId": "cust_9", "amount": 1.5, "orders": 5}


def test_start_seeds_too(context_file):
    import asyncio

    async def go():
        handle = sophon_dsl.start(sophon_dsl.load(str(context_file)), tools=[issueRefund])
        return await handle.result()

    result = asyncio.run(go())
    assert result.state["state"]["refund"]["orders"] == 5


def test_seeded_input_meets_the_input_schema():
    context = [CONTEXT[0], {**CONTEXT[2], "inputSchema": {
        "type": "object", "required": ["customerId", "amount", "orderId"]}}]
    plan = parse(json.dumps(context), "json").plan
    with pytest.raises(PlanInvalid) as exc:
        sophon_dsl.run(plan, tools=[issueRefund], state={"billingHistory": {"orders": 1}})
    assert [d.code for d in exc.value.diagnostics] == ["E107"]
    assert "input schema" in exc.value.diagnostics[0].message


def test_cli_run_seeds_and_flags_win(context_file, tools_file, capsys):
    assert main(["run", str(context_file), "--tools", str(tools_file), "--approve", "yes", "--json"]) == 0
    state = json.loads(capsys.readouterr().out)["state"]["state"]
    assert state["refund"] == {"customerId": "cust_123", "amount": 50.0, "orders": 5}
    assert main(["run", str(context_file), "--tools", str(tools_file), "--approve", "yes", "--json",
                 "--input", '{"customerId": "c2", "amount": 2.0}',
                 "--state", '{"billingHistory": {"orders": 7}}']) == 0
    state = json.loads(capsys.readouterr().out)["state"]["state"]
    assert state["refund"] == {"customerId": "c2", "amount": 2.0, "orders": 7}


def test_cli_dry_run_seeds(context_file, tools_file, capsys):
    assert main(["dry-run", str(context_file), "--tools", str(tools_file), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "succeeded"
    assert report["state"]["state"]["billingHistory"] == {"orders": 5, "lastChargeback": "2025-09-10"}


def test_dry_run_seeds(context_file):
    report = sophon_dsl.dry_run(sophon_dsl.load(str(context_file)), [issueRefund])
    assert report.status == "succeeded"
    args = report.arguments["c1"]
    args = args[0] if isinstance(args, list) else args
    assert args == {"customerId": "cust_123", "amount": 50.0,
                    "history": {"orders": 5, "lastChargeback": "2025-09-10"}}


@pytest.mark.parametrize("dump, form", [(dump_json, "json"), (dump_yaml, "yaml")])
def test_printers_write_the_data_back_as_messages(dump, form):
    plan = parse(json.dumps(CONTEXT), "json").plan
    again = parse(dump(plan), form)
    assert not again.diagnostics
    assert again.plan == plan and again.plan.initial == plan.initial
    assert again.plan.input_schema == plan.input_schema


def test_an_explicit_input_schema_survives_the_round_trip():
    context = [{"type": "input", "a": 1}, {"type": "plan", "inputSchema": None, "plan": []}]
    plan = parse(json.dumps(context), "json").plan
    assert plan.input_schema is None and plan.initial.input == {"a": 1}
    again = parse(dump_json(plan), "json").plan
    assert again.input_schema is None and again.initial.input == {"a": 1}


def _json_values():
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8) | \
        st.floats(allow_nan=False, allow_infinity=False, width=32)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) |
                        st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


def test_printers_round_trip_any_initial_data():
    from hypothesis import given, settings, strategies as st

    keys = st.text(min_size=1, max_size=6).filter(lambda k: k not in ("type", "schema"))
    data = st.none() | st.dictionaries(keys, _json_values(), max_size=4)

    @settings(max_examples=60, deadline=None)
    @given(data, data, st.sampled_from([None, {"type": "object"}]))
    def check(input_data, state_data, input_schema):
        if input_data is None and state_data is None:
            return
        from sophon_dsl.model import InitialData, Plan

        plan = Plan(input_schema=input_schema, initial=InitialData(input_data, state_data))
        for dump, form in ((dump_json, "json"), (dump_yaml, "yaml")):
            again = parse(dump(plan), form)
            assert not again.diagnostics, dump(plan)
            assert again.plan == plan and again.plan.initial == plan.initial, dump(plan)

    check()
