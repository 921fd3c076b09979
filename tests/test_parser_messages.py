"""Parser messages: each typical DSL mistake is reported at its cause with the fix.

The corpus itself is spec/conformance/dsl_errors.yaml (run by test_conformance.py,
which checks code, position and a part of the message); these tests pin the
behaviour through the public API and the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sophon_dsl import loads
from sophon_dsl.cli import main
from sophon_dsl.diagnostics import DiagnosticError
from sophon_dsl.loader import parse

CORPUS = Path(__file__).resolve().parent.parent / "spec" / "conformance"


def _only(text: str):
    diags = parse(text, "dsl").diagnostics
    assert len(diags) == 1, diags
    return diags[0]


def test_corpus_has_forty_mistakes_each_with_a_message():
    cases = []
    for path in [CORPUS / "dsl_errors.yaml"]:
        cases += yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]
    assert len(cases) >= 40
    for case in cases:
        assert all(d.get("message") for d in case["diagnostics"]), case["name"]
        assert all("line" in d and "column" in d for d in case["diagnostics"]), case["name"]


def test_positional_literal_names_the_cause_at_the_literal():
    d = _only('summarize("hello")')
    assert (d.code, d.line, d.column) == ("E001", 1, 11)
    assert "literal arguments need a name" in d.message and 'name="hello"' in d.message


def test_missing_paren_is_reported_at_the_unclosed_paren():
    d = _only('goal = "g"\n†state.a = search(\n    query="x",\n    limit=3\nreport(x=†state.a)\n')
    assert (d.line, d.column) == (2, 18)
    assert "'(' is never closed: add ')'" in d.message


def test_loads_raises_with_the_explained_message():
    with pytest.raises(DiagnosticError) as exc:
        loads("f(x=$input.a or $input.b)")
    assert "write '||'" in str(exc.value)


def test_cli_check_prints_the_cause_and_caret(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text('notify(text="hi") // tell them\n', encoding="utf-8")
    assert main(["check", str(plan), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out[0]["code"] == "E001"
    assert "comments start with '#'" in out[0]["message"]
    assert (out[0]["line"], out[0]["column"]) == (1, 19)


def test_valid_plans_are_untouched():
    plan = loads('†state.a = f(x=1)\ng(a=†state.a, b=[1, {"k": 2}])\n')
    assert [c.tool for c in plan.calls] == ["f", "g"]
