"""Issue 17, Low: memory tag filters match exactly (they separate users), and a store
another writer holds locked gives a named error after the busy timeout."""

from __future__ import annotations

import sqlite3

import pytest

from stdlib_tools import StdlibConfig
from stdlib_tools.errors import ToolError

from stdlib_helpers import tools_by_name


def _tools(path, **kw):
    return tools_by_name(StdlibConfig(memory_db_path=str(path), **kw), ["memory"])


def test_tag_filters_are_exact(tmp_path):
    t = _tools(tmp_path / "m.sqlite3")
    t["memory.write"](text="alice's plan", tags=["user-1"])
    t["memory.write"](text="bob's plan", tags=["user-12"])
    t["memory.write"](text="carol's plan", tags=["users"])
    t["memory.write"](text="dan's plan", tags=["user", "1"])
    found = lambda tags, q="plan": sorted(r["text"] for r in t["memory.search"](query=q, tags=tags)["results"])
    assert found(["user-1"]) == ["alice's plan"]
    assert found(["user"]) == ["dan's plan"]
    assert found(["user-12"]) == ["bob's plan"]
    assert found(["users"], q="") == ["carol's plan"]
    with pytest.raises(ToolError) as info:
        t["memory.write"](text="x", tags=["two words"])
    assert info.value.code == "Memory.InvalidArgument"


def test_a_locked_store_is_a_named_error(tmp_path):
    path = tmp_path / "shared.sqlite3"
    t = _tools(path, memory_busy_timeout=0.2)
    t["memory.write"](text="first")
    other = sqlite3.connect(path)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(ToolError) as info:
            t["memory.write"](text="second")
        assert info.value.code == "Memory.Busy"
        with pytest.raises(ToolError) as info:
            t["memory.search"](query="first")
        assert info.value.code == "Memory.Busy"
    finally:
        other.rollback()
        other.close()
    assert t["memory.write"](text="third")["id"] > 0
