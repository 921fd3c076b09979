"""Issue 25: tools with ``**kwargs`` (item 11) and the Python API taking tools as
``--tools`` does (item 5)."""

from __future__ import annotations

import pytest

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


SHOP = '''
from sophon_dsl import tool

@tool
def lookup_order(order_id: str) -> dict:
    return {"id": order_id, "amount": 12}
'''


def _shop(tmp_path):
    path = tmp_path / "shop_tools.py"
    path.write_text(SHOP, encoding="utf-8")
    return path


def test_the_python_api_takes_a_tools_file_path(tmp_path):
    path = _shop(tmp_path)
    plan = loads('$state.o = lookup_order(order_id="A1")\n', format="dsl")
    for given in (str(path), path, [str(path)]):
        assert not [d for d in sophon_dsl.check(plan, tools=given) if d.is_error]
        result = run(plan, tools=given)
        assert result.status == "succeeded" and result.state["state"]["o"]["amount"] == 12


def test_the_python_api_takes_a_module_and_a_declarations_file(tmp_path, monkeypatch):
    _shop(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("shop_tools")
    plan = loads('$state.o = lookup_order(order_id="A1")\n', format="dsl")
    assert run(plan, tools=module).state["state"]["o"]["id"] == "A1"
    assert run(plan, tools="shop_tools").status == "succeeded"   # an importable module name
    decls = tmp_path / "decls.yaml"
    decls.write_text("tools:\n  lookup_order:\n    input: {type: object, properties: {order_id: {type: string}},"
                     " required: [order_id], additionalProperties: false}\n", encoding="utf-8")
    bad = loads('lookup_order(order=1)\n', format="dsl")
    codes = {d.code for d in sophon_dsl.check(bad, tools=str(decls))}
    assert {"E202", "E203"} <= codes


def test_bad_tools_raise_sophon_errors(tmp_path):
    plan = loads('lookup_order(order_id="A1")\n', format="dsl")
    with pytest.raises(sophon_dsl.SophonError, match="does not exist"):
        sophon_dsl.check(plan, tools=str(tmp_path / "missing_tools.py"))
    with pytest.raises(sophon_dsl.SophonError, match="not a tool: 42"):
        sophon_dsl.check(plan, tools=[42])
    with pytest.raises(sophon_dsl.SophonError, match="tools must be"):
        run(plan, tools=42)
    with pytest.raises(TypeError):      # still a TypeError for callers that caught one
        sophon_dsl.check(plan, tools=[42])
