"""all_tools(): selection, schemas, risk levels, outputs matching their declared schemas."""

from __future__ import annotations

import jsonschema
import pytest

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolRegistry, tool
from stdlib_tools import GROUPS, StdlibConfig, all_tools, tool_names

from stdlib_helpers import run

EXPECTED_RISK = {
    "http.request": Risk.MEDIUM, "http.get": Risk.LOW, "files.read": Risk.LOW,
    "files.write": Risk.MEDIUM, "files.list": Risk.LOW, "document.create": Risk.MEDIUM,
    "email.send": Risk.HIGH, "shell.run": Risk.CRITICAL, "memory.write": Risk.LOW,
}


def test_every_tool_declared_completely(tmp_path):
    tools = all_tools(StdlibConfig(sandbox_root=tmp_path, enable_shell=True))
    names = [t.name for t in tools]
    assert len(names) == len(set(names)) == 23
    assert names == tool_names(StdlibConfig(enable_shell=True))
    for t in tools:
        assert t.origin == "stdlib" and t.func is not None and t.description, t.name
        assert t.input_schema["type"] == "object" and t.input_schema["additionalProperties"] is False
        assert t.output_schema is not None, t.name
        jsonschema.Draft202012Validator.check_schema(t.input_schema)
        jsonschema.Draft202012Validator.check_schema(t.output_schema)
        assert "$defs" not in t.output_schema and '"title"' not in str(t.output_schema).replace("'", '"')
        assert t.risk == EXPECTED_RISK.get(t.name, t.risk)
        assert t.risk >= Risk.NONE
    assert {t.name for t in tools if t.risk >= Risk.HIGH} == {"email.send", "shell.run"}


def test_selection_by_group_and_name():
    names = [t.name for t in all_tools(only=["http", "files", "text.truncate"])]
    assert names == ["http.request", "http.get", "files.read", "files.write", "files.list",
                     "text.truncate"]
    assert [t.name for t in all_tools(only=["datetime", "memory.search"])] == \
        ["datetime.now", "time.sleep", "memory.search"]
    assert all_tools(only=[]) == []
    assert "shell.run" not in tool_names()
    with pytest.raises(ValueError, match="unknown standard tool"):
        all_tools(only=["nope"])
    with pytest.raises(ValueError, match="enable_shell"):
        all_tools(only=["shell.run"])
    assert set(GROUPS) == {"http", "files", "data", "text", "math", "time", "memory", "documents",
                           "email", "shell"}


def test_registry_and_user_override():
    @tool(name="http.get", risk="low")
    def my_get(url: str) -> str:
        return "mine"

    reg = ToolRegistry(all_tools()).with_tools([my_get])
    assert reg["http.get"].func is my_get.func
    assert [(old.origin, new.origin) for old, new in reg.replaced] == [("stdlib", "user")]


def test_configs_do_not_share_state(tmp_path):
    # in-memory stores: the default, a per-user file, is shared on purpose (see test_stdlib_source.py)
    a = {t.name: t for t in all_tools(StdlibConfig(sandbox_root=tmp_path / "a", memory_db_path=":memory:"))}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    b = {t.name: t for t in all_tools(StdlibConfig(sandbox_root=tmp_path / "b", memory_db_path=":memory:"))}
    a["files.write"](path="x.txt", content="a")
    assert not (tmp_path / "b" / "x.txt").exists()
    a["memory.write"](text="alpha")
    assert b["memory.search"](query="alpha")["results"] == []


def test_outputs_match_declared_schemas(tmp_path):
    cfg = StdlibConfig(sandbox_root=tmp_path, enable_shell=True)
    t = {s.name: s for s in all_tools(cfg)}
    samples = {
        "files.write": t["files.write"](path="d/a.txt", content="hi"),
        "files.read": t["files.read"](path="d/a.txt"),
        "files.list": t["files.list"](recursive=True),
        "data.validate": t["data.validate"](value=1, schema={"type": "string"}),
        "data.pick": t["data.pick"](value={"a": 1}, keys=["a"]),
        "text.template": t["text.template"](template="{a}", values={"a": 1}),
        "text.split": t["text.split"](text="a b"),
        "text.join": t["text.join"](items=["a"]),
        "text.regex_extract": t["text.regex_extract"](text="ab", pattern="(a)(x)?"),
        "text.truncate": t["text.truncate"](value=list(range(5000)), max_chars=100),
        "math.eval": t["math.eval"](expression="1 < 2"),
        "datetime.now": t["datetime.now"](),
        "time.sleep": run(t["time.sleep"](seconds=0)),
        "memory.write": t["memory.write"](text="x", metadata={"k": [1]}),
        "memory.search": t["memory.search"](query="x"),
        "document.create": t["document.create"](path="t.csv", rows=[{"a": 1}]),
        "shell.run": run(t["shell.run"](command=["true"])),
    }
    for name, out in samples.items():
        jsonschema.validate(out, t[name].output_schema)
    # inputs as a plan would give them validate against the input schemas
    jsonschema.validate({"url": "https://example.com", "params": {"q": "x"}}, t["http.get"].input_schema)
    jsonschema.validate({"expression": "x + 1", "variables": {"x": 2}}, t["math.eval"].input_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"url": "https://example.com", "bogus": 1}, t["http.get"].input_schema)
