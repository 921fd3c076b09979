"""Bundled examples: the seed 004 plans in all three forms, and the competitors example."""

from __future__ import annotations

from pathlib import Path

import pytest

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.toolsource import load_tool_source

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "seed004"
STEMS = sorted(p.stem for p in SEED.glob("*.json"))


def test_every_seed_example_exists_in_three_forms():
    assert len(STEMS) == 11
    for stem in STEMS:
        for ext in (".json", ".yaml", ".plan"):
            assert (SEED / f"{stem}{ext}").is_file(), f"{stem}{ext}"


@pytest.mark.parametrize("stem", STEMS)
def test_three_forms_give_equal_models(stem):
    plans = [sophon_dsl.load(SEED / f"{stem}{ext}") for ext in (".json", ".yaml", ".plan")]
    assert plans[0] == plans[1] == plans[2]


@pytest.mark.parametrize("stem", STEMS)
def test_dsl_and_yaml_forms_are_canonical(stem):
    for ext, fmt in ((".plan", "dsl"), (".yaml", "yaml")):
        text = (SEED / f"{stem}{ext}").read_text(encoding="utf-8")
        assert sophon_dsl.dumps(sophon_dsl.loads(text, format=fmt), format=fmt).rstrip("\n") == text.rstrip("\n")


def test_seed_examples_check_clean_once_tools_are_declared(capsys):
    tools, diags = load_tool_source(str(ROOT / "examples" / "seed004_tools.yaml"))
    assert not diags and len(tools) == 13
    for stem in STEMS:
        plan = sophon_dsl.load(SEED / f"{stem}.json")
        errors = [d for d in sophon_dsl.check(plan, tools=tools) if d.is_error]
        assert errors == [], (stem, [str(d) for d in errors])
    args = ["check", *map(str, sorted(SEED.glob("*.json"))), "--tools", str(ROOT / "examples" / "seed004_tools.yaml")]
    assert main(args) == 0
    assert "0 error(s)" in capsys.readouterr().err


def test_competitors_example_in_three_forms():
    forms = [sophon_dsl.load(ROOT / "examples" / f"competitors{ext}") for ext in (".plan", ".json", ".yaml")]
    assert forms[0] == forms[1] == forms[2]


def test_agent_demo_repairs_its_plan_and_finishes(capsys):
    args = ["agent", "Compare Acme Corp, Globex and Initech and email the team",
            "--tools", str(ROOT / "examples" / "competitors_tools.py"),
            "--provider", "scripted:" + str(ROOT / "examples" / "agent" / "competitors_replies.yaml"),
            "--input", "@" + str(ROOT / "examples" / "competitors_input.json"),
            "--approve", "yes", "--json"]
    assert main(args) == 0
    import json

    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "succeeded"
    assert len(result["turns"]) == 2
    [error] = result["turns"][0]["errors"]
    assert error["id"] == "c3" and error["error"]["code"] == "E201"
    assert (error["error"]["line"], error["error"]["column"]) == (3, 18)
    assert result["turns"][1]["errors"] == []
    assert result["output"]["message_id"].startswith("msg-")
