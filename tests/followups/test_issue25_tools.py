"""Issue 25: tools with ``**kwargs`` (item 11) and the Python API taking tools as
``--tools`` does (item 5)."""

from __future__ import annotations

import sophon_dsl
from sophon_dsl import loads, run, tool


@tool
def anything(**kwargs) -> dict:
    return kwargs


@tool
def counts(label: str, **kwargs: int) -> dict:
    return {"label": label, **kwargs}


def test_a_kwargs_tool_takes_any_argument():
    plan = loads('$state.r = anything(a=1, b="x")\n$state.c = counts(label="n", x=2)\n', format="dsl")
    diags = sophon_dsl.check(plan, tools=[anything, counts], stdlib=False)
    assert not [d for d in diags if d.is_error], diags
    result = run(plan, tools=[anything, counts])
    assert result.status == "succeeded"
    assert result.state["state"]["r"] == {"a": 1, "b": "x"}
    assert result.state["state"]["c"] == {"label": "n", "x": 2}


def test_a_typed_kwargs_tool_checks_the_extra_arguments():
    plan = loads('counts(label="n", x="not a number")\n', format="dsl")
    codes = [d.code for d in sophon_dsl.check(plan, tools=[counts], stdlib=False)]
    assert "E204" in codes and "E203" not in codes
