"""Runtime edge cases: misbehaving tools, instances, activities without code."""

from __future__ import annotations

import datetime

import pytest

import sophon_dsl
from sophon_dsl import tool
from sophon_dsl.runtime import PlanInvalid
from sophon_dsl.tools import ToolRegistry, ToolSpec


@tool
def weird() -> dict:
    return {"when": datetime.datetime(2020, 1, 2, 3, 4, 5), "tags": {"b"}, "pair": (1, 2)}


@tool
def opaque() -> dict:
    return {"thing": object()}


@tool
def circular() -> dict:
    d: dict = {}
    d["self"] = d
    return d


@tool
def exits() -> int:
    raise SystemExit(3)


@tool
def interrupts() -> int:
    raise KeyboardInterrupt()


@tool
async def async_exits() -> int:
    raise SystemExit(4)


@tool
def ok() -> int:
    return 1


TOOLS = ToolRegistry([weird, opaque, circular, exits, interrupts, async_exits, ok])


def run(text: str, **kw):
    return sophon_dsl.run(sophon_dsl.loads(text), tools=TOOLS, **kw)


def test_results_are_normalised_to_json():
    result = run("$state.w = weird()\n")
    assert result.state["state"]["w"] == {"when": "2020-01-02T03:04:05", "tags": ["b"], "pair": [1, 2]}


@pytest.mark.parametrize("name", ["opaque", "circular"])
def test_non_json_results_are_output_invalid_and_others_go_on(name):
    result = run(f"$state.x = {name}()\n$state.y = ok()\n")
    first, second = result.calls
    assert first.status == "failed" and first.error.error == "Tool.OutputInvalid"
    assert second.status == "succeeded" and result.state["state"]["y"] == 1
    assert "x" not in result.state["state"]


@pytest.mark.parametrize("name", ["exits", "interrupts", "async_exits"])
def test_tools_that_raise_exit_or_interrupt_fail_without_ending_the_run(name):
    result = run(f"$state.x = {name}()\n$state.y = ok()\n")
    assert result.calls[0].status == "failed" and result.calls[0].error.error == "Tool.Failed"
    assert result.calls[1].status == "succeeded"
    assert result.status == "failed"


def test_declared_activity_without_code_is_refused_before_running():
    decl = ToolSpec("charge", input_schema={"type": "object", "properties": {}}, explicit=True)
    plan = sophon_dsl.loads("$state.r = charge()\n$state.y = ok()\n")
    with pytest.raises(PlanInvalid) as exc:
        sophon_dsl.run(plan, tools=ToolRegistry([decl, ok]))
    assert [d.code for d in exc.value.diagnostics] == ["E207"]


def test_instances_read_and_write_their_own_state():
    @tool
    def greet(name: str) -> str:
        return f"hello {name}"

    plan = sophon_dsl.loads(
        '@instance(A)\n$state.greeting = greet(name=$input.name)\n'
        '@instance(B)\n$state.greeting = greet(name=$input.name)\n'
        '$state.shared = ok()\n')
    result = sophon_dsl.run(plan, tools=ToolRegistry([greet, ok]), input={"name": "all"},
                            context={"input@A": {"name": "Ann"}, "state@B": {"seen": True}})
    assert result.status == "succeeded"
    assert result.state["state@A"]["greeting"] == "hello Ann"        # A's own input
    assert result.state["state@B"] == {"seen": True, "greeting": "hello all"}  # global input
    assert result.state["state"] == {"shared": 1}
