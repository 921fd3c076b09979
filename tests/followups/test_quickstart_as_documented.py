"""docs/quickstart.md as a new user follows it: its files, its commands, the output it shows.

The plan and the tools are taken from the page's own code blocks, so the page cannot drift
from what the CLI does without this failing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sophon_dsl.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```[^\n]*\n(.*?)^```", PAGE, re.S | re.M)


def _block(first_line: str) -> str:
    found = [b for b in BLOCKS if b.startswith(first_line + "\n")]
    assert len(found) == 1, first_line
    return found[0]


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the run store of `run`
    (tmp_path / "hello.plan").write_text(_block("# hello.plan"), encoding="utf-8")
    (tmp_path / "tools.py").write_text(_block("# tools.py"), encoding="utf-8")
    (tmp_path / "tools.yaml").write_text(_block("# tools.yaml"), encoding="utf-8")
    return tmp_path


def test_run_and_check_succeed_as_the_page_says(ws, capsys):
    assert main(["run", "hello.plan", "--tools", "tools.py", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["state"]["summary"] == "Alice is on the pro plan"
    for tools in ("tools.py", "tools.yaml"):
        assert main(["check", "hello.plan", "--tools", tools]) == 0
        assert capsys.readouterr().out == "1 plan(s) checked: 0 error(s), 0 warning(s)\n"


def test_the_misspelt_tool_is_reported_as_shown(ws, capsys):
    shown = PAGE.split("A problem is reported once, with its place and a stable code:\n\n```\n", 1)[1]
    shown = shown.split("```", 1)[0]
    plan = ws / "hello.plan"
    plan.write_text(plan.read_text(encoding="utf-8").replace("= summarizeProfile(", "= summariseProfile("),
                    encoding="utf-8")
    assert main(["check", "hello.plan", "--tools", "tools.py"]) == 1
    out = capsys.readouterr()
    assert out.out + out.err == shown


def test_fmt_check_fails_on_the_pages_plan_until_fmt_w(ws, capsys):
    assert main(["fmt", "hello.plan", "--check"]) == 1  # the page says why: fmt writes $ for the dagger
    assert main(["fmt", "-w", "hello.plan"]) == 0
    assert main(["fmt", "hello.plan", "--check"]) == 0
    assert main(["fmt", "--check", "."]) == 0  # the directory form the page shows
    text = (ws / "hello.plan").read_text(encoding="utf-8")
    assert "summarizeProfile($state.profile)" in text and "†" not in text  # as the page describes fmt


def test_fmt_to_json_prints_the_pages_json_form(ws, capsys):
    assert main(["fmt", "hello.plan", "--to", "json"]) == 0
    shown = json.loads(next(b for b in BLOCKS if b.lstrip().startswith('[\n  {"_tool": "fetchUserProfile"')))
    assert json.loads(capsys.readouterr().out) == shown
