"""The Python entry points of issue 2: load, loads, dumps, check, tool."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import sophon_dsl
from sophon_dsl import DiagnosticError, Risk, tool

ROOT = Path(__file__).resolve().parents[1]

SEED_PLAN_JSON = """[
  {"_tool": "fetchUserProfile", "userName": "Alice", "_outputPath": "†state.userProfileData"},
  {"_tool": "summarizeProfile", "profile": "†state.userProfileData", "_outputPath": "†state.profileSummary"}
]"""

SEED_PLAN_DSL = """†state.userProfileData = fetchUserProfile(userName="Alice")
†state.profileSummary = summarizeProfile(profile=†state.userProfileData)
"""

SEED_PLAN_YAML = """- _tool: fetchUserProfile
  userName: Alice
  _outputPath: †state.userProfileData
- _tool: summarizeProfile
  profile: †state.userProfileData
  _outputPath: †state.profileSummary
"""


@tool
def fetchUserProfile(userName: str) -> dict:
    """Fetch a profile."""
    return {"name": userName}


@tool(name="summarizeProfile", risk="LOW", description="Summarise a profile")
async def summarize(profile: dict) -> str:
    return str(profile)


def test_public_surface_is_small_and_explicit():
    assert "load" in sophon_dsl.__all__ and "check" in sophon_dsl.__all__
    for name in sophon_dsl.__all__:
        assert hasattr(sophon_dsl, name)


def test_three_forms_load_to_equal_models():
    a = sophon_dsl.loads(SEED_PLAN_JSON, format="json")
    b = sophon_dsl.loads(SEED_PLAN_DSL, format="dsl")
    c = sophon_dsl.loads(SEED_PLAN_YAML, format="yaml")
    assert a == b == c
    assert [call.tool for call in a.calls] == ["fetchUserProfile", "summarizeProfile"]


def test_dumps_round_trips_every_form():
    plan = sophon_dsl.loads(SEED_PLAN_DSL)
    for fmt in ("dsl", "json", "yaml"):
        assert sophon_dsl.loads(sophon_dsl.dumps(plan, format=fmt), format=fmt) == plan


def test_load_picks_form_from_extension(tmp_path):
    for name, text in (("p.plan", SEED_PLAN_DSL), ("p.json", SEED_PLAN_JSON), ("p.yml", SEED_PLAN_YAML)):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        assert len(sophon_dsl.load(path).calls) == 2


def test_loads_raises_with_every_diagnostic():
    with pytest.raises(DiagnosticError) as exc:
        sophon_dsl.loads('[{"_tool": 3}, {"x": 1}]', format="json")
    codes = [d.code for d in exc.value.diagnostics]
    assert len(codes) == 2 and all(c.startswith("E1") for c in codes)


def test_check_with_tool_decorator():
    plan = sophon_dsl.loads(SEED_PLAN_DSL)
    assert sophon_dsl.check(plan, tools=[fetchUserProfile, summarize]) == []
    bad = sophon_dsl.loads('†state.p = fetchUserProfile(userName=42)\n')
    [diag] = sophon_dsl.check(bad, tools=[fetchUserProfile])
    assert diag.code == "E204" and diag.line == 1


def test_tool_decorator_builds_schemas_and_keeps_function():
    assert fetchUserProfile.name == "fetchUserProfile"
    assert fetchUserProfile.input_schema["properties"]["userName"]["type"] == "string"
    assert fetchUserProfile.input_schema["required"] == ["userName"]
    assert fetchUserProfile.output_schema["type"] == "object"
    assert fetchUserProfile("Bo") == {"name": "Bo"}
    assert summarize.name == "summarizeProfile" and summarize.risk is Risk.LOW
    assert summarize.is_async and asyncio.run(summarize.func({"a": 1})) == "{'a': 1}"
    assert summarize.description == "Summarise a profile"


def test_tool_decorator_dotted_name_and_bad_risk():
    @tool(name="web.search", risk="Critical")
    def search(query: str, limit: int = 5) -> list[str]:
        return []

    assert search.name == "web.search" and search.risk is Risk.CRITICAL
    assert search.required == ("query",)
    assert search.output_schema == {"items": {"type": "string"}, "type": "array"}
    with pytest.raises(ValueError, match="unknown risk level"):
        tool(risk="severe")(lambda: None)


def test_examples_exist_in_all_three_forms():
    for stem in ("competitors",):
        for ext in (".plan", ".json", ".yaml"):
            plan = sophon_dsl.load(ROOT / "examples" / f"{stem}{ext}")
            assert len(plan.calls) == 5
