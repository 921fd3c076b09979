"""Issue 11 item 3: what ``run``, ``dry-run`` and ``graph`` show.

The live view counts done/total and the elapsed time and keeps running calls on screen
when the plan is taller than the terminal; caught failures say so; a retry names its
error; a tool returning null shows ``null``; dry-run shows the predicted output; graph
marks risky calls and draws one edge per pair; E206 names ``--provider``; a provider list
tells when it fails over.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from sophon_dsl.cli import main
from sophon_dsl.cli.progress import ProgressView
from sophon_dsl.llm.provider import ProviderError
from sophon_dsl.llm.providers.failover import FailoverProvider
from sophon_dsl.loader import loads

TOOLS = """\
from sophon_dsl import tool

FAILS = {"flaky": 1}

@tool
def nothing(x: str) -> None:
    return None

@tool
def flaky(x: str) -> str:
    if FAILS["flaky"]:
        FAILS["flaky"] -= 1
        raise ConnectionError("the backend was slow")
    return x

@tool
def boom(x: str) -> str:
    raise ValueError("no such thing")

@tool
def echo(x: str) -> str:
    return x

@tool(risk="high")
def wire(amount: int) -> str:
    return "sent"
"""


@pytest.fixture
def ws(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    return tmp_path


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


def plan(ws: Path, text: str, name: str = "p.plan") -> str:
    (ws / name).write_text(text, encoding="utf-8")
    return name


# -- run's lines ------------------------------------------------------------------------------------------


def test_lines_count_done_calls_and_time(ws, capsys):
    name = plan(ws, '$state.a = echo(x="1")\n$state.b = echo(x=$state.a)\n')
    code, _, err = cli(capsys, "run", name, "--tools", "tools.py", "--no-stdlib")
    assert code == 0
    assert "[c1] echo: running" in err
    assert "[c1] echo: succeeded (1/2, " in err and "[c2] echo: succeeded (2/2, " in err
    assert " s)  \"1\"" in err


def test_caught_failures_say_so(ws, capsys):
    name = plan(ws, '$state.ok || $state.err = boom(x="1")\n$state.n = echo(x="after")\n')
    code, _, err = cli(capsys, "run", name, "--tools", "tools.py", "--no-stdlib")
    assert code == 0
    assert "plan succeeded: 1 failed (caught), 1 succeeded" in err


def test_uncaught_failures_are_not_called_caught(ws, capsys):
    name = plan(ws, '$state.ok = boom(x="1")\n')
    code, _, err = cli(capsys, "run", name, "--tools", "tools.py", "--no-stdlib")
    assert code == 1 and "plan failed: 1 failed" in err and "(caught)" not in err


def test_a_retry_line_names_the_error(ws, capsys):
    name = plan(ws, '@retry(2) $state.a = flaky(x="1")\n')
    code, _, err = cli(capsys, "run", name, "--tools", "tools.py", "--no-stdlib")
    assert code == 0, err
    [retry] = [line for line in err.splitlines() if "retrying" in line]
    assert "attempt 1 failed" in retry and "the backend was slow" in retry


def test_a_tool_returning_null_shows_null(ws, capsys):
    name = plan(ws, '$state.a = nothing(x="1")\n')
    code, _, err = cli(capsys, "run", name, "--tools", "tools.py", "--no-stdlib")
    assert code == 0
    [line] = [line for line in err.splitlines() if "nothing: succeeded" in line]
    assert line.endswith("  null")


# -- the live table --------------------------------------------------------------------------------------


def _event(type_: str, i: int | None = None, **kw):
    return SimpleNamespace(type=type_, step_index=i, preview=kw.get("preview"), error=kw.get("error"),
                           reason=kw.get("reason"), attempt=kw.get("attempt"))


def _rendered(view: ProgressView) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=120, record=True)
    console.print(view.render())
    return console.export_text()


def test_live_table_keeps_running_calls_visible_on_a_short_terminal():
    text = "\n".join(f'$state.v{i} = echo(x="{i}")' for i in range(40)) + "\n"
    p = loads(text)
    now = [100.0]
    view = ProgressView(p, [f"c{i + 1}" for i in range(40)], stream=io.StringIO(), clock=lambda: now[0],
                        height=14)
    view(_event("plan_start"))
    for i in range(30):
        view(_event("plan_step_start", i))
        view(_event("plan_step_complete", i, preview=f'"{i}"'))
    for i in (35, 38, 39):  # late calls running while the rows above them are long done
        view(_event("plan_step_start", i))
    now[0] = 112.5
    shown = _rendered(view)
    assert "30/40 done, 3 running · 12.5 s" in shown
    for cid in ("c36", "c39", "c40"):
        assert any(line.split()[:1] == [cid] and "running" in line for line in shown.splitlines()), shown
    assert "more" in shown and "succeeded" in shown
    assert len(shown.strip().splitlines()) <= 14


def test_live_table_shows_every_call_when_it_fits():
    p = loads('$state.a = echo(x="1")\n$state.b = echo(x="2")\n')
    view = ProgressView(p, ["c1", "c2"], stream=io.StringIO(), clock=lambda: 5.0, height=40)
    view(_event("plan_start"))
    view(_event("plan_step_start", 0))
    view(_event("plan_step_retry", 0, attempt=1, error={"error": "Tool.Timeout", "cause": "slow"}))
    shown = _rendered(view)
    assert "0/2 done, 1 running" in shown and "more" not in shown
    assert "attempt 1 failed (Tool.Timeout: slow); retrying" in shown


def test_results_are_shown_as_written_never_as_markup_or_terminal_codes():
    # a tool's text with "[/INST]"-like brackets was rich markup in the live table (a
    # MarkupError ended the view); control and bidi characters of ids, tools and results
    # are escaped in the table and in the lines alike
    p = loads('[{"_tool": "echo", "x": "1", "_id": "a\\u202eb"}]', format="json")
    preview = '"[/INST] [bold]x[/bold] \\u001b[2J \u202e"'
    view = ProgressView(p, ["a\u202eb"], stream=io.StringIO(), clock=lambda: 5.0, height=40)
    view(_event("plan_start"))
    view(_event("plan_step_complete", 0, preview=preview))
    shown = _rendered(view)
    assert '"[/INST] [bold]x[/bold] \\u001b[2J \\u202e"' in shown and "a\\u202eb" in shown
    lines = io.StringIO()
    view = ProgressView(p, ["a\u202eb"], stream=lines, clock=lambda: 5.0)
    view(_event("plan_step_complete", 0, preview=preview))
    assert "\u202e" not in lines.getvalue()
    assert lines.getvalue().startswith("[a\\u202eb] echo: succeeded")


# -- dry-run, graph, E206 -----------------------------------------------------------------------------------


def test_dry_run_shows_the_predicted_output(ws, capsys):
    (ws / "mocks.yaml").write_text("c1: {result: hello}\n", encoding="utf-8")
    name = plan(ws, '$state.a = echo(x="1")\nreturn {greeting: $state.a}\n')
    code, out, _ = cli(capsys, "dry-run", name, "--tools", "tools.py", "--no-stdlib", "--mocks", "mocks.yaml")
    assert code == 0 and 'predicted output: {"greeting": "hello"}' in out
    code, out, _ = cli(capsys, "dry-run", name, "--tools", "tools.py", "--no-stdlib", "--mocks", "mocks.yaml",
                       "--json")
    assert json.loads(out)["output"] == {"greeting": "hello"}


def test_dry_run_text_shows_ids_and_mock_values_escaped(ws, capsys):
    (ws / "mocks.yaml").write_text('echo: {result: "\\e[2J \\u202e"}\n', encoding="utf-8")
    name = plan(ws, '{"calls": [{"_tool": "echo", "x": "1", "_id": "x\\u001b[31m", "_outputPath": "†state.a"}],'
                    ' "output": "†state.a"}\n', "p.json")
    code, out, _ = cli(capsys, "dry-run", name, "--tools", "tools.py", "--no-stdlib", "--mocks", "mocks.yaml")
    assert code == 0 and "step 1: x\\u001b[31m" in out
    assert 'predicted output: "\\u001b[2J \\u202e"' in out
    assert "\x1b" not in out and "\u202e" not in out


def test_agent_lines_show_the_models_and_tools_text_escaped(ws, capsys):
    # a model's reply (and what the tools make of it) reaches the terminal through these lines
    (ws / "r.yaml").write_text('- reply: |\n    $state.a = echo(x="\\u202e \\u001b[2J")\n    return $state.a\n',
                               encoding="utf-8")
    code, out, err = cli(capsys, "agent", "hi", "--tools", "tools.py", "--no-stdlib", "--provider",
                         "scripted:r.yaml", "--no-store")
    assert code == 0 and json.loads(out)["output"] == "\u202e \x1b[2J"  # the data itself is kept
    assert '[c1] echo: succeeded  "\\u202e \\u001b[2J"' in err and "\u202e" not in err


def test_graph_marks_risky_calls_and_draws_one_edge_per_pair(ws, capsys):
    name = plan(ws, '$state.a = echo(x="1")\n$state.b = echo(x="2")\n'
                    '@after(c1) $state.w = wire(amount=1)\n'
                    '$state.c = echo(x="†state.a and †state.b, again †state.a.x")\n'
                    '@risk(medium) $state.d = echo(x=$state.c)\n')
    code, out, _ = cli(capsys, "graph", name, "--tools", "tools.py", "--no-stdlib")
    assert code == 0
    assert 'n2["c3: wire → †state.w ⚠ risk high"]:::risky' in out
    assert 'n4["c5: echo → †state.d ⚠ risk medium"]:::risky' in out and "classDef risky" in out
    assert out.count("n0 -->") == 1 and '    n0 -->|"†state.a, †state.a.x"| n3' in out
    assert '    n0 -.->|"after"| n2' in out
    code, out, _ = cli(capsys, "graph", name, "--tools", "tools.py", "--no-stdlib", "--format", "dot")
    assert out.count("n0 -> n3") == 1 and "color=red" in out
    code, out, _ = cli(capsys, "graph", name, "--tools", "tools.py", "--no-stdlib", "--format", "json")
    assert json.loads(out)["risky"] == [{"id": "c3", "risk": "high"}, {"id": "c5", "risk": "medium"}]


def test_e206_names_the_provider_flag(ws, capsys):
    (ws / "decl.yaml").write_text("tools:\n  summarize:\n    description: summarize a text\n    latent: true\n"
                                  "    input: {type: object, properties: {text: {type: string}}}\n", encoding="utf-8")
    name = plan(ws, '$state.s = summarize(text="long")\n')
    code, _, err = cli(capsys, "run", name, "--tools", "decl.yaml", "--no-stdlib")
    assert code == 1 and "error[E206]" in err and "--provider" in err


# -- provider failover ------------------------------------------------------------------------------------


class _Down:
    name = "primary"

    async def stream(self, messages, **kw):
        raise ProviderError("overloaded", provider="primary", status=529, retryable=True)
        yield ""  # pragma: no cover - an async generator that fails at once


class _Up:
    name = "backup"

    async def stream(self, messages, **kw):
        yield "$state.a = echo(x=\"1\")"


async def _nothing(_seconds: float) -> None:
    return None


def test_failover_to_another_provider_emits_an_event():
    events: list = []
    provider = FailoverProvider([_Down(), _Up()], max_retries=1, sleep=_nothing, on_event=events.append)

    async def read() -> str:
        return "".join([d async for d in provider.stream([])])

    assert asyncio.run(read()) == '$state.a = echo(x="1")'
    [event] = events
    assert event.type == "provider_failover"
    assert event.data == {"from": "primary", "to": "backup", "error": str(ProviderError(
        "overloaded", provider="primary", status=529, retryable=True)), "attempts": 2}
    assert "primary failed 2 time(s)" in event.reason and "trying backup" in event.reason


def test_the_progress_view_prints_a_failover():
    stream = io.StringIO()
    view = ProgressView(loads("f()\n"), ["c1"], stream=stream)
    provider = FailoverProvider([_Down(), _Up()], max_retries=0, sleep=_nothing, on_event=view)

    async def read() -> None:
        async for _ in provider.stream([]):
            pass

    asyncio.run(read())
    assert stream.getvalue().startswith("provider: primary failed 1 time(s)")
