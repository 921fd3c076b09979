"""Issue 17, Medium 7 (and the Low item on KeyboardInterrupt): every run ends with a verdict.

Runs go through a worker thread joined with a generous limit (a hang guard, not a timing
assertion): on the code before the fix these never returned.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import sophon_dsl
from sophon_dsl.cli import main

from hang_guard import finishes


def _ends(fn: Any, limit: float = 60.0) -> Any:
    return finishes(fn, limit, "the run never ended")


def _statuses(result: Any) -> dict[str, str]:
    return {c.id: c.status for c in result.calls}


def test_a_yaml_integer_over_4300_digits_is_refused_by_check(tmp_path, capsys):
    plan = tmp_path / "big.yaml"
    plan.write_text("- _tool: data.set\n  _outputPath: †state.x\n  value: {}\n  path: a\n"
                    "  new: 0x" + "f" * 5000 + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["check", str(plan)]) == 1
    out = capsys.readouterr()
    assert "E004" in out.out + out.err and "4,300 digits" in out.out + out.err
    assert _ends(lambda: main(["run", str(plan), "--json"])) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.err and json.loads(out.out)["status"] == "invalid"


def test_a_yaml_integer_under_the_limit_still_reads(tmp_path):
    text = "- _tool: data.set\n  _outputPath: †state.x\n  value: {}\n  path: a\n  new: 0x" + "f" * 100 + "\n"
    result = _ends(lambda: sophon_dsl.run(sophon_dsl.loads(text, "yaml")))
    assert result.status == "succeeded" and result.state["state"]["x"]["a"] == int("f" * 100, 16)


def test_a_tool_result_integer_over_4300_digits_fails_its_call():
    @sophon_dsl.tool(name="huge")
    def huge() -> int:
        return 10 ** 5000

    @sophon_dsl.tool(name="echo")
    def echo(value: Any) -> Any:
        return value

    plan = "†state.h = huge()\n†state.e = echo(value=†state.h)\n"
    result = _ends(lambda: sophon_dsl.run(plan, [huge, echo]))
    assert _statuses(result) == {"c1": "failed", "c2": "skipped"}
    assert result.calls[0].error.error == "Tool.OutputInvalid"
    assert "4,300 digits" in result.calls[0].error.cause


def test_an_async_tool_raising_cancelled_error_fails_its_call():
    @sophon_dsl.tool(name="quits")
    async def quits() -> str:
        raise asyncio.CancelledError()

    @sophon_dsl.tool(name="echo")
    def echo(value: Any) -> Any:
        return value

    plan = "†state.q = quits()\n†state.e = echo(value=†state.q)\n†state.other = echo(value=1)\n"
    result = _ends(lambda: sophon_dsl.run(plan, [quits, echo]))
    assert _statuses(result) == {"c1": "failed", "c2": "skipped", "c3": "succeeded"}
    assert result.status == "failed"
    assert "CancelledError" in result.calls[0].error.cause


def test_an_async_tool_raising_cancelled_error_with_a_timeout_fails_its_call():
    @sophon_dsl.tool(name="quits")
    async def quits() -> str:
        raise asyncio.CancelledError()

    result = _ends(lambda: sophon_dsl.run("†state.q = quits()\n", [quits], timeout=30))
    assert _statuses(result) == {"c1": "failed"} and result.status == "failed"


def test_an_async_tool_raising_keyboard_interrupt_fails_only_its_call():
    @sophon_dsl.tool(name="interrupts")
    async def interrupts() -> str:
        raise KeyboardInterrupt()

    @sophon_dsl.tool(name="echo")
    def echo(value: Any) -> Any:
        return value

    plan = "†state.k = interrupts()\n†state.other = echo(value=1)\n"
    result = _ends(lambda: sophon_dsl.run(plan, [interrupts, echo]))
    assert _statuses(result) == {"c1": "failed", "c2": "succeeded"}
    assert "KeyboardInterrupt" in result.calls[0].error.cause
    result = _ends(lambda: sophon_dsl.run(plan, [interrupts, echo], timeout=30, max_concurrency=2))
    assert _statuses(result) == {"c1": "failed", "c2": "succeeded"}


def test_the_runs_own_time_limit_still_cancels():
    @sophon_dsl.tool(name="slow")
    async def slow() -> str:
        await asyncio.sleep(30)
        return "late"

    result = _ends(lambda: sophon_dsl.run("†state.s = slow()\n", [slow], max_time=0.2))
    assert result.calls[0].status == "cancelled"
