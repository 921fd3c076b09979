"""The standard library as a plugin: found by name, built once per process and configuration,
group by group, schemas derived on first read; the memory store persists between runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import sophon_dsl
import stdlib_tools
from sophon_dsl import stdlib_hook
from sophon_dsl.tools import ToolRegistry, as_registry, tool
from stdlib_tools import StdlibConfig, StdlibSource, default_memory_path

ROOT = Path(__file__).resolve().parents[2]


def test_hook_finds_the_library_by_name():
    assert stdlib_hook.library() is stdlib_tools
    assert stdlib_hook.tool_source(False) is None and stdlib_hook.tool_source(None) is None
    assert isinstance(stdlib_hook.tool_source(True), StdlibSource)


def test_two_runs_build_the_library_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a configuration of its own (the sandbox is the current directory)
    plan = sophon_dsl.loads('†state.t = text.truncate(value="hello world", max_chars=5)\n')
    before = stdlib_tools.cache_info().misses
    first = sophon_dsl.run(plan)
    second = sophon_dsl.run(plan)
    assert first.status == second.status == "succeeded"
    assert second.state["state"]["t"]["text"] == "hello"
    assert stdlib_tools.cache_info().misses == before + 1
    shared = stdlib_tools.source()
    assert shared is stdlib_tools.source(StdlibConfig())  # equal configs share one source
    assert shared.groups_built == ("text",)  # only the group the plan used was built


def test_source_builds_groups_on_demand_and_checks_names():
    src = StdlibSource(StdlibConfig(memory_db_path=":memory:"))
    assert "http.get" in src.names() and "shell.run" not in src.names()
    assert src.groups_built == ()
    assert src.get("math.eval").name == "math.eval" and src.groups_built == ("math",)
    assert src.get("no.such") is None and src.get("shell.run") is None
    assert tuple(t.name for t in src()) == src.names()
    with pytest.raises(ValueError, match="unknown standard tool"):
        stdlib_tools.source(only=["nope"])
    with pytest.raises(ValueError, match="enable_shell") as refused:
        stdlib_tools.source(only=["shell"])
    # the CLI prints this message as it is (`--stdlib shell`): it names the command line's way too
    assert "--stdlib-config" in str(refused.value) and "[tool.sophon-dsl.stdlib]" in str(refused.value)


def test_registry_notes_need_no_build():
    @tool(name="http.get")
    def mine(url: str) -> str:
        return url

    src = StdlibSource(StdlibConfig(memory_db_path=":memory:"))
    reg = ToolRegistry([mine], fallback=src)
    notes = reg.notes()
    assert [d.code for d in notes] == ["N201"] and "'http.get' (user)" in notes[0].message
    assert src.groups_built == ()
    assert reg["http.request"].origin == "stdlib" and src.groups_built == ("http",)
    assert "nope" not in reg and src.groups_built == ("http",)


def test_schemas_are_derived_on_first_read(monkeypatch):
    from sophon_dsl import tools

    calls = []
    real = tools.schemas_from_function
    monkeypatch.setattr(tools, "schemas_from_function", lambda fn: calls.append(fn) or real(fn))

    @tool
    def add(a: int, b: int = 1) -> int:
        return a + b

    assert calls == []
    assert add.input_schema["required"] == ["a"] and add.output_schema == {"type": "integer"}
    assert len(calls) == 1
    assert add.params == {"a": {"type": "integer"}, "b": {"default": 1, "type": "integer"}}
    assert len(calls) == 1 and add(2) == 3


def test_standard_tool_schemas_are_derived_on_first_read():
    spec = StdlibSource(StdlibConfig(memory_db_path=":memory:")).get("text.truncate")
    assert "input_schema" not in vars(spec)
    assert spec.input_schema["additionalProperties"] is False and "input_schema" in vars(spec)


def test_default_memory_path_follows_xdg_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_memory_path() == str(tmp_path / "data" / "sophon-dsl" / "memory.sqlite3")
    assert StdlibConfig().memory_db_path == default_memory_path()
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_memory_path() == os.path.join(os.path.expanduser("~"), ".local", "share", "sophon-dsl",
                                                 "memory.sqlite3")


def _cli(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sophon_dsl", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_memory_persists_across_two_runs(tmp_path):
    write = tmp_path / "write.plan"
    write.write_text('†state.w = memory.write(text="the launch moved to friday", tags=["ops"])\n', encoding="utf-8")
    search = tmp_path / "search.plan"
    search.write_text('†state.found = memory.search(query="launch")\n', encoding="utf-8")
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT))
    first = _cli("run", str(write), "--approve", "yes", "--json", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "xdg" / "sophon-dsl" / "memory.sqlite3").is_file()
    second = _cli("run", str(search), "--json", env=env, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "the launch moved to friday" in second.stdout


def test_memory_path_from_stdlib_config(tmp_path):
    db = tmp_path / "mem" / "team.sqlite3"
    config = tmp_path / "stdlib.yaml"
    config.write_text(f"memory_db_path: {db}\n", encoding="utf-8")
    write = tmp_path / "write.plan"
    write.write_text('†state.w = memory.write(text="remember the milk")\n', encoding="utf-8")
    search = tmp_path / "search.plan"
    search.write_text('†state.found = memory.search(query="milk")\n', encoding="utf-8")
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT))
    first = _cli("run", str(write), "--approve", "yes", "--stdlib-config", str(config), env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    # (the run store, issue 13, lives under xdg too: the memory store must not)
    assert db.is_file() and not (tmp_path / "xdg" / "sophon-dsl" / "memory.sqlite3").exists()
    second = _cli("run", str(search), "--json", "--stdlib-config", str(config), env=env, cwd=tmp_path)
    assert second.returncode == 0 and "remember the milk" in second.stdout
    third = _cli("run", str(search), "--json", env=env, cwd=tmp_path)  # the default store is another one
    assert third.returncode == 0 and "remember the milk" not in third.stdout


def test_library_calls_share_the_store_of_their_configuration(tmp_path):
    config = StdlibConfig(memory_db_path=str(tmp_path / "m.sqlite3"))
    write = sophon_dsl.loads('†state.w = memory.write(text="alpha beta")\n')
    search = sophon_dsl.loads('†state.r = memory.search(query="alpha")\n')
    assert sophon_dsl.run(write, as_registry(None, stdlib=config), approve=True).status == "succeeded"
    found = sophon_dsl.run(search, as_registry(None, stdlib=config))
    assert [r["text"] for r in found.state["state"]["r"]["results"]] == ["alpha beta"]


def test_every_group_builds_exactly_what_groups_lists(tmp_path):
    config = StdlibConfig(sandbox_root=str(tmp_path), enable_shell=True)
    names = [spec.name for spec in StdlibSource(config)()]
    assert names == [n for listed in stdlib_tools.GROUPS.values() for n in listed]


def test_a_tool_missing_from_groups_is_an_error_not_dropped(tmp_path, monkeypatch):
    # data's module builds data.pick (and more); a GROUPS entry without them must not lose them quietly
    monkeypatch.setitem(stdlib_tools.GROUPS, "data", ("data.query",))
    source = StdlibSource(StdlibConfig(sandbox_root=str(tmp_path)), only=["data"])
    with pytest.raises(stdlib_tools.GroupMismatch, match=r"builds 'data.pick', which GROUPS\['data'\] does not list"):
        source.get("data.query")
    # and a name GROUPS lists that the module does not build is reported the same way
    monkeypatch.setitem(stdlib_tools.GROUPS, "math", ("math.eval", "math.solve"))
    source = StdlibSource(StdlibConfig(sandbox_root=str(tmp_path)), only=["math"])
    with pytest.raises(stdlib_tools.GroupMismatch, match=r"lists 'math.solve', which stdlib_tools.math does not"):
        source.get("math.eval")
    assert issubclass(stdlib_tools.GroupMismatch, sophon_dsl.SophonError)
