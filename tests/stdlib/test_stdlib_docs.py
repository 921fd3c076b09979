"""Every example plan in docs/stdlib.md parses and passes `check` against the standard tools."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stdlib_tools import StdlibConfig, all_tools, tool_names

DOC = Path(__file__).resolve().parents[2] / "docs" / "stdlib.md"
BLOCKS = re.findall(r"```sophon\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S) if DOC.exists() else []


def test_every_tool_is_documented_with_an_example():
    assert DOC.exists()
    text = DOC.read_text(encoding="utf-8")
    examples = "\n".join(BLOCKS)
    for name in tool_names(StdlibConfig(enable_shell=True)):
        assert f"`{name}`" in text, name
        assert f"{name}(" in examples, name


@pytest.mark.parametrize("block", BLOCKS, ids=[b.split("(")[0].split("=")[-1].strip() for b in BLOCKS])
def test_doc_example_checks(block, tmp_path):
    loader = pytest.importorskip("sophon_dsl.loader")
    compiler = pytest.importorskip("sophon_dsl.compiler")
    result = loader.parse(block)
    assert result.ok, [str(d) for d in result.diagnostics]
    tools = all_tools(StdlibConfig(sandbox_root=tmp_path, enable_shell=True))
    diagnostics = compiler.check(result.plan, tools=tools)
    from sophon_dsl.diagnostics import has_errors
    assert not has_errors(diagnostics), [str(d) for d in diagnostics]
