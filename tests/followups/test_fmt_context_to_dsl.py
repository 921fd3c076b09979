"""`fmt --to dsl` on a context list refuses (exit 2) rather than drop its input/state data."""

from __future__ import annotations

import json

from sophon_dsl.cli import main

CONTEXT = [
    {"type": "input", "customerId": "cust_123", "amount": 50.0},
    {"type": "state", "billingHistory": {"orders": 5}},
    {"type": "plan", "plan": [{"_tool": "issueRefund", "customerId": "†input.customerId",
                               "history": "†state.billingHistory", "_outputPath": "†state.refund"}]},
]


def test_to_dsl_refuses_and_names_what_would_be_lost(tmp_path, capsys):
    path = tmp_path / "context.json"
    path.write_text(json.dumps(CONTEXT), encoding="utf-8")
    assert main(["fmt", "--to", "dsl", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert "input data (amount, customerId)" in out.err and "state data (billingHistory)" in out.err
    assert main(["fmt", "--to", "dsl", "-w", str(path)]) == 2
    assert not (tmp_path / "context.plan").exists()


def test_other_conversions_still_work(tmp_path, capsys):
    path = tmp_path / "context.json"
    path.write_text(json.dumps(CONTEXT), encoding="utf-8")
    assert main(["fmt", "--to", "yaml", str(path)]) == 0
    assert "cust_123" in capsys.readouterr().out
    plain = tmp_path / "plan.json"
    plain.write_text(json.dumps({"calls": CONTEXT[2]["plan"]}), encoding="utf-8")
    assert main(["fmt", "--to", "dsl", str(plain), str(path)]) == 2  # the worst outcome of the files
    assert "issueRefund(" in capsys.readouterr().out
