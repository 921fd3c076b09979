"""The durable package takes the CLI's flags as a typed ToolConfig and never sees the
command line's namespace (issue 27, item 5)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import sophon_dsl
from sophon_dsl.durable.runconfig import TOOL_FLAGS, ToolConfig, stored_config
from sophon_dsl.durable.trust import seal_meta

PKG = Path(sophon_dsl.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    return names


def test_durable_and_goals_know_no_cli() -> None:
    for package in ("durable", "goals"):
        for path in (PKG / package).glob("*.py"):
            found = {n for n in _imports(path) if n == "argparse" or n.lstrip(".").startswith("cli")
                     or n.startswith("sophon_dsl.cli")}
            assert not found, f"{path.name} imports {found}"


def test_meta_makes_paths_absolute_and_keeps_the_provider(tmp_path: Path) -> None:
    tools = tmp_path / "mytools.py"
    tools.write_text("", encoding="utf-8")
    meta = ToolConfig(tools=[str(tools), "some.module"], sandbox="box").meta("scripted", "m1")
    assert meta["tools"] == [str(tools), "some.module"] and meta["sandbox"] == os.path.abspath("box")
    assert (meta["provider"], meta["model"]) == ("scripted", "m1")
    assert set(meta) == set(TOOL_FLAGS) | {"provider", "model"}


def test_a_continuation_takes_the_rows_tools_unless_some_are_given() -> None:
    meta = {"tools": None, "no_stdlib": True, "allow_host": ["a.example"]}
    assert ToolConfig().stored_fields(meta) == {"tools": [], "no_stdlib": True, "allow_host": ["a.example"]}
    assert ToolConfig(no_stdlib=True).stored_fields(meta) == {}
    assert ToolConfig().stored_fields(None) == {}


def test_stored_config_takes_a_sealed_rows_values_not_given_now() -> None:
    row = {"run_id": "r1", "spec": {"kind": "agent",
                                    "meta": seal_meta({"provider": "scripted", "model": "m", "tools": []})}}
    got = stored_config(row, ToolConfig(), given=["model"])
    assert got.get("provider") == "scripted" and "model" not in got
