"""MCP tool sources against a real MCP server (tests/mcp/server_stdio.py) over stdio and HTTP."""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import sophon_dsl
from sophon_dsl import Risk
from sophon_dsl.cli import main as cli_main
from sophon_dsl.mcp import (
    McpConnection,
    McpServerConfig,
    McpToolError,
    McpToolSource,
    close_all,
    convert_result,
    load_mcp_config,
    parse_mcp_source,
    risk_from_annotations,
    shared_connection,
)
from sophon_dsl.runtime import RunError, run
from sophon_dsl.toolsource import load_tool_source

HERE = Path(__file__).resolve().parent
SERVER = HERE / "server_stdio.py"
STDIO_SOURCE = f"mcp:stdio:{shlex.join([sys.executable, str(SERVER)])}"

PLAN = '''\
†state.weather = weather(city="Paris")
†state.sum = add(a=2, b=3)
†state.greeting = greet(name=†state.weather.city)
†state.profile = profile(user="ada")
'''


@pytest.fixture(scope="module")
def specs():
    """The test server's tools, loaded the way `--tools mcp:stdio:...` loads them (one connection)."""
    tools, diags = load_tool_source(STDIO_SOURCE)
    assert diags == []
    yield {t.name: t for t in tools}
    close_all()


def _plan(text: str):
    return sophon_dsl.loads(text, format="dsl")


# -- listing ------------------------------------------------------------------


def test_listing_gives_toolspecs_with_schemas(specs):
    assert set(specs) == {"weather", "add", "greet", "profile", "explode", "nap", "crash"}
    w = specs["weather"]
    assert w.description.startswith("Current weather")
    assert w.input_schema["properties"]["city"] == {"type": "string"}
    assert w.required == ("city",)
    assert w.output_schema["required"] == ["city", "celsius", "conditions"]
    assert w.is_async and w.func is not None and not w.latent
    assert w.origin == "mcp:sophon-test"
    assert specs["greet"].output_schema is None  # unstructured tool: no output schema
    # risk from annotations: readOnlyHint -> low, destructiveHint -> high, else medium
    assert (w.risk, specs["explode"].risk, specs["add"].risk) == (Risk.LOW, Risk.HIGH, Risk.MEDIUM)


# -- check ----------------------------------------------------------------------


def test_check_understands_mcp_tools(specs):
    assert [d for d in sophon_dsl.check(_plan(PLAN), tools=specs.values()) if d.is_error] == []
    bad = _plan('†state.w = weather(city="Paris", country="FR")\nadd(a=1)\n')
    codes = sorted(d.code for d in sophon_dsl.check(bad, tools=specs.values()) if d.is_error)
    assert codes == ["E202", "E203"]  # missing b, unknown country


# -- run --------------------------------------------------------------------------


def test_run_calls_the_server_and_writes_state(specs):
    for _ in range(2):  # each run() is a new event loop; the connection is reused
        result = run(_plan(PLAN), tools=specs.values(), approve=True)
        assert result.status == "succeeded", result.to_json()
        state = result.state["state"]
        assert state["weather"] == {"city": "Paris", "celsius": 21.5, "conditions": "sunny"}
        assert state["sum"] == {"result": 5}  # structuredContent, as the output schema says
        assert state["greeting"] == "Hello, Paris!"  # plain text
        assert state["profile"] == {"user": "ada", "plan": "pro"}  # text that is JSON


def test_error_tool_is_mcp_tool_error(specs):
    plan = _plan('†state.ok || †state.failure = explode(reason="test")\n')
    result = run(plan, tools=specs.values(), approve=True)
    failure = result.state["state"]["failure"]
    assert failure["error"] == "Mcp.ToolError"
    assert "boom: test" in failure["cause"]
    plan = _plan('†state.x = explode(reason="uncaught")\n')
    result = run(plan, tools=specs.values(), approve=True)
    assert result.status == "failed"
    errors = [c.error.error for c in result.calls if c.error is not None]
    assert errors == ["Mcp.ToolError"]


def test_high_risk_mcp_tool_needs_approval(specs):
    result = run(_plan('explode(reason="x")\n'), tools=specs.values(), approve=False)
    assert result.status == "rejected"


# -- async context manager -----------------------------------------------------


def test_async_tool_source_in_one_loop():
    async def main():
        async with McpToolSource.stdio(sys.executable, [str(SERVER)], prefix="t.") as src:
            names = sorted(t.name for t in src.tools)
            direct = await src.call("add", {"a": 1, "b": 1})
            with pytest.raises(McpToolError) as info:
                await src.call("explode", {"reason": "direct"})
            result = await sophon_dsl.runtime.arun(_plan('†state.s = t.add(a=20, b=22)\n'),
                                                   tools=src.tools, approve=True)
            return names, direct, info.value, result

    names, direct, err, result = asyncio.run(main())
    assert names == ["t.add", "t.crash", "t.explode", "t.greet", "t.nap", "t.profile", "t.weather"]
    assert direct == {"result": 2}
    assert isinstance(err, RunError) and err.error == "Mcp.ToolError" and "boom: direct" in err.cause
    assert result.status == "succeeded" and result.state["state"]["s"] == {"result": 42}


# -- CLI --------------------------------------------------------------------------


def test_cli_check_and_run_with_mcp_stdio(specs, tmp_path, capsys):
    # the CLI loads the same source as the `specs` fixture: it shares that connection
    plan = tmp_path / "p.plan"
    plan.write_text(PLAN, encoding="utf-8")
    assert cli_main(["check", str(plan), "--no-stdlib", "--tools", STDIO_SOURCE]) == 0
    capsys.readouterr()
    code = cli_main(["run", str(plan), "--no-stdlib", "--tools", STDIO_SOURCE, "--approve", "yes", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert '"Hello, Paris!"' in out


def test_cli_unreachable_server_is_a_usage_error(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text(PLAN, encoding="utf-8")
    crash = f"mcp:stdio:{shlex.join([sys.executable, '-c', 'import sys; print(12345, file=sys.stderr); sys.exit(3)'])}"
    assert cli_main(["check", str(plan), "--no-stdlib", "--tools", crash]) == 2
    err = capsys.readouterr().err
    assert "E110" in err and "cannot connect to the MCP server" in err and "12345" in err  # stderr tail


def test_unreachable_http_server_is_e110():
    port = _free_port()  # nothing listens there
    tools, diags = load_tool_source(f"mcp:http:http://127.0.0.1:{port}/mcp")
    assert tools == [] and [d.code for d in diags] == ["E110"]
    assert "cannot connect to the MCP server" in diags[0].message and "Cancelled" not in diags[0].message


# -- config files -------------------------------------------------------------------


def test_mcp_json_config(tmp_path):
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {
        "demo": {"command": sys.executable, "args": ["server_stdio.py"], "cwd": str(HERE),
                 "prefix": "demo.", "include": ["add", "weather"], "env": {"DEMO": "${HOME:-x}"}},
        "off": {"command": "does-not-exist", "disabled": True},
    }}), encoding="utf-8")
    tools, diags = load_tool_source(str(cfg))
    assert diags == []
    assert sorted(t.name for t in tools) == ["demo.add", "demo.weather"]
    result = run(_plan('†state.s = demo.add(a=1, b=2)\n'), tools=tools, approve=True)
    assert result.status == "succeeded" and result.state["state"]["s"] == {"result": 3}
    shared_connection(parse_mcp_source(str(cfg))[0]).close()


def test_config_parsing(tmp_path, monkeypatch):
    monkeypatch.setenv("SOPHON_TOKEN", "secret")
    cfg = tmp_path / "servers.mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {
        "a": {"command": "npx", "args": ["-y", "server-x"], "env": {"K": "v"}, "risk": "high"},
        "b": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${SOPHON_TOKEN}"}},
        "c": {"type": "streamable-http", "url": "https://example.com/mcp", "timeout": 5},
    }}), encoding="utf-8")
    a, b, c = load_mcp_config(cfg)
    assert (a.transport, a.command, a.args, a.env, a.risk, a.cwd) == (
        "stdio", "npx", ("-y", "server-x"), {"K": "v"}, Risk.HIGH, str(tmp_path))
    assert (b.transport, b.headers) == ("http", {"Authorization": "Bearer secret"})
    assert (c.transport, c.timeout) == ("http", 5.0)
    assert [s.name for s in parse_mcp_source(f"mcp:{cfg}#b,c")] == ["b", "c"]
    assert [s.name for s in parse_mcp_source(f"{cfg}#a")] == ["a"]
    with pytest.raises(ValueError, match="no server named 'z'"):
        parse_mcp_source(f"{cfg}#z")
    bad = tmp_path / "bad.mcp.json"
    bad.write_text('{"mcpServers": {"x": {"url": "http://h/${NOPE_NOT_SET}"}}}', encoding="utf-8")
    with pytest.raises(ValueError, match="NOPE_NOT_SET is not set"):
        load_mcp_config(bad)
    # a Claude Desktop config with another name is recognised by its content
    desktop = tmp_path / "claude_desktop_config.json"
    desktop.write_text('{"mcpServers": {"x": {"url": "http://127.0.0.1:9/mcp"}}}', encoding="utf-8")
    from sophon_dsl.toolsource import _is_mcp

    assert _is_mcp(str(desktop)) and not _is_mcp(str(tmp_path / "tools.json"))


def test_source_strings():
    (s,) = parse_mcp_source("mcp:stdio:npx -y '@scope/server x' --flag")
    assert (s.transport, s.command, s.args) == ("stdio", "npx", ("-y", "@scope/server x", "--flag"))
    assert parse_mcp_source("mcp:http:http://127.0.0.1:8000/mcp")[0].url == "http://127.0.0.1:8000/mcp"
    assert parse_mcp_source("mcp:https://example.com/mcp")[0].url == "https://example.com/mcp"
    for bad in ("mcp:stdio:", "mcp:http:ftp://x", "mcp:sse:http://x/sse", "mcp:"):
        with pytest.raises(ValueError):
            parse_mcp_source(bad)
    tools, diags = load_tool_source("mcp:stdio:")
    assert tools == [] and [d.code for d in diags] == ["E110"]
    tools, diags = load_tool_source("missing.mcp.json")
    assert tools == [] and [d.code for d in diags] == ["E110"]


def test_result_conversion_and_risk():
    assert convert_result({"content": [], "structuredContent": {"a": 1}}) == {"a": 1}
    assert convert_result({"content": [{"type": "text", "text": "[1, 2]"}]}) == [1, 2]
    assert convert_result({"content": [{"type": "text", "text": "NaN"}]}) == "NaN"
    assert convert_result({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "2"}]}) == ["a", 2]
    img = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    assert convert_result({"content": [img]}) == img
    assert convert_result({"content": []}) is None
    with pytest.raises(McpToolError) as info:
        convert_result({"content": [{"type": "text", "text": "nope"}], "isError": True}, "t")
    assert (info.value.error, info.value.cause, info.value.tool) == ("Mcp.ToolError", "nope", "t")
    assert risk_from_annotations(None) == Risk.MEDIUM
    assert risk_from_annotations({"readOnlyHint": True, "destructiveHint": True}) == Risk.LOW
    assert risk_from_annotations({"destructiveHint": True}) == Risk.HIGH
    assert risk_from_annotations({"destructiveHint": False}) == Risk.MEDIUM


# -- streamable HTTP ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("could not start the streamable HTTP test server")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_streamable_http(http_server):
    conn = McpConnection(McpServerConfig("http", url=http_server, name="web"))
    try:
        specs = {t.name: t for t in conn.tools()}
        assert specs["weather"].origin == "mcp:web" and specs["weather"].risk == Risk.LOW
        result = run(_plan(PLAN), tools=specs.values(), approve=True)
        assert result.status == "succeeded", result.to_json()
        assert result.state["state"]["sum"] == {"result": 5}
        failed = run(_plan('†state.ok || †state.err = explode(reason="http")\n'), tools=specs.values(),
                     approve=True)
        assert failed.state["state"]["err"]["error"] == "Mcp.ToolError"
    finally:
        conn.close()
    tools, diags = load_tool_source(f"mcp:http:{http_server}")
    try:
        assert diags == [] and len(tools) == 7
    finally:
        close_all()


# -- timeouts, lost connections, missing SDK ----------------------------------------------


def test_timeout_then_lost_connection_then_reconnect(specs):
    asyncio.run(specs["add"].func(a=0, b=0))  # connected, so the short timeout only meets the nap
    plan = _plan('†state.slow || †state.err = nap(seconds=30)\n†state.fast = add(a=1, b=1)\n')
    start = time.monotonic()
    result = run(plan, tools=specs.values(), approve=True, timeout=0.3)
    assert time.monotonic() - start < 25  # the nap was not waited for (a bound, not a timing claim)
    assert result.state["state"]["err"]["error"] == "Tool.Timeout"
    assert result.state["state"]["fast"] == {"result": 2}  # the cancelled call left the session usable
    result = run(_plan('†state.ok || †state.err = crash()\n'), tools=specs.values(), approve=True)
    assert result.state["state"]["err"]["error"] == "Mcp.Error"
    result = run(_plan('†state.s = add(a=2, b=2)\n'), tools=specs.values(), approve=True)
    assert result.status == "succeeded" and result.state["state"]["s"] == {"result": 4}  # reconnected


def test_config_timeout_is_tool_timeout(tmp_path):
    # the server config's own deadline is Tool.Timeout, as the run's is (a TimeoutError a
    # tool raises by itself is Tool.Failed: issue 24, item 12)
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {
        "slowpoke": {"command": sys.executable, "args": ["server_stdio.py"], "cwd": str(HERE),
                     "include": ["nap"], "timeout": 0.3},
    }}), encoding="utf-8")
    tools, diags = load_tool_source(str(cfg))
    assert diags == []
    try:
        result = run(_plan('†state.ok || †state.err = nap(seconds=5)\n'), tools=tools, approve=True)
        assert result.state["state"]["err"] == {"error": "Tool.Timeout",
                                                "cause": "slowpoke: nap did not finish within 0.3 s"}
    finally:
        shared_connection(parse_mcp_source(str(cfg))[0]).close()


def test_without_the_sdk(monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)
    tools, diags = load_tool_source(STDIO_SOURCE)
    assert tools == [] and [d.code for d in diags] == ["E110"] and "pip install" in diags[0].message
