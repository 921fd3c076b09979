"""A TimeoutError the tool raises itself (socket timeouts, its own ``asyncio.wait_for``) is
an ordinary tool failure with the tool's message; only the runtime's per-call deadline
(``@timeout``, ``--timeout``) is ``Tool.Timeout`` (issue 24, item 12)."""

from __future__ import annotations

import json

import pytest

import sophon_dsl
from sophon_dsl import tool
from sophon_dsl.cli import main

TOOLS = '''\
import asyncio
from sophon_dsl import tool

_n = {"flaky": 0}


@tool
async def sock() -> str:
    raise TimeoutError("read timed out after 2 s (upstream)")


@tool
def sock_sync() -> str:
    raise TimeoutError("connect timed out")


@tool
async def waits() -> str:
    await asyncio.wait_for(asyncio.sleep(10), 0.01)  # its own short wait: TimeoutError
    return "never"


@tool
async def flaky() -> str:
    _n["flaky"] += 1
    if _n["flaky"] < 3:
        raise TimeoutError(f"attempt {_n['flaky']} timed out")
    return "ok"


@tool
async def slow() -> str:
    await asyncio.sleep(10)
    return "never"
'''


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text(TOOLS, encoding="utf-8")
    return tmp_path


def _run(capsys, ws, plan: str, *flags: str) -> tuple[int, dict]:
    (ws / "p.plan").write_text(plan, encoding="utf-8")
    code = main(["run", "p.plan", "--tools", "t.py", "--no-store", "--no-stdlib", "--json", *flags])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("flags", [(), ("--timeout", "30")], ids=["direct", "with-timeout"])
@pytest.mark.parametrize("name", ["sock", "sock_sync", "waits"])
def test_tools_own_timeout_error_is_a_failure_with_its_message(capsys, ws, flags, name):
    code, result = _run(capsys, ws, f"†state.x = {name}()\n", *flags)
    assert code == 1
    err = result["calls"][0]["error"]
    assert err["error"] == "Tool.Failed"
    assert err["cause"].startswith("TimeoutError")
    assert "internal error" not in err["cause"] and "did not finish within" not in err["cause"]
    if name == "sock":
        assert err["cause"] == "TimeoutError: read timed out after 2 s (upstream)"


@pytest.mark.parametrize("attr", ["", "@timeout(30) "], ids=["direct", "at-timeout"])
def test_caught_by_the_alternative(capsys, ws, attr):
    code, result = _run(capsys, ws, f"{attr}†state.ok || †state.err = sock()\n")
    assert code == 0
    assert result["state"]["state"]["err"] == {
        "error": "Tool.Failed", "cause": "TimeoutError: read timed out after 2 s (upstream)"}


@pytest.mark.parametrize("flags", [(), ("--timeout", "30")], ids=["direct", "with-timeout"])
def test_retried_by_retry(capsys, ws, flags):
    code, result = _run(capsys, ws, "@retry(3) †state.x = flaky()\n", *flags)
    assert code == 0
    assert result["state"]["state"]["x"] == "ok"
    assert result["calls"][0]["attempts"] == 3


def test_the_runtimes_own_deadline_is_still_tool_timeout(capsys, ws):
    code, result = _run(capsys, ws, "@timeout(0.05) †state.ok || †state.err = slow()\n")
    assert code == 0
    assert result["state"]["state"]["err"] == {"error": "Tool.Timeout",
                                               "cause": "slow did not finish within 0.05 s"}


def test_public_api_direct_and_with_timeout():
    @tool
    async def sock() -> str:
        raise TimeoutError("socket read timed out")

    for kwargs in ({}, {"timeout": 30}):
        r = sophon_dsl.run("†state.ok || †state.err = sock()\n", [sock], **kwargs)
        assert r.status == "succeeded"
        assert r.state["state"]["err"] == {"error": "Tool.Failed",
                                           "cause": "TimeoutError: socket read timed out"}
