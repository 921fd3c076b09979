"""Run options and initial data that cannot work are refused before anything runs."""

from __future__ import annotations

import pytest

from sophon_dsl.loader import parse
from sophon_dsl.runtime import PlanInvalid, run
from sophon_dsl.tools import tool

ran: list[int] = []


@tool
async def echo(value: int) -> int:
    ran.append(value)
    return value


PLAN = parse("$state.a = echo(value=1)").plan


@pytest.mark.parametrize("options,message", [
    ({"max_concurrency": -1}, "max_concurrency must be a positive integer"),
    ({"max_concurrency": 0}, "max_concurrency must be a positive integer"),
    ({"max_concurrency": 1.5}, "max_concurrency must be a positive integer"),
    ({"max_workers": 0}, "max_workers must be a positive integer"),
    ({"timeout": 0}, "timeout must be a positive number"),
    ({"timeout": float("nan")}, "timeout must be a positive number"),
    ({"max_time": -1}, "max_time must be a positive number"),
    ({"max_time": "10"}, "max_time must be a positive number"),
    ({"approval_timeout": -1}, "approval_timeout must be a number"),
    ({"preview_chars": -5}, "preview_chars must be an integer"),
])
def test_bad_numeric_options_are_value_errors(options, message):
    ran.clear()
    with pytest.raises(ValueError, match=message):
        run(PLAN, [echo], **options)
    assert ran == []


def test_good_numeric_options_run():
    result = run(PLAN, [echo], max_concurrency=1, max_workers=2, timeout=5, max_time=float("inf"),
                 approval_timeout=0, preview_chars=0)
    assert result.status == "succeeded"


def test_input_and_state_must_be_json_data():
    deep: list = []
    cur = deep
    for _ in range(400):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    ran.clear()
    with pytest.raises(PlanInvalid) as info:
        run(PLAN, [echo], input={"x": deep})
    assert info.value.diagnostics[0].code == "E107" and "input is not JSON data" in str(info.value)
    with pytest.raises(PlanInvalid, match="state is not JSON data"):
        run(PLAN, [echo], state={"x": object()})
    with pytest.raises(PlanInvalid, match="notes is not JSON data"):
        run(PLAN, [echo], context={"notes": [object()]})
    assert ran == []


def test_input_schema_mismatch_names_the_json_path():
    plan = parse('input = {"type": "object", "properties": {"team": {"type": "array", "items": '
                 '{"type": "string"}}}}\n$state.a = echo(value=1)', file="p.plan").plan
    with pytest.raises(PlanInvalid) as info:
        run(plan, [echo], input={"team": ["ana", 3]})
    d = info.value.diagnostics[0]
    assert (d.code, d.path, d.file) == ("E107", "$.team[1]", "p.plan")
    assert "3 is not of type 'string'" in d.message


def test_prompt_approver_answers_and_closed_stdin():
    import asyncio

    from sophon_dsl.runtime import prompt_approver

    @tool(risk="high")
    async def send(to: str) -> str:
        return to

    plan = parse('$state.m = send(to="team")').plan
    shown: list[str] = []

    def closed(_prompt: str) -> str:
        raise EOFError

    result = run(plan, [send], approve=prompt_approver(closed, shown.append))
    assert result.status == "rejected"
    assert "standard input is closed" in result.error.cause
    assert any("needs approval" in line for line in shown)
    assert run(plan, [send], approve=prompt_approver(lambda _p: "y", shown.append)).status == "succeeded"
    assert run(plan, [send], approve=prompt_approver(lambda _p: "", shown.append)).status == "rejected"
    assert asyncio.iscoroutinefunction(prompt_approver(closed))


class ToolAbort(BaseException):
    """A tool's own BaseException subclass (not an Exception)."""


@pytest.mark.parametrize("kind", ["async", "sync", "async_timeout"])
def test_tools_raising_their_own_base_exception_fail_the_call(kind):
    @tool(name="abort")
    async def abort_async() -> int:
        raise ToolAbort("stop")

    @tool(name="abort")
    def abort_sync() -> int:
        raise ToolAbort("stop")

    text = ("@timeout(5)\n" if kind == "async_timeout" else "") + "$state.x = abort()\n$state.y = echo(value=2)\n"
    result = run(parse(text).plan, [abort_sync if kind == "sync" else abort_async, echo], max_time=10)
    x, y = result.calls
    assert x.status == "failed" and x.error.error == "Tool.Failed"
    assert "ToolAbort(stop)" in x.error.cause
    assert y.status == "succeeded" and result.status == "failed"


@pytest.mark.parametrize("value,where", [
    (float("nan"), "nan is not a JSON number"),
    (float("inf"), "inf is not a JSON number"),
    ({"a": [1, {"b": float("-inf")}]}, "-inf is not a JSON number (at $.a[1].b)"),
    ((1.0, float("nan")), "nan is not a JSON number (at $[1])"),
])
def test_results_with_nan_or_infinity_are_output_invalid(value, where):
    @tool(name="num")
    async def num() -> object:
        return value

    result = run(parse("$state.x = num()\n$state.y = echo(value=3)").plan, [num, echo], validate_output=False)
    x = result.call("c1")
    assert x.status == "failed" and x.error.error == "Tool.OutputInvalid"
    assert where in x.error.cause
    assert result.state["state"] == {"y": 3}
    result.dumps()  # the result is JSON


def test_nan_in_the_input_is_refused():
    with pytest.raises(PlanInvalid, match="input is not JSON data: nan is not a JSON number"):
        run(PLAN, [echo], input={"x": float("nan")})


def test_enum_and_str_subclass_results_are_stored_as_plain_values():
    from enum import Enum, IntEnum

    class Color(str, Enum):
        RED = "red"

    class Level(IntEnum):
        HIGH = 3

    @tool(name="pick")
    async def pick() -> object:
        return {"color": Color.RED, "level": Level.HIGH, "levels": [Level.HIGH]}

    @tool(name="lvl")
    async def lvl() -> object:
        return Level.HIGH

    result = run(parse("$state.p = pick()\n$state.l = lvl()").plan, [pick, lvl], validate_output=False)
    state = result.state["state"]
    assert state == {"p": {"color": "red", "level": 3, "levels": [3]}, "l": 3}
    assert type(state["l"]) is int and type(state["p"]["color"]) is str


def test_a_plan_whose_known_size_is_over_max_calls_runs_nothing():
    """issue 30 item 8: the items of a map over a literal list (or an input list) count before
    anything runs, not when the map starts."""
    ran.clear()
    plan = ('$state.a = echo(value=1)\n'
            '$state.m = map(over=[1,2,3,4],as=x) {$local.r = echo(value=$x);return $local.r}\n')
    with pytest.raises(PlanInvalid, match="at least 6 calls"):
        run(plan, [echo], max_calls=5)
    plan_in = ('$state.a = echo(value=1)\n'
               '$state.m = map($input.xs,as=x) {$local.r = echo(value=$x);return $local.r}\n')
    with pytest.raises(PlanInvalid, match="at least 6 calls"):
        run(plan_in, [echo], max_calls=5, input={"xs": [1, 2, 3, 4]})
    assert ran == []
    assert run(plan, [echo], max_calls=6).status == "succeeded"
