"""YAML `.nan` / `.inf` are refused with a positioned E004, as the JSON reader refuses NaN."""

from __future__ import annotations

import pytest

from sophon_dsl.cli import main
from sophon_dsl.syntax.yaml_source import parse_yaml

PLAN = "calls:\n  - _tool: math.eval\n    expression: {value}\n"


@pytest.mark.parametrize("spelling,column", [(".nan", 17), (".NaN", 17), (".inf", 17), ("-.inf", 17),
                                              ("[1, +.Inf]", 21), ("1.0e+999", 17), ("!!float nan", 17)])
def test_cli_refuses_yaml_nan_and_infinities(tmp_path, capsys, spelling, column):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.format(value=spelling), encoding="utf-8")
    assert main(["check", str(plan)]) != 0
    out = capsys.readouterr(); err = out.out + out.err
    assert f"plan.yaml:3:{column}: error[E004]" in err and "JSON has no number" in err, err
    assert "Traceback" not in err


def test_quoted_nan_and_finite_floats_still_load():
    node, diags = parse_yaml('a: ".nan"\nb: 1.5e+3\nc: -0.0\n')
    assert diags == []
    assert [(k, v.value) for k, v in node.value] == [("a", ".nan"), ("b", 1500.0), ("c", -0.0)]
