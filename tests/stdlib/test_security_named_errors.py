"""Issue 17, Low: standard tools fail with their documented dotted codes, never a raw
Python exception; `check` reports malformed tool declarations instead of crashing."""

from __future__ import annotations

import asyncio
import inspect
import json

import pytest

from sophon_dsl.cli import main
from sophon_dsl.runtime.errors import RunError
from stdlib_tools import StdlibConfig, all_tools
from stdlib_tools.errors import ToolError

HUGE = 10 ** 5000  # a value JSON cannot carry: only a Python caller can hand it over

CASES = [
    ("text.truncate", {"value": {"a": HUGE}}, "Text."),
    ("text.join", {"items": [HUGE]}, "Text."),
    ("text.template", {"template": "{a}", "values": {"a": HUGE}}, "Text."),
    ("document.create", {"path": "x.csv", "rows": [{"a": HUGE}]}, "Document."),
    ("memory.write", {"text": "x", "metadata": {"a": HUGE}}, "Memory."),
]


@pytest.mark.parametrize("name,args,prefix", CASES, ids=[c[0] for c in CASES])
def test_a_value_a_tool_cannot_handle_is_a_named_error(tmp_path, name, args, prefix):
    config = StdlibConfig(sandbox_root=tmp_path, memory_db_path=":memory:")
    spec = {t.name: t for t in all_tools(config)}[name]
    with pytest.raises(RunError) as info:
        out = spec.func(**args)
        if inspect.isawaitable(out):
            asyncio.run(out)
    assert isinstance(info.value, ToolError) and info.value.code.startswith(prefix), info.value


MALFORMED = [
    {"t": {"input": 5}},
    {"t": {"input": {"properties": 5}}},
    [{"type": "function", "function": {"name": "t", "parameters": {"properties": {"a": 7}}}}],
    [{"name": "t", "input_schema": []}],
    {"t": {"input": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}, "output": {"$ref": "#"}}},
    {"t": {"input": {"type": "object", "required": [1]}}},
    {"t": {"input": {"type": "object", "properties": {"a": {"pattern": "("}}}}},
]


@pytest.mark.parametrize("declaration", MALFORMED, ids=range(len(MALFORMED)))
def test_check_reports_malformed_declarations_without_a_traceback(tmp_path, capsys, declaration):
    (tmp_path / "d.json").write_text(json.dumps(declaration), encoding="utf-8")
    (tmp_path / "p.plan").write_text('†state.x = t(a="(")\n†state.y = t(a=†state.x)\n', encoding="utf-8")
    capsys.readouterr()
    code = main(["check", str(tmp_path / "p.plan"), "--tools", str(tmp_path / "d.json")])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert code in (0, 1, 2)
