"""Each group's tools close over only the configuration fields the group declares
(``@uses_config``): what a group reads but does not declare would silently read its
default, so the declarations are checked against the code here."""

from __future__ import annotations

import ast
import importlib
from dataclasses import fields
from pathlib import Path

import pytest

import stdlib_tools
from stdlib_tools import StdlibConfig
from stdlib_tools.config import only_fields

# properties of StdlibConfig and the field each reads
_DERIVED = {"root": "sandbox_root"}


@pytest.mark.parametrize("group", sorted(stdlib_tools.GROUPS))
def test_a_group_declares_every_field_it_reads(group):
    module = importlib.import_module(f"stdlib_tools.{group}")
    declared = module.build.config_fields
    tree = ast.parse(Path(module.__file__).read_text())
    read = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "config"}
    read = {_DERIVED.get(name, name) for name in read}
    assert read <= declared, f"{group} reads {sorted(read - declared)} without declaring them"


def test_only_fields_keeps_the_named_fields_and_resets_the_rest(tmp_path):
    config = StdlibConfig(sandbox_root=str(tmp_path), smtp_password="hunter2-secret", files_max_bytes=7,
                          http_allow_list=("api.local",))
    kept = only_fields(config, frozenset({"sandbox_root", "files_max_bytes"}))
    assert kept.sandbox_root == str(tmp_path) and kept.files_max_bytes == 7
    assert kept.smtp_password is None and kept.http_allow_list == ()
    names = frozenset(f.name for f in fields(StdlibConfig))
    assert only_fields(config, names) is config  # nothing to drop: the same object


def test_a_built_tool_still_sees_its_own_settings(tmp_path):
    (tmp_path / "big.txt").write_text("x" * 50)
    config = StdlibConfig(sandbox_root=str(tmp_path), files_max_bytes=10, smtp_password="s")
    tools = {t.name: t for t in stdlib_tools.all_tools(config, only=["files"])}
    out = tools["files.read"].func(path="big.txt")
    assert out["truncated"] and out["content"] == "x" * 10  # the configured cap, not the default
