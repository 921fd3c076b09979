"""Issue 10, "data loss and hangs": what the CLI writes, where it prompts, and how it ends.

Every case runs the real console script in a subprocess (signals, terminals and the
interpreter's exit are what is under test); nothing is mocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sophon_dsl.loader import parse

CLI = [sys.executable, "-m", "sophon_dsl"]

TOOLS = """\
import time
from sophon_dsl import tool

@tool
def echo(text: str) -> str:
    return text

@tool(risk="high")
def send(to: str, body: str) -> dict:
    return {"sent": to}

@tool
def slow(seconds: float) -> str:
    time.sleep(seconds)
    return "done"
"""


def cli(*argv: str, cwd: Path, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *argv], cwd=cwd, input=stdin, capture_output=True, text=True,
                          encoding="utf-8", errors="backslashreplace", timeout=timeout)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    return tmp_path


# -- 1. lone surrogates are refused at load; writes are atomic and skipped when unchanged --------

SURROGATE_PLANS = {
    "s.plan": ('$state.x = echo(text="a\\ud800")\n', None),
    "q.plan": ("$state.x = echo(text='\\udc00')\n", None),
    "s.json": ('[{"_tool": "echo", "text": "a\\ud800"}]\n', "$[0].text"),
    "k.json": ('[{"_tool": "echo", "text": {"\\ud800": 1}}]\n', '$[0].text["\\ud800"]'),
    "s.yaml": ('- _tool: echo\n  text: "\\uD800"\n', "$[0].text"),
    "l.yaml": ('- _tool: echo\n  text: "\\U0000DFFF"\n', "$[0].text"),
}


@pytest.mark.parametrize("name", sorted(SURROGATE_PLANS))
def test_lone_surrogate_is_refused_by_every_command(ws: Path, name: str) -> None:
    text, path = SURROGATE_PLANS[name]
    plan = ws / name
    plan.write_text(text, encoding="utf-8")
    for argv in (["check", name, "--tools", "tools.py"], ["fmt", name], ["fmt", "-w", name],
                 ["run", name, "--tools", "tools.py", "--approve", "yes"]):
        done = cli(*argv, cwd=ws)
        assert done.returncode == 1, (argv, done.stderr)
        assert "Traceback" not in done.stderr and "UnicodeEncodeError" not in done.stderr, done.stderr
        assert "error[E006]" in done.stderr and "lone surrogate" in done.stderr, done.stderr
        assert f"{name}:1:" in done.stderr or f"{name}:2:" in done.stderr  # positioned
        if path is not None:
            assert f"(at {path})" in done.stderr, done.stderr
    assert plan.read_text(encoding="utf-8") == text  # fmt -w left the file as it was


def test_check_json_reports_e006_with_a_path(ws: Path) -> None:
    (ws / "s.json").write_text('[{"_tool": "echo", "text": "\\ud800"}]', encoding="utf-8")
    done = cli("check", "s.json", "--tools", "tools.py", "--json", cwd=ws)
    assert done.returncode == 1
    diags = json.loads(done.stdout)
    assert [(d["code"], d["path"], d["line"], d["column"]) for d in diags] == [("E006", "$[0].text", 1, 28)]


def test_surrogate_pairs_are_text_and_still_load() -> None:
    result = parse('$state.x = echo(text="\\ud83d\\ude00")\n')
    assert result.ok and result.plan.calls[0].params[0].value.value == "\U0001F600"
    assert parse('[{"_tool": "echo", "text": "\\ud83d\\ude00"}]', "json").ok
    assert parse('- _tool: echo\n  text: "\\ud83d\\ude00 \\\\ud800"\n', "yaml").ok  # an escaped backslash


def test_lone_surrogate_handed_over_by_a_program_is_refused() -> None:
    for text, form in (('$state.x = echo(text="a\ud800")\n', "dsl"), ('[{"_tool": "a\udc00"}]', "json"),
                       ('- _tool: "a\ud800"\n', "yaml")):
        result = parse(text, form)
        assert [d.code for d in result.diagnostics] == ["E006"], (form, result.diagnostics)
        assert result.diagnostics[0].span is not None


@pytest.mark.parametrize("flag,value,path", [("--input", '{"t": "\\ud800"}', "$.t"),
                                             ("--state", '{"k": {"a\\udc00": 1}}', '$.k["a\\udc00"]'),
                                             ("--input", '["ok", "\\udfff"]', "$[1]")])
def test_lone_surrogate_in_input_or_state_is_a_usage_error(ws: Path, flag: str, value: str, path: str) -> None:
    (ws / "in.plan").write_text("$state.x = echo(text=$input.t)\n", encoding="utf-8")
    done = cli("run", "in.plan", "--tools", "tools.py", flag, value, cwd=ws)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{flag}: error[E006] at {path}: a string holds a lone surrogate" in done.stderr


def test_fmt_w_leaves_a_formatted_file_untouched(ws: Path) -> None:
    plan = ws / "p.plan"
    plan.write_text('$state.x   =   echo(text="a")\n', encoding="utf-8")
    done = cli("fmt", "-w", "p.plan", cwd=ws)
    assert done.returncode == 0 and "wrote p.plan" in done.stderr
    formatted = plan.read_text(encoding="utf-8")
    assert formatted == '$state.x = echo(text="a")\n'
    os.utime(plan, (1_000_000_000, 1_000_000_000))
    before = os.stat(plan)
    done = cli("fmt", "-w", "p.plan", cwd=ws)
    assert done.returncode == 0 and "already formatted" in done.stderr, done.stderr
    after = os.stat(plan)
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)
    assert sorted(p.name for p in ws.iterdir()) == ["p.plan", "tools.py"]  # no temp file left


def test_fmt_w_replaces_the_file_atomically_and_keeps_its_mode(ws: Path) -> None:
    plan = ws / "p.plan"
    plan.write_text('$state.x   =   echo(text="a")\n', encoding="utf-8")
    os.chmod(plan, 0o640)
    inode = os.stat(plan).st_ino
    assert cli("fmt", "-w", "p.plan", cwd=ws).returncode == 0
    # a new file renamed over the old one (a reader never sees it half written)
    assert os.stat(plan).st_ino != inode
    assert os.stat(plan).st_mode & 0o777 == 0o640
    assert sorted(p.name for p in ws.iterdir()) == ["p.plan", "tools.py"]
    assert cli("fmt", "-w", "p.plan", "--to", "json", cwd=ws).returncode == 0
    assert json.loads((ws / "p.json").read_text(encoding="utf-8"))[0]["_tool"] == "echo"
