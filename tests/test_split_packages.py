"""The packages split by job (sophon_dsl.mcp, sophon_dsl.llm.providers): their modules import
each other without loops, the old import paths still give every public name, and importing them
loads no optional SDK."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import sophon_dsl

ROOT = Path(sophon_dsl.__file__).resolve().parent

PACKAGES = {
    "sophon_dsl.mcp": ROOT / "mcp",
    "sophon_dsl.llm.providers": ROOT / "llm" / "providers",
}


def _imports_within(package: str, folder: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports, at any depth of its code (lazy imports too)."""
    modules = {p.stem for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:  # from . import a, b
                    deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.startswith(package + "."):
                    deps.add(node.module[len(package) + 1:].split(".")[0])
        graph[path.stem] = {d for d in deps if d in modules and d != path.stem}
    return graph


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_loops_inside_the_package(package):
    graph = _imports_within(package, PACKAGES[package])
    # Submodules never import the package's __init__ (which imports them all).
    assert not any("__init__" in deps for deps in graph.values())
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import loop: {' -> '.join(path + (module,))}"
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, path + (module,))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())


def test_importing_the_packages_loads_no_sdk():
    code = ("import sys, sophon_dsl.mcp, sophon_dsl.llm.providers; "
            "print(sorted(m for m in ('mcp', 'openai', 'anthropic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("package,names", [
    ("sophon_dsl.mcp", [
        "MCP_CONNECTION_FAILED", "MCP_ERROR", "MCP_TOOL_ERROR", "McpConnection", "McpServerConfig",
        "McpToolError", "McpToolSource", "close_all", "convert_result", "is_mcp_config_file",
        "is_mcp_source", "load_mcp_config", "load_mcp_tools", "parse_mcp_source",
        "risk_from_annotations", "shared_connection", "tool_to_spec"]),
    ("sophon_dsl.llm.providers", [
        "OpenAIProvider", "AnthropicProvider", "ScriptedProvider", "FailoverProvider",
        "StreamInterruptedError", "get_provider", "is_retryable_status", "to_provider_error",
        "backoff_delay", "DEFAULT_OPENAI_MODEL", "DEFAULT_ANTHROPIC_MODEL",
        "DEFAULT_ANTHROPIC_MAX_TOKENS", "openai_response_format"]),
])
def test_the_old_import_paths_keep_their_names(package, names):
    module = __import__(package, fromlist=["*"])
    assert [n for n in names if not hasattr(module, n)] == []
    assert set(names) <= set(module.__all__)
