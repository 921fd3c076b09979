"""The map examples (examples/map.plan, .json, .yaml): one plan in three forms, clean, runnable."""

from __future__ import annotations

from pathlib import Path

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.runtime import run
from sophon_dsl.toolsource import load_tool_source

ROOT = Path(__file__).resolve().parent.parent / "examples"


def test_the_three_forms_are_one_plan():
    plans = [sophon_dsl.load(ROOT / f"map{ext}") for ext in (".plan", ".json", ".yaml")]
    assert plans[0] == plans[1] == plans[2]
    assert plans[0].calls[1].map is not None


def test_they_check_clean(capsys):
    files = [str(ROOT / f"map{ext}") for ext in (".plan", ".json", ".yaml")]
    assert main(["check", *files, "--tools", str(ROOT / "map_tools.py")]) == 0
    assert "0 error(s), 0 warning(s)" in capsys.readouterr().out


def test_it_runs_and_keeps_the_failed_page_in_its_slot():
    tools, diags = load_tool_source(str(ROOT / "map_tools.py"))
    assert not diags
    res = run(sophon_dsl.load(ROOT / "map.plan"), tools=tools, input={"topic": "sea otters"})
    assert res.status == "succeeded"
    pages = res.state["state"]["pages"]
    assert [p["title"] for p in pages] == ["sea otters #1", "sea otters #2", "sea otters #3"]
    assert pages[1]["fr"]["error"] == "Tool.Failed" and pages[0]["fr"].startswith("[fr]")
